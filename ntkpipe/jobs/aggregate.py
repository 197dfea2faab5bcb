"""The aggregation job: run stores (and their final stores) → one study dataset with the sweep axes
as dimensions.

Points of the sweep fill a grid over the axes' values (a union of sub-grids leaves NaN where no run
exists); other dimensions (``time``, ``test_point``, …) are outer-joined, so series share the union
of the runs' checkpoint times (NaN where a run has none). Study summaries (power-law and log-law
fits, phases) are added as variables over their ``by`` axes, theory residuals per run
(:mod:`ntkpipe.jobs.residuals`); every variable and coordinate is described and the dataset carries its
provenance (:mod:`ntkpipe.jobs.describe`).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.jobs.describe import describe, provenance
from ntkpipe.jobs.residuals import theory_residuals
from ntkpipe.jobs.run_dataset import run_dataset
from ntkpipe.measure.fits import FITS
from ntkpipe.plots.style import final_value
from ntkpipe.study.plan import StudyPlan
from ntkpipe.theory import phases
from ntkpipe.store import write_store


def axis_coords(axes: list[str], points: list[dict]) -> dict[str, list]:
    """Each axis' values in order of first appearance, numbers sorted ascending."""
    coords = {}
    for a in axes:
        values = list(dict.fromkeys(p[a] for p in points))
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            values = sorted(values)
        coords[a] = values
    return coords


def aggregate_study(plan: StudyPlan, out: str | Path) -> Path:
    """Merge the run stores of ``plan`` into ``out``."""
    study = plan.study
    axes = study.axes
    pieces, run_attrs = [], []
    for job, point in zip(plan.runs, study.points):
        ds = run_dataset(job, plan.finals.get(job.id)).drop_vars(["step", "epoch"])
        run_attrs.append(ds.attrs)
        ds = ds.drop_attrs()
        ds["run_id"] = job.id
        pieces.append(ds.expand_dims({a: [point[a]] for a in axes}))
    merged = xr.merge(pieces, join="outer", compat="no_conflicts", combine_attrs="drop")
    merged = merged.reindex(axis_coords(axes, study.points))
    merged["run_id"] = merged["run_id"].fillna("").astype(str)
    merged = study_variables(merged, study)
    totals = {k: float(merged[k].sum()) for k in ("seconds_train", "seconds_measure", "seconds_job")}
    merged.attrs.update(provenance(study, run_attrs), seconds=json.dumps(totals))
    return write_store(merged, out, config=plan.aggregate_config(), store_id=plan.tag)


def study_variables(merged: xr.Dataset, study) -> xr.Dataset:
    """The runs merged over the sweep axes, with each axis' spec key (attr ``axis``), the study's
    summaries and theory residuals added, and every variable and coordinate described."""
    for dim in study.axes:  # which spec key a dimension is (``gamma`` may be data.gamma or model.gamma)
        merged[dim].attrs["axis"] = study.axis_keys.get(dim, dim)
    for summary in study.spec.summaries:
        if summary.kind == "predicted_phase":
            merged = merged.merge(predicted_phases(study, summary))
        else:
            merged = merged.merge(summary_variables(merged, summary))
    return describe(merged.merge(theory_residuals(merged)), study)


def _groups(ds: xr.Dataset, by: list[str]):
    """(coordinates, selection) for every combination of the ``by`` axes' values."""
    coords = {a: ds[a].values for a in by}
    for combo in itertools.product(*coords.values()):
        yield combo, dict(zip(by, combo))


def _over(by: list[str], ds: xr.Dataset, name: str, values: list, dtype=None) -> xr.DataArray:
    shape = [ds.sizes[a] for a in by]
    array = np.array(values, dtype=dtype).reshape(shape) if by else np.array(values[0], dtype=dtype)
    return xr.DataArray(array, dims=by, coords={a: ds[a].values for a in by}, name=name)


def summary_variables(ds: xr.Dataset, summary) -> xr.Dataset:
    """``endpoints``: ``<name>`` over ``checkpoint`` = [init, end]; fits: ``<name>`` (the fitted
    exponent/slope) and ``<name>_stderr``; ``measured_phase``: ``<name>`` (strings); each over the
    ``by`` axes."""
    if summary.kind == "endpoints":
        series = ds[summary.y]
        table = xr.concat([series.isel(time=0, drop=True), final_value(series)], dim="checkpoint")
        return xr.Dataset({summary.name: table.assign_coords(checkpoint=["init", "end"])})
    by = summary.by_axes
    if summary.kind == "measured_phase":
        phases = [measured_phase(ds.sel(sel), summary) for _, sel in _groups(ds, by)]
        return xr.Dataset({summary.name: _over(by, ds, summary.name, phases, dtype=object).astype(str)})
    fit = FITS[summary.kind]

    def one(sub: xr.Dataset) -> tuple[float, float]:
        x = np.broadcast_to(sub[summary.x].values.reshape(
            [-1 if d == summary.x else 1 for d in sub[summary.y].dims]), sub[summary.y].shape)
        slope, _, stderr = fit(x, sub[summary.y].values)
        return slope, stderr

    values = [one(ds.sel(sel)) for _, sel in _groups(ds, by)]
    return xr.Dataset({summary.name: _over(by, ds, summary.name, [v[0] for v in values]),
                       f"{summary.name}_stderr": _over(by, ds, summary.name, [v[1] for v in values])})


def measured_phase(sub: xr.Dataset, summary) -> str:
    """The phase of one scaling from its runs along d (``summary.x``); see :class:`SummarySpec`.
    Runs missing from a sparse grid (no run id) are left out; "none" if no run is left."""
    present = sub["run_id"] != ""
    if not bool(present.any()):
        return "none"
    if bool((sub["diverged"].where(present, 0) > 0).any()):
        return "unstable"
    x = summary.x
    largest = sub[x].where(present.any([d for d in present.dims if d != x]), drop=True).values.max()
    at = sub.sel({x: largest})
    loss = at["loss"].where(at["run_id"] != "")
    ratio = float((final_value(loss) / loss.isel(time=0)).mean())
    if ratio > summary.frozen_loss_ratio:
        return "frozen"
    exponent = float(summary_variables(sub, _fit_of(summary)).get(summary.exponent))
    change = float(at[summary.y].where(at["run_id"] != "").mean())
    if exponent < summary.kernel_below or change < summary.min_change:
        return "kernel"
    return "learning"


def _fit_of(summary):
    """The power_law summary a measured_phase reads, over no axis (for one group's runs)."""
    return type(summary)(name=summary.exponent, kind="power_law", x=summary.x, y=summary.y)


def predicted_phases(study, summary) -> xr.Dataset:
    """``<name>``: the phase λ²'s exponents predict for each value of ``by``, and ``<name>_target_term``,
    ``<name>_init_term`` (their exponents of d) and ``<name>_kernel_change`` (the predicted exponent of
    the relative NTK change), from the scaling powers of its runs (:mod:`ntkpipe.theory.phases`)."""
    by = summary.by_axes
    coords = axis_coords(study.axes, study.points)
    found: dict[tuple, phases.Exponents] = {}
    for point, run, scaling in zip(study.points, study.runs, study.scalings):
        found[tuple(point[a] for a in by)] = phases.exponents_from_powers(
            dict(scaling.powers), run.model.depth, run.model.parameterization, run.model.layer_variance is not None)
    keys = list(itertools.product(*(coords[a] for a in by)))
    rows = [found.get(k) for k in keys]
    shape = [len(coords[a]) for a in by]

    def var(values, dtype=float):
        return (by, np.array(values, dtype=dtype).reshape(shape))

    nan = float("nan")
    out = {summary.name: var([phases.predicted_phase(e) if e else "none" for e in rows], object),
           f"{summary.name}_target_term": var([e.target_term if e else nan for e in rows]),
           f"{summary.name}_init_term": var([e.init_term if e else nan for e in rows]),
           f"{summary.name}_kernel_change": var([e.kernel_change if e else nan for e in rows])}
    ds = xr.Dataset(out, coords={a: coords[a] for a in by})
    ds[summary.name] = ds[summary.name].astype(str)
    return ds
