"""The training job: one run of a study, from its resolved spec to its result store."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.measure.context import ModelView, RunContext
from ntkpipe.measure.registry import REGISTRY, VARIABLES
from ntkpipe.models import run_keys
from ntkpipe.stages import run_context
from ntkpipe.store import write_store
from ntkpipe.study.plan import RunJob
from ntkpipe.train.loop import train


def _checkpoint_measure(run: RunContext):
    items = [m for m in run.spec.measure if REGISTRY[m.name].when == "checkpoint" and m.name != "loss"]

    def measure(model, index: int, last: bool) -> dict:
        view = ModelView(model, run, index, last)
        out = REGISTRY["loss"].compute(view, None)  # always: it detects divergence
        for item in items:
            out.update(REGISTRY[item.name].compute(view, item))
        return out

    return measure


def _variable(name: str, value, n_time: int) -> tuple[tuple[str, ...], np.ndarray]:
    """(dims, values) of a measured variable, checked against the dims the registry declares."""
    dims = VARIABLES[name].dims
    value = np.asarray(value)
    if value.ndim != len(dims) or ("time" in dims and value.shape[0] != n_time):
        raise ValueError(f"measurement variable {name!r} has shape {value.shape}, expected dims {dims}")
    return dims, value


def train_run(job: RunJob, out: str | Path) -> Path:
    """Train one run and write its store: series over ``time``, final measurements, timings.

    Dimensions other than ``time`` (``test_point``, ``mode``, …) are indexed from 1.
    """
    tic = time.perf_counter()
    spec = job.spec
    run = run_context(spec, job.stage_paths)
    _, batch_key = run_keys(spec.seed)
    traj = train(run.model0, run.data.x_train, run.data.y_train, spec.train, key=batch_key,
                 measure=_checkpoint_measure(run), label=f"run {job.id[:8]}")
    requested = {v.name for m in spec.measure for v in REGISTRY[m.name].variables}
    values = {k: v for k, v in traj.series.items() if k in requested}
    tic_final = time.perf_counter()
    if not traj.diverged:
        for item in spec.measure:
            m = REGISTRY[item.name]
            if m.when == "final" and not (m.where_applicable and m.unmet(spec)):
                values.update(m.compute(run, traj, item))
    seconds_final = time.perf_counter() - tic_final
    ds = xr.Dataset({name: _variable(name, value, len(traj.steps)) for name, value in values.items()},
                    coords={"time": traj.time, "step": ("time", traj.steps), "epoch": ("time", traj.epoch)})
    ds = ds.assign_coords({d: np.arange(1, ds.sizes[d] + 1) for d in ds.dims if d not in ds.coords})
    ds["diverged"] = int(traj.diverged)
    ds["seconds_train"] = traj.seconds["train"]
    ds["seconds_measure"] = traj.seconds["measure"] + seconds_final
    ds["seconds_job"] = time.perf_counter() - tic
    return write_store(ds, out, config=job.config, store_id=job.id)
