"""The aggregation job: run stores (and their final stores) → one study dataset (layouts:
:mod:`ntkpipe.layout`).

A sweep whose points are the full product of its axes' values is a grid: the axes are dimensions.
Any other sweep (a union of sub-grids) has one entry per run along ``run``, the axes coordinates
along it, so no variable has holes. Other dimensions (``time``, ``test_point``, …) are outer-joined,
so series share the union of the runs' checkpoint times (NaN where a run has none). A requested
series or scalar that no run recorded is NaN. Study summaries (power-law and log-law fits, phases)
are variables over their ``by`` axes (grid), or along ``run`` with each run holding its group's value
(runs: ``ds.t_half_exponent.groupby("depth").first()``); a group without finite data gives NaN.
Theory residuals are added per run (:mod:`ntkpipe.jobs.residuals`); every variable and coordinate is
described and the dataset carries its provenance (:mod:`ntkpipe.jobs.describe`).
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
from ntkpipe.layout import RUN, axis_order, final_value, is_full_grid, sub_grid
from ntkpipe.measure.fits import FITS
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.store import write_store
from ntkpipe.study.plan import StudyPlan
from ntkpipe.theory import phases


def aggregate_study(plan: StudyPlan, out: str | Path) -> Path:
    """Merge the run stores of ``plan`` into ``out``."""
    study = plan.study
    axes = study.axes
    pieces, run_attrs = [], []
    for job in plan.runs:
        ds = run_dataset(job, plan.finals.get(job.id)).drop_vars(["step", "epoch"])
        run_attrs.append(ds.attrs)
        ds = ds.drop_attrs()
        ds["run_id"] = job.id
        pieces.append(ds)
    layout = _grid if is_full_grid(axes, study.points) else _runs
    merged = _declared(layout(pieces, axes, study.points), {m.name for run in study.runs for m in run.measure})
    merged = study_variables(merged, study)
    totals = {k: float(merged[k].sum()) for k in ("seconds_train", "seconds_measure", "seconds_job")}
    merged.attrs.update(provenance(study, run_attrs), seconds=json.dumps(totals))
    return write_store(merged, out, config=plan.aggregate_config(), store_id=plan.tag)


def axis_coords(axes: list[str], points: list[dict]) -> dict[str, list]:
    """Each axis' values in order of first appearance, numbers sorted ascending."""
    return {a: axis_order([p[a] for p in points]) for a in axes}


def study_variables(merged: xr.Dataset, study) -> xr.Dataset:
    """The runs merged (either layout), with each axis' spec key (attr ``axis``), the study's
    summaries and theory residuals added, and every variable and coordinate described."""
    for dim in study.axes:  # which spec key a dimension is (``gamma`` may be data.gamma or model.gamma)
        merged[dim].attrs["axis"] = study.axis_keys.get(dim, dim)
    for summary in study.spec.summaries:
        if summary.kind == "predicted_phase":
            merged = merged.merge(predicted_phases(study, summary, merged))
        elif summary.kind == "measured_phase":
            merged = merged.merge(measured_phases(study, summary, merged))
        else:
            merged = merged.merge(summary_variables(merged, summary))
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


def _group_keys(ds: xr.Dataset, by: list[str]) -> list[tuple]:
    """Every combination of the ``by`` axes' values (grid), or every one that has runs, in run order (runs)."""
    if not by:
        return [()]
    if RUN in ds.dims:
        return list(dict.fromkeys(zip(*(ds[a].values.tolist() for a in by))))
    return list(itertools.product(*(ds[a].values.tolist() for a in by)))


def _over(by: list[str], ds: xr.Dataset, name: str, values: list, dtype=None) -> xr.DataArray:
    """One value per group of :func:`_group_keys` as a variable: over the ``by`` dims (grid), or along
    ``run``, each run holding its group's value (runs); a scalar without ``by``."""
    values = np.array(values, dtype=dtype)
    if not by:
        return xr.DataArray(values[0], name=name)
    if RUN in ds.dims:
        index = {key: i for i, key in enumerate(_group_keys(ds, by))}
        return xr.DataArray(values[[index[k] for k in zip(*(ds[a].values.tolist() for a in by))]], dims=RUN,
                            name=name)
    return xr.DataArray(values.reshape([ds.sizes[a] for a in by]), dims=by, coords={a: ds[a].values for a in by},
                        name=name)


def summary_variables(ds: xr.Dataset, summary) -> xr.Dataset:
    """``endpoints``: ``<name>`` over ``checkpoint`` = [init, end]; fits: ``<name>`` (the fitted
    exponent/slope, NaN with fewer than 3 finite points) and ``<name>_stderr``; each per group of
    the ``by`` axes (:func:`_over`), computed on its sub-grid."""
    if summary.kind == "endpoints":
        series = ds[summary.y]
        table = xr.concat([series.isel(time=0, drop=True), final_value(series)], dim="checkpoint")
        return xr.Dataset({summary.name: table.assign_coords(checkpoint=["init", "end"])})
    by = summary.by_axes
    fit = FITS[summary.kind]

    def one(sub: xr.Dataset) -> tuple[float, float]:
        x = np.broadcast_to(sub[summary.x].values.reshape(
            [-1 if d == summary.x else 1 for d in sub[summary.y].dims]), sub[summary.y].shape)
        slope, _, stderr = fit(x, sub[summary.y].values)
        return slope, stderr

    values = [one(sub_grid(ds, dict(zip(by, key)))) for key in _group_keys(ds, by)]
    return xr.Dataset({summary.name: _over(by, ds, summary.name, [v[0] for v in values]),
                       f"{summary.name}_stderr": _over(by, ds, summary.name, [v[1] for v in values])})


def measured_phases(study, summary, ds: xr.Dataset) -> xr.Dataset:
    """``<name>``: the measured phase of each group of ``by`` (:func:`measured_phase`), and beside it
    ``<name>_exponent`` ± ``<name>_exponent_stderr`` (the power-law fit of y over x it judges) and
    ``<name>_predicted_exponent`` (p = min(T − I, 0) of the group's scaling powers), per group in
    ``ds``'s layout (:func:`_over`)."""
    by = summary.by_axes
    keys = _group_keys(ds, by)
    predicted = [e.kernel_change if e else float("nan") for e in _group_exponents(study, by, keys)]
    rows = [measured_phase(sub_grid(ds, dict(zip(by, key))), summary, p) for key, p in zip(keys, predicted)]
    name = summary.name
    return xr.Dataset({name: _over(by, ds, name, [r[0] for r in rows], object).astype(str),
                       f"{name}_exponent": _over(by, ds, name, [r[1] for r in rows]),
                       f"{name}_exponent_stderr": _over(by, ds, name, [r[2] for r in rows]),
                       f"{name}_predicted_exponent": _over(by, ds, name, predicted)})


def measured_phase(sub: xr.Dataset, summary, predicted: float) -> tuple[str, float, float]:
    """The phase of one scaling from its runs along d (``summary.x``), with the fitted exponent b
    and its standard error s of y over d that it judges against the ``predicted`` exponent
    (:func:`ntkpipe.theory.phases.exponent_phase`); see :class:`SummarySpec`. Runs missing from a
    sparse grid (no run id) are left out; "none" if no run is left."""
    fit = summary_variables(sub, _fit_of(summary))
    exponent, stderr = float(fit[summary.exponent]), float(fit[f"{summary.exponent}_stderr"])
    present = sub["run_id"] != ""
    if not bool(present.any()):
        return "none", exponent, stderr
    if bool((sub["diverged"].where(present, 0) > 0).any()):
        return "unstable", exponent, stderr
    x = summary.x
    largest = sub[x].where(present.any([d for d in present.dims if d != x]), drop=True).values.max()
    at = sub.sel({x: largest})
    loss = at["loss"].where(at["run_id"] != "")
    if float((final_value(loss) / loss.isel(time=0)).mean()) > summary.frozen_loss_ratio:
        return "frozen", exponent, stderr
    if float(at[summary.y].where(at["run_id"] != "").mean()) < summary.min_change:
        return "kernel", exponent, stderr
    return phases.exponent_phase(exponent, stderr, predicted, summary.stderrs), exponent, stderr


def _fit_of(summary):
    """The power_law summary a measured_phase reads, over no axis (for one group's runs)."""
    return type(summary)(name=summary.exponent, kind="power_law", x=summary.x, y=summary.y)


def _group_exponents(study, by: list[str], keys: list[tuple]) -> list[phases.Exponents | None]:
    """The :class:`~ntkpipe.theory.phases.Exponents` of each group ``keys`` of ``by`` from the scaling
    powers of its runs (None for a group without runs)."""
    found: dict[tuple, phases.Exponents] = {}
    for point, run, scaling in zip(study.points, study.runs, study.scalings):
        found[tuple(point[a] for a in by)] = phases.exponents_from_powers(
            dict(scaling.powers), run.model.depth, run.model.parameterization, run.model.layer_variance is not None)
    return [found.get(k) for k in keys]


def predicted_phases(study, summary, ds: xr.Dataset) -> xr.Dataset:
    """``<name>``: the phase λ²'s exponents predict for each value of ``by``, and ``<name>_target_term``,
    ``<name>_init_term`` (their exponents of d) and ``<name>_kernel_change`` (the predicted exponent of
    the relative NTK change), from the scaling powers of its runs (:mod:`ntkpipe.theory.phases`); per
    group of ``by`` in ``ds``'s layout (:func:`_over`), "none"/NaN for a grid's groups without runs."""
    by = summary.by_axes
    rows = _group_exponents(study, by, _group_keys(ds, by))
    nan = float("nan")

    def var(values, dtype=float):
        return _over(by, ds, summary.name, values, dtype)

    out = xr.Dataset({summary.name: var([phases.predicted_phase(e) if e else "none" for e in rows], object),
                      f"{summary.name}_target_term": var([e.target_term if e else nan for e in rows]),
                      f"{summary.name}_init_term": var([e.init_term if e else nan for e in rows]),
                      f"{summary.name}_kernel_change": var([e.kernel_change if e else nan for e in rows])})
    out[summary.name] = out[summary.name].astype(str)
    return out
