"""The training job: one run of a study, from its resolved spec to its result store."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.data import eigenvector_sign_targets, load_dataset
from ntkpipe.measure.context import ModelView, RunContext
from ntkpipe.measure.registry import REGISTRY, VARIABLES
from ntkpipe.models import build_model, run_keys
from ntkpipe.spec.plan import RunJob
from ntkpipe.spec.schema import RunSpec
from ntkpipe.store import read_store, write_store
from ntkpipe.train.loop import train


def run_context(spec: RunSpec, label_stage: Path | None = None) -> RunContext:
    """The run's data (with eigenvector labels from ``label_stage`` if asked) and initial model."""
    data = load_dataset(spec.data)
    eigen = None
    if spec.data.labels.kind == "eigenvector_sign":
        eigen = read_store(label_stage).load()
        data = data.with_targets(eigenvector_sign_targets(eigen["eigenvectors"].values, spec.data.labels.eigen_index))
    model0 = build_model(spec.model, data.x_train.shape[1], data.n_outputs, spec.seed)
    return RunContext(spec, data, model0, eigen)


def _checkpoint_measure(run: RunContext):
    items = [m for m in run.spec.measure if REGISTRY[m.name].when == "checkpoint" and m.name != "loss"]

    def measure(model) -> dict:
        view = ModelView(model, run)
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
    run = run_context(spec, job.stage_paths.get("labels"))
    _, batch_key = run_keys(spec.seed)
    traj = train(run.model0, run.data.x_train, run.data.y_train, spec.train, key=batch_key,
                 measure=_checkpoint_measure(run), label=f"run {job.id[:8]}")
    requested = {v.name for m in spec.measure for v in REGISTRY[m.name].variables}
    values = {k: v for k, v in traj.series.items() if k in requested}
    tic_final = time.perf_counter()
    if not traj.diverged:
        for item in spec.measure:
            m = REGISTRY[item.name]
            if m.when == "final" and not (m.theory and m.requires(spec)):  # theory only where it applies
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
