"""The aggregation job: run stores → one study dataset with the sweep axes as dimensions.

Points of the sweep fill a grid over the axes' values (a union of sub-grids leaves NaN where no run
exists); other dimensions (``time``, ``test_point``, …) are outer-joined, so series share the union
of the runs' checkpoint times (NaN where a run has none). Study summaries (power-law and log-law
fits) are added as variables over their ``by`` axis.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.measure.fits import FITS
from ntkpipe.plots.style import final_value
from ntkpipe.study.plan import StudyPlan
from ntkpipe.store import read_store, write_store


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
    pieces = []
    for job, point in zip(plan.runs, study.points):
        ds = read_store(job.path, expect_id=job.id).load().drop_vars(["step", "epoch"]).drop_attrs()
        ds["run_id"] = job.id
        pieces.append(ds.expand_dims({a: [point[a]] for a in axes}))
    merged = xr.merge(pieces, join="outer", compat="no_conflicts", combine_attrs="drop")
    merged = merged.reindex(axis_coords(axes, study.points))
    merged["run_id"] = merged["run_id"].fillna("").astype(str)
    for dim in axes:  # which spec key a dimension is (``gamma`` may be data.gamma or model.gamma)
        merged[dim].attrs["axis"] = study.axis_keys.get(dim, dim)
    for summary in study.spec.summaries:
        merged = merged.merge(summary_variables(merged, summary))
    totals = {k: float(merged[k].sum()) for k in ("seconds_train", "seconds_measure", "seconds_job")}
    merged.attrs.update(study=study.name, variant=study.variant, spec_path=str(study.path),
                        study_spec=json.dumps(study.spec.model_dump(mode="json"), sort_keys=True),
                        seconds=json.dumps(totals))
    return write_store(merged, out, config=plan.aggregate_config(), store_id=plan.tag)


def summary_variables(ds: xr.Dataset, summary) -> xr.Dataset:
    """``endpoints``: ``<name>`` over ``checkpoint`` = [init, end]; fits: ``<name>`` (the fitted
    exponent/slope) and ``<name>_stderr``, over ``summary.by``."""
    if summary.kind == "endpoints":
        series = ds[summary.y]
        table = xr.concat([series.isel(time=0, drop=True), final_value(series)], dim="checkpoint")
        return xr.Dataset({summary.name: table.assign_coords(checkpoint=["init", "end"])})
    fit = FITS[summary.kind]

    def one(sub: xr.Dataset) -> tuple[float, float]:
        x = np.broadcast_to(sub[summary.x].values.reshape(
            [-1 if d == summary.x else 1 for d in sub[summary.y].dims]), sub[summary.y].shape)
        slope, _, stderr = fit(x, sub[summary.y].values)
        return slope, stderr

    if summary.by is None:
        slope, stderr = one(ds)
        return xr.Dataset({summary.name: slope, f"{summary.name}_stderr": stderr})
    values = [one(ds.sel({summary.by: v})) for v in ds[summary.by].values]
    return xr.Dataset({summary.name: (summary.by, [v[0] for v in values]),
                       f"{summary.name}_stderr": (summary.by, [v[1] for v in values])},
                      coords={summary.by: ds[summary.by].values})
