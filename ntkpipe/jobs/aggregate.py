"""The aggregation job: run stores (and their final stores) → one study dataset (layouts:
:mod:`ntkpipe.layout`).

A sweep whose points are the full product of its axes' values is a grid: the axes are dimensions.
Any other sweep (a union of sub-grids) has one entry per run along ``run``, the axes coordinates
along it, so no variable has holes. Other dimensions (``time``, ``test_point``, …) are outer-joined,
so series share the union of the runs' checkpoint times (NaN where a run has none). A requested
series or scalar that no run recorded is NaN. Study summaries (power-law and log-law fits, phases;
:mod:`ntkpipe.summaries`) are variables over their ``by`` axes (grid), or along ``run`` with each run
holding its group's value (runs: ``ds.t_half_exponent.groupby("depth").first()``).
Theory residuals are added per run (:mod:`ntkpipe.jobs.residuals`); every variable and coordinate is
described and the dataset carries its provenance (:mod:`ntkpipe.jobs.describe`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.data.dataset import output_classes
from ntkpipe.jobs.describe import describe, provenance
from ntkpipe.jobs.residuals import theory_residuals
from ntkpipe.jobs.run_dataset import run_dataset, without_attrs
from ntkpipe.jobs.worker_processes import worker_job
from ntkpipe.labels import CLASS
from ntkpipe.layout import RUN, axis_order, index_runs, is_full_grid
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.store import write_store
from ntkpipe.study.plan import StudyPlan
from ntkpipe.summaries import SUMMARY_KINDS, summary_options
from ntkpipe.verdicts.evaluate import claims_dataset, verdicts


@worker_job
def aggregate_study(plan: StudyPlan, out: str | Path) -> Path:
    """Merge the run stores of ``plan`` into ``out``, with its summaries, theory residuals and the verdicts
    of its claims (``claim_<name>_measured``, ``_expected``, ``_pass``)."""
    study = plan.study
    axes = study.axes
    pieces, run_attrs = [], []
    for job in plan.runs:
        ds = run_dataset(job, plan.finals.get(job.id)).drop_vars(["step", "epoch"])
        run_attrs.append(ds.attrs)
        ds = without_attrs(ds)
        ds["run_id"] = job.id
        pieces.append(ds)
    layout = _grid if is_full_grid(axes, study.points) else _runs
    merged = _declared(layout(pieces, axes, study.points), {m.name for run in study.runs for m in run.measure})
    merged = study_variables(merged, study)
    if study.spec.claims:  # the claims' verdicts, read as a reader of the dataset reads it (runs indexed)
        merged = merged.merge(claims_dataset(verdicts(plan.tag, study.spec.claims, index_runs(merged, out),
                                                       study.variant)))
    totals = {k: float(merged[k].sum()) for k in ("seconds_train", "seconds_measure", "seconds_job")}
    merged.attrs.update(provenance(study, run_attrs), seconds=json.dumps(totals))
    if classes := {job.id: names for job in plan.runs if (names := output_classes(job.spec.data))}:
        merged.attrs[CLASS] = json.dumps(classes)  # attrs outlive selections (a figure's where: {output: 3})
    return write_store(merged, out, config=plan.aggregate_config(), store_id=plan.tag)


def axis_coords(axes: list[str], points: list[dict]) -> dict[str, list]:
    """Each axis' values in order of first appearance, numbers sorted ascending."""
    return {a: axis_order([p[a] for p in points]) for a in axes}


def study_variables(merged: xr.Dataset, study) -> xr.Dataset:
    """The runs merged (either layout), with each axis' spec key (attr ``axis``), the study's
    summaries and theory residuals added, and every variable and coordinate described."""
    for dim in study.axes:  # which spec key a dimension is (``gamma`` may be data.gamma or model.gamma)
        merged[dim].attrs["axis"] = study.axis_keys.get(dim, dim)
    for summary in map(summary_options, study.spec.summaries):
        merged = merged.merge(SUMMARY_KINDS[summary.kind].compute(summary, merged, study))
    residuals = theory_residuals(merged).drop_vars(RUN, errors="ignore")  # no numbering of the runs
    return describe(merged.merge(residuals), study)


def _grid(pieces: list[xr.Dataset], axes: list[str], points: list[dict]) -> xr.Dataset:
    """The grid layout: every run at its point of the axes' product."""
    merged = xr.merge([ds.expand_dims({a: [point[a]] for a in axes}) for ds, point in zip(pieces, points)],
                      join="outer", compat="no_conflicts", combine_attrs="drop")
    merged = merged.reindex(axis_coords(axes, points))
    merged["run_id"] = merged["run_id"].fillna("").astype(str)
    return merged


def _runs(pieces: list[xr.Dataset], axes: list[str], points: list[dict]) -> xr.Dataset:
    """The runs layout: the runs along ``run`` in sweep order, each axis a coordinate along it (the
    stores' encodings dropped: an integer variable some runs lack becomes float with NaN)."""
    merged = xr.concat([ds.drop_encoding().expand_dims(RUN) for ds in pieces], dim=RUN, data_vars="all",
                       coords="minimal", compat="equals", join="outer", combine_attrs="drop")
    return merged.assign_coords({a: (RUN, [p[a] for p in points]) for a in axes})


def _declared(ds: xr.Dataset, measurements: set[str]) -> xr.Dataset:
    """``ds`` with every requested scalar or series that no run recorded as NaN (e.g. final measurements
    when every run diverged), so summaries and figures see NaN instead of a missing variable."""
    template = xr.full_like(ds["run_id"], np.nan, dtype=float)
    for name in sorted(measurements):
        for var in REGISTRY[name].variables:
            if var.name not in ds and set(var.dims) <= set(ds.dims) & {"time"}:
                ds[var.name] = template.expand_dims(time=ds["time"]).transpose(..., "time") if var.dims else template
    return ds
