"""The training job: one run of a study, from its resolved spec to its result store."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ntkpipe.jobs.describe import describe
from ntkpipe.jobs.lineage import FINAL_SNAPSHOT, finished, lineage_id
from ntkpipe.jobs.lineage import record as record_run
from ntkpipe.jobs.measured import checkpoint_variables, final_values, measured_dataset
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.measure.context import CheckpointView, KernelView, ModelView, PackedView, RunContext, scheduled
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.stages import run_context
from ntkpipe.store import write_store
from ntkpipe.study.final_items import FINAL_ITEMS_ATTR, final_items_attr
from ntkpipe.study.plan import RunJob
from ntkpipe.train.driver import Trajectory, drive, stepper_factory
from ntkpipe.train.final_state import state_variables
from ntkpipe.train.kernel_dynamics import KernelOutputs
from ntkpipe.train.packed import PackCheckpoint
from ntkpipe.train.reuse import SameRecord


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


def _reference(run: RunContext, path) -> dict[str, float]:
    """The final value of what the run's model kind reads from its trained network's run store; NaN
    where that network diverged (said on stderr): the run then has nothing to follow and diverges at
    its first step, like the network, instead of failing its study."""
    kind = run.spec.model.kind
    name = MODEL_KINDS[kind].reference
    if name is None:
        return {}
    store = run.stages["reference"]
    if int(store["diverged"]) or not np.isfinite(store[name].values[-1]):
        print(f"ntkpipe: {path}: the network run that model.kind {kind!r} reads diverged, so it has no final "
              f"{name}: this run is diverged too (to fit it, lower the network's train.optimizer.lr)", file=sys.stderr)
        return {name: float("nan")}
    return {name: float(store[name].values[-1])}


def same_record(run: RunContext) -> SameRecord:
    """Whether the run's checkpoint measurements at (index, last) in one run of its lineage and at
    (index', last') in another are taken alike: those taken every n-th checkpoint (an ``every``
    option) are due at both or at neither; the others are taken at every checkpoint."""
    every = [item.options["every"] for item in run.spec.measure
             if REGISTRY[item.name].when == "checkpoint" and "every" in item.options]

    def same(index: int, last: bool, other: int, other_last: bool) -> bool:
        return all(scheduled(index, last, n) == scheduled(other, other_last, n) for n in every)

    return same


def checkpoint_view(checkpoint, member: int, run: RunContext, index: int, last: bool) -> CheckpointView:
    """What a stepper gives at a checkpoint as measurements read it: member ``member``'s slices of a
    pack, a kernel model's outputs and Gram, or a network."""
    if isinstance(checkpoint, PackCheckpoint):
        return PackedView(checkpoint, member, run, index, last)
    if isinstance(checkpoint, KernelOutputs):
        return KernelView(run, index, last, *checkpoint)
    return ModelView(checkpoint, run, index, last)


def member_measures(runs: list[RunContext]):
    """The checkpoint measurement of each member (run ``runs[i]``) of a stepper, on its view."""
    measures = [checkpoint_measure(run) for run in runs]
    return [lambda checkpoint, index, last, i=i: measures[i](checkpoint_view(checkpoint, i, runs[i], index, last))
            for i in range(len(runs))]


def resume_file(out: Path, suffix: str = ".resume.npz") -> Path:
    """Where the training job of the store ``out`` keeps its resume snapshot: beside the store, outside
    Snakemake's ``directory()`` output (removed before a retry), until the store is written."""
    return out.with_name(out.name + suffix)


def remove_resume_file(path: Path) -> None:
    """Remove a resume snapshot and the temporary files of its killed writes."""
    path.unlink(missing_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        stale.unlink(missing_ok=True)


def _evolve(job: RunJob, run: RunContext, out: Path) -> Trajectory:
    """The run's model kind stepped through the driver, with measurements at every checkpoint: resumed
    from its snapshot if an earlier attempt was killed, else made of the stored runs of its lineage
    that reach its horizon (:mod:`ntkpipe.train.reuse`), else continued from a shorter one
    (:mod:`ntkpipe.jobs.lineage`)."""
    stepper = stepper_factory(job.spec.model.kind)(run, _reference(run, job.stage_paths.get("reference")))
    n_train, resume, lineage = len(run.data.y_train), resume_file(out), lineage_id(job.config)
    stored = None if resume.exists() else [finished(out, lineage)]
    return drive(stepper, job.spec.train, member_measures([run]), n_train=n_train,
                 etas=[job.spec.train.optimizer.lr], label=job.label or f"run {job.id[:8]}",
                 identity={"ids": [job.id], "lineages": [lineage]}, resume=resume, stored=stored,
                 same_record=same_record(run))[0]


def train_run(job: RunJob, out: str | Path) -> Path:
    """Train one run and write its store (:func:`write_run_store`); then its resume snapshot goes."""
    tic = time.perf_counter()
    out = Path(out)
    run = run_context(job.spec, job.stage_paths)
    path = write_run_store(job, run, _evolve(job, run, out), out, tic)
    remove_resume_file(resume_file(out))
    return path


def write_run_store(job: RunJob, run: RunContext, traj: Trajectory, out: str | Path, tic: float) -> Path:
    """The store of a trained run: series over ``time``, the final measurements ``job.finals``
    (listed in the attribute ``final_items``), the final state they are computed from (so that a
    final job can add others, :mod:`ntkpipe.train.final_state`), timings (``seconds_job`` since
    ``tic``); every variable and coordinate carries its CF attrs (:func:`ntkpipe.jobs.describe.describe`).
    Its attrs name its ``lineage`` and the optimizer steps it took itself (``steps_trained``); a single
    run's final snapshot (:data:`ntkpipe.jobs.lineage.FINAL_SNAPSHOT`) is a file of the store, indexed
    under its lineage for longer runs to continue."""
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
    lineage = lineage_id(job.config)
    ds.attrs.update(lineage=lineage, steps_trained=int(traj.steps_trained))
    files = {FINAL_SNAPSHOT: traj.snapshot} if traj.snapshot is not None else None
    path = write_store(describe(ds), out, config=job.config, store_id=job.id, files=files)
    if files:
        record_run(Path(out), lineage, int(traj.steps[-1]))
    return path
