"""The aggregation job: run stores → one study dataset with the sweep axes as dimensions.

Points of the sweep fill a grid over the axes' values (a union of sub-grids leaves NaN where no run
exists); series share the union of the runs' checkpoint times (NaN where a run has none). Study
summaries (power-law and log-law fits) are added as variables over their ``by`` axis.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.measure.fits import FITS
from ntkpipe.spec.plan import StudyPlan
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
    coords = axis_coords(axes, study.points)
    runs = [(job, read_store(job.path, expect_id=job.id)) for job in plan.runs]
    times = np.unique(np.concatenate([ds["time"].values for _, ds in runs]))
    shape = tuple(len(coords[a]) for a in axes)
    data: dict[str, np.ndarray] = {}
    dims: dict[str, tuple] = {}
    run_ids = np.full(shape, "", dtype=object)
    for (job, ds), point in zip(runs, study.points):
        where = tuple(coords[a].index(point[a]) for a in axes)
        run_ids[where] = job.id
        slots = np.searchsorted(times, ds["time"].values)
        for name, var in ds.data_vars.items():
            series = "time" in var.dims
            if name not in data:
                fill = False if var.dtype == bool else np.nan
                dtype = bool if var.dtype == bool else np.float64
                data[name] = np.full(shape + ((len(times),) if series else ()), fill, dtype=dtype)
                dims[name] = tuple(axes) + (("time",) if series else ())
            if series:
                data[name][where + (slots,)] = var.values
            else:
                data[name][where] = var.values
    ds_out = xr.Dataset({name: (dims[name], values) for name, values in data.items()},
                        coords={**{a: coords[a] for a in axes}, "time": times})
    ds_out["run_id"] = (tuple(axes), run_ids.astype(str))
    for summary in study.spec.summaries:
        ds_out = ds_out.merge(summary_variables(ds_out, summary))
    totals = {k: float(ds_out[k].sum()) for k in ("seconds_train", "seconds_measure", "seconds_job") if k in ds_out}
    ds_out.attrs.update(study=study.name, variant=study.variant, spec_path=str(study.path),
                        study_spec=json.dumps(study.spec.model_dump(mode="json"), sort_keys=True),
                        seconds=json.dumps(totals))
    return write_store(ds_out, out, config=plan.aggregate_config(), store_id=plan.tag)


def summary_variables(ds: xr.Dataset, summary) -> xr.Dataset:
    """``<name>`` (the fitted exponent/slope) and ``<name>_stderr``, over ``summary.by``."""
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
