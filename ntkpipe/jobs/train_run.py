"""The training job: one run of a study, from its resolved spec to its result store."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ntkpipe.errors import ResultError
from ntkpipe.jobs.describe import describe
from ntkpipe.jobs.measured import checkpoint_variables, final_values, measured_dataset
from ntkpipe.lang.schema import KERNEL_KINDS, REFERENCE_KINDS
from ntkpipe.measure.context import CheckpointView, KernelView, ModelView, RunContext
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.models import learning_rate_scale, run_keys
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.stages import run_context
from ntkpipe.store import write_store
from ntkpipe.study.final_items import FINAL_ITEMS_ATTR, final_items_attr
from ntkpipe.study.plan import RunJob
from ntkpipe.train.final_state import state_variables
from ntkpipe.train.kernel_dynamics import KernelStart, evolve_kernel
from ntkpipe.train.loop import Trajectory, train


def checkpoint_measure(run: RunContext):
    """The run's checkpoint measurement: a view (model or kernel) → its loss and checkpoint items."""
    items = [m for m in run.spec.measure if REGISTRY[m.name].when == "checkpoint" and m.name != "loss"
             and not (REGISTRY[m.name].where_applicable and REGISTRY[m.name].unmet(run.spec))]

    def measure(view: CheckpointView) -> dict:
        out = REGISTRY["loss"].compute(view, None)  # always: it detects divergence
        for item in items:
            out.update(REGISTRY[item.name].compute(view, item))
        return out

    return measure


def _kernel_start(run: RunContext) -> KernelStart:
    """K₀ and f₀ of the run's network over train ∪ test (the OFE kinds' network is unscaled)."""
    x_all = run.data.x_all
    gram = np.asarray(flatten_gram(empirical_ntk(run.model0, x_all)), np.float64)
    view = ModelView(run.model0, run)
    return KernelStart(gram, np.concatenate([view.f_train, view.f_test]), run.data.y_train)


def _reference(run: RunContext, path) -> dict[str, float]:
    """The final value of what a kernel kind reads from its trained network's run store."""
    kind = run.spec.model.kind
    if kind not in REFERENCE_KINDS:
        return {}
    name = REFERENCE_KINDS[kind]
    store = run.stages["reference"]
    if int(store["diverged"]) or not np.isfinite(store[name].values[-1]):
        raise ResultError(f"{path}: the network run that model.kind {kind!r} reads diverged, so it has no final "
                          f"{name}; fix the network's training (e.g. lower train.optimizer.lr) and rerun")
    return {name: float(store[name].values[-1])}


def _evolve(job: RunJob, run: RunContext) -> Trajectory:
    """The network trained, or the kernel kind evolved, with measurements at every checkpoint."""
    spec, measure, label = job.spec, checkpoint_measure(run), job.label or f"run {job.id[:8]}"
    if spec.model.kind in KERNEL_KINDS:
        return evolve_kernel(spec.model.kind, _kernel_start(run), spec.train, gamma=spec.model.gamma,
                             lr_scale=learning_rate_scale(spec.model),
                             reference=_reference(run, job.stage_paths.get("reference")),
                             measure=lambda i, last, f_tr, f_te, gram: measure(KernelView(run, i, last, f_tr, f_te, gram)),
                             label=label)
    _, batch_key = run_keys(spec.seed)
    return train(run.model0, run.data.x_train, run.data.y_train, spec.train, key=batch_key,
                 measure=lambda model, i, last: measure(ModelView(model, run, i, last)), label=label,
                 lr_scale=learning_rate_scale(spec.model))


def train_run(job: RunJob, out: str | Path) -> Path:
    """Train one run and write its store (:func:`write_run_store`)."""
    tic = time.perf_counter()
    run = run_context(job.spec, job.stage_paths)
    return write_run_store(job, run, _evolve(job, run), out, tic)


def write_run_store(job: RunJob, run: RunContext, traj: Trajectory, out: str | Path, tic: float) -> Path:
    """The store of a trained run: series over ``time``, the final measurements ``job.finals``
    (listed in the attribute ``final_items``), the final state they are computed from (so that a
    final job can add others, :mod:`ntkpipe.train.final_state`), timings (``seconds_job`` since
    ``tic``); every variable and coordinate carries its CF attrs (:func:`ntkpipe.jobs.describe.describe`)."""
    spec = job.spec
    series = checkpoint_variables(spec)
    values = {k: v for k, v in traj.series.items() if k in series}
    tic_final = time.perf_counter()
    values.update(final_values(run, traj, job.finals))
    seconds_final = time.perf_counter() - tic_final
    ds = measured_dataset(values, traj)
    for name, variable in state_variables(traj).items():
        ds[name] = variable
    ds["diverged"] = int(traj.diverged)
    ds["seconds_train"] = traj.seconds["train"]
    ds["seconds_measure"] = traj.seconds["measure"] + seconds_final
    ds["seconds_job"] = time.perf_counter() - tic
    ds.attrs[FINAL_ITEMS_ATTR] = final_items_attr(job.finals)
    return write_store(describe(ds), out, config=job.config, store_id=job.id)
