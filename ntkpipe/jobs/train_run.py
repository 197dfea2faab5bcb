"""The training job: one run of a study, from its resolved spec to its result store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from ntkpipe.data import Dataset, eigenvector_sign_targets, load_dataset
from ntkpipe.measure.accuracy import accuracy
from ntkpipe.measure.crossing import first_crossing, half_loss_time
from ntkpipe.measure.kernel_stats import kernel_alignment, kernel_norm
from ntkpipe.measure.weights import first_layer, first_layer_alignment
from ntkpipe.models import build_model, run_keys
from ntkpipe.ntk import empirical_ntk, flatten_gram, jacobian_alignment
from ntkpipe.spec.plan import RunJob
from ntkpipe.spec.schema import RunSpec
from ntkpipe.store import read_store, write_store
from ntkpipe.theory import deep_linear
from ntkpipe.train.loop import Trajectory, train
from ntkpipe.train.losses import LOSSES


@eqx.filter_jit
def _outputs(model, x):
    return jax.vmap(model)(x)


def run_dataset(spec: RunSpec, label_stage: Path | None = None) -> tuple[Dataset, np.ndarray | None]:
    """The run's data; with eigenvector labels also the (n_all, k) eigenvectors and eigenvalues."""
    data = load_dataset(spec.data)
    if spec.data.labels.kind != "eigenvector_sign":
        return data, None
    eigen = read_store(label_stage)
    vectors = eigen["eigenvectors"].values
    data = data.with_targets(eigenvector_sign_targets(vectors, spec.data.labels.eigen_index))
    return data, eigen


def checkpoint_measure(spec: RunSpec, data: Dataset) -> Callable[[eqx.Module], dict[str, float]]:
    """The function that takes the series measurements of ``spec`` on a model."""
    names = [m.name for m in spec.measure]
    per_example = LOSSES[spec.train.loss]
    dtype = jnp.dtype(spec.train.dtype)
    x_train, y_train = jnp.asarray(data.x_train, dtype), jnp.asarray(data.y_train, dtype)
    x_test, y_test = jnp.asarray(data.x_test, dtype), jnp.asarray(data.y_test, dtype)

    def measure(model) -> dict[str, float]:
        out: dict[str, float] = {}
        f_train = _outputs(model, x_train)
        out["loss"] = float(jnp.mean(per_example(f_train, y_train)))
        if "train_accuracy" in names:
            out["train_accuracy"] = accuracy(f_train, data.y_train)
        if {"test_loss", "test_accuracy"} & set(names):
            f_test = _outputs(model, x_test)
            if "test_loss" in names:
                out["test_loss"] = float(jnp.mean(per_example(f_test, y_test)))
            if "test_accuracy" in names:
                out["test_accuracy"] = accuracy(f_test, data.y_test)
        if {"kernel_norm", "alignment"} & set(names):
            gram = np.asarray(flatten_gram(empirical_ntk(model, data.x_train)))
            if "kernel_norm" in names:
                out["kernel_norm"] = kernel_norm(gram)
            if "alignment" in names:
                out["alignment"] = kernel_alignment(gram, data.y_train)
        if "first_layer_alignment" in names:
            out["first_layer_alignment"] = first_layer_alignment(model, data.beta)
        return out

    return measure


def run_scalars(spec: RunSpec, data: Dataset, model0, traj: Trajectory, eigen) -> dict[str, float]:
    """The per-run scalar measurements, from the recorded series and the initial model."""
    names = {m.name: m for m in spec.measure}
    out: dict[str, float] = {}
    if "t_half" in names:
        out["t_half"] = half_loss_time(traj.time, traj.series["loss"])
    if "t_align" in names:
        threshold = names["t_align"].threshold if names["t_align"].threshold is not None else 0.5
        out["t_align"] = first_crossing(traj.time, traj.series["first_layer_alignment"], threshold, downward=False)
    if "t_half_theory" in names:
        readout = float(jnp.linalg.norm(first_layer(model0).weights[-1]))
        c0 = deep_linear.initial_gain(readout, spec.model.depth)
        s = spec.data.teacher_scale
        out["t_half_theory"] = deep_linear.half_loss_time(c0, s, spec.model.depth) if c0 < s else float("nan")
    j = spec.data.labels.eigen_index
    if "eigenvalue" in names:
        out["eigenvalue"] = float(eigen["eigenvalues"].values[j - 1])
    if "alignment_init" in names:
        phi = eigen["eigenvectors"].values[:, j - 1]
        out["alignment_init"] = float(jacobian_alignment(model0, data.x_all, phi))
    return out


def train_run(job: RunJob, out: str | Path) -> Path:
    """Train one run and write its store (series over ``time``, scalars, timings)."""
    tic = time.perf_counter()
    spec = job.spec
    data, eigen = run_dataset(spec, job.stage_paths.get("labels"))
    model0 = build_model(spec.model, data.x_train.shape[1], data.n_outputs, spec.seed)
    _, batch_key = run_keys(spec.seed)
    traj = train(model0, data.x_train, data.y_train, spec.train, key=batch_key,
                 measure=checkpoint_measure(spec, data), label=f"run {job.id[:8]}")
    scalars = run_scalars(spec, data, model0, traj, eigen)
    requested = [m.name for m in spec.measure]
    ds = xr.Dataset(
        {name: ("time", traj.series[name]) for name in traj.series if name in requested},
        coords={"time": traj.time, "step": ("time", traj.steps), "epoch": ("time", traj.epoch)},
    )
    for name, value in scalars.items():
        ds[name] = value
    ds["diverged"] = traj.diverged
    ds["seconds_train"] = traj.seconds["train"]
    ds["seconds_measure"] = traj.seconds["measure"]
    ds["seconds_job"] = time.perf_counter() - tic
    return write_store(ds, out, config=job.config, store_id=job.id)
