"""The study table: each scalar variable of a study dataset (one value per run) averaged over seeds
at every sweep point, the final value of each series (``<name>_final``, its last finite time) and
every string variable (``predicted_phase``), and a column per value of a variable with one short
dimension of its own (``stein_relerr[stein_vector=v1]``, the Stein check of each test vector), as CSV for the Snakemake report. Every sweep point has
its row (one row for a study without a sweep), never cut; either dataset layout (:mod:`ntkpipe.layout`)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import xarray as xr

from ntkpipe.jobs.worker_processes import worker_job
from ntkpipe.lang.axes import dimension
from ntkpipe.layout import RUN, final_value
from ntkpipe.store import read_store
from ntkpipe.study.plan import StudyPlan


def summary_table(plan: StudyPlan) -> pd.DataFrame:
    """:func:`sweep_table` of ``plan``'s study dataset."""
    return sweep_table(read_store(plan.dataset_path), [dimension(a) for a in plan.study.axes])


def sweep_table(ds: xr.Dataset, axes: list[str]) -> pd.DataFrame:
    """One row per sweep point of ``ds`` without ``seed`` (in sweep order; one row without sweep
    ``axes``), the mean over seeds of every numeric variable that has one value per run and of the
    final value of every series (NaN values, e.g. of diverged runs, skipped), and the values of every
    string variable (distinct values over seeds joined by " / "); run ids and timings
    (``seconds_*``) left out."""
    per_run = set(axes) | {RUN}
    ds = ds.assign(_spread(ds, per_run))
    finals = {f"{n}_final": final_value(v) for n, v in ds.data_vars.items()
              if "time" in v.dims and set(v.dims) <= per_run | {"time"} and np.issubdtype(v.dtype, np.number)}
    ds = ds.assign({n: v for n, v in finals.items() if n not in ds})
    texts = [n for n, v in ds.data_vars.items() if set(v.dims) <= per_run and v.dtype.kind in "OUS" and n != "run_id"]
    names = [n for n, v in ds.data_vars.items()
             if set(v.dims) <= per_run and np.issubdtype(v.dtype, np.number)
             and not cast(str, n).startswith("seconds_")]  # ntkpipe names its variables by str
    frame = ds[names + texts].reset_coords()[[*names, *texts, *(a for a in axes if a in ds.coords and a not in ds.dims)]]
    if not frame.dims:  # one run, no sweep: a table of one row
        frame = frame.expand_dims(RUN)
    frame = frame.to_dataframe().reset_index().drop(columns=[RUN], errors="ignore")
    keys = [a for a in axes if a != "seed"]
    table = frame.drop(columns=["seed"], errors="ignore")
    how = {**{n: "mean" for n in names}, **{n: _distinct for n in texts}}
    if keys:
        return table.groupby(keys, sort=False, dropna=False).agg(how)
    return table.agg(how).to_frame().T


SPREAD_MAX = 8
"""A variable with one dimension of its own of at most this many values gets a column per value."""


def _spread(ds: xr.Dataset, per_run: set[str]) -> dict[str, tuple]:
    """``<name>[<dim>=<value>]``: each value of a numeric variable with one dimension of its own that is
    no time and has at most :data:`SPREAD_MAX` values (e.g. ``stein_relerr`` over the Stein check's test
    vectors), as a per-run variable of its own; the value shown as figures show it (:func:`tick_names`)."""
    from ntkpipe.labels import tick_names

    out = {}
    for name, var in ds.data_vars.items():
        own = [d for d in var.dims if d not in per_run]
        if len(own) != 1 or own[0] == "time" or var.sizes[own[0]] > SPREAD_MAX or not np.issubdtype(var.dtype, np.number):
            continue
        dim = str(own[0])
        values = ds[dim].values.tolist() if dim in ds.coords else list(range(1, var.sizes[dim] + 1))
        for i, shown in enumerate(tick_names(dim, values, plain=True)):
            value = var.isel({dim: i}, drop=True)
            out[f"{name}[{dim}={shown}]"] = (value.dims, value.values)  # the dataset's coords (a run MultiIndex)
    return out


def _distinct(values: pd.Series) -> str:
    """The distinct values of a string column over seeds, in order, joined by " / "."""
    return " / ".join(dict.fromkeys(str(v) for v in values if isinstance(v, str) and v))


@worker_job
def study_table(plan: StudyPlan, out: str | Path) -> Path:
    """Write :func:`summary_table` of ``plan``'s dataset to ``out`` (CSV, 4 significant digits)."""
    summary_table(plan).to_csv(out, float_format="%.4g")
    return Path(out)


@worker_job
def phase_table_file(plan: StudyPlan, out: str | Path) -> Path:
    """Write the phase table of ``plan``'s dataset (:func:`ntkpipe.summaries.phases.phase_table`: one row
    per group of each measured_phase summary, e.g. task × scaling, every row) to ``out`` (CSV)."""
    from ntkpipe.summaries.phases import phase_table

    phase_table(read_store(plan.dataset_path), plan.study).to_csv(out, index=False, float_format="%.4g")
    return Path(out)
