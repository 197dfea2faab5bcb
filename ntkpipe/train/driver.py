"""The one training driver: a model kind's stepper advanced from checkpoint to checkpoint, measured at each.

Every model kind (:mod:`ntkpipe.lang.model_kinds`) trains through :func:`drive`; what differs is its
:class:`Stepper` (a network's optimizer steps, several same-shape networks in one compiled program,
a kernel model's closed form). The driver owns what is common to all:

- the checkpoint schedule: :func:`total_steps` optimizer steps, checkpoints at :func:`checkpoint_steps`,
  time t = η₀ · step, epoch = step / steps per epoch;
- the measurements at every checkpoint (a record per checkpoint, stacked into series);
- divergence: a run is *diverged* when its loss is non-finite at some step, or its parameters at a
  checkpoint (the stepper reports it), or when its loss at a checkpoint exceeds
  ``train.divergence_factor`` times its initial loss (:func:`blew_up`): each stops it there (the
  remaining checkpoints are NaN), however finite it would look later (a ReLU net dead after a blow-up
  settles at the loss of a zero output). It is also diverged when its last measured loss exceeds
  ``EXPLOSION_FACTOR`` times its initial loss (:func:`exploded`; finite but exploding: a run too short
  to overflow, down to a single step, whose series stays recorded);
- progress lines (:class:`ntkpipe.progress.Progress`, in steps) and the final state (:class:`Trajectory`).

A stepper advances k ≥ 1 members (runs) together; a member that diverges stops while the others go on.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import equinox as eqx
import numpy as np

from ntkpipe.data import Dataset
from ntkpipe.errors import NtkpipeError
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import CheckpointSpec, RunSpec, TrainSpec
from ntkpipe.progress import Progress
from ntkpipe.train import snapshot
from ntkpipe.train.reuse import Reuse, SameRecord, reuse
from ntkpipe.train.snapshot import Position, SnapshotMismatch
from ntkpipe.train.stop import requests as stop_requests

EXPLOSION_FACTOR = 10.0
"""A run whose last measured loss exceeds this multiple of its initial loss diverged: it ended an order of
magnitude worse than it started. No run of the default studies ends above its initial loss (the largest
final/initial ratio is 0.99, the largest mid-run ratio 1.4), and the runs that blow up pass 10¹⁶ within
a few checkpoints; a single step with a huge learning rate multiplies the loss by about (η λ_max)²."""


def blew_up(initial: float, loss: float, factor: float) -> bool:
    """Whether a checkpoint's loss stops the run as diverged: non-finite, or L_t > ``factor`` · L_0
    (``train.divergence_factor``), with L_0 the loss at step 0. Its default 10⁶ lies far above the
    healthy runs (the default studies' largest mid-run ratio is 1.4, a catapult's a few) and far below
    the blow-ups (10⁹ and more within a few steps, e.g. of a ReLU net that dies of it)."""
    return bool(not np.isfinite(loss) or loss > factor * initial)


def exploded(initial: float, final: float) -> bool:
    """Whether a run's finite loss exploded: L_T > ``EXPLOSION_FACTOR`` · L_0, with L_0 the loss at step 0
    and L_T the loss at its last checkpoint (False when either is NaN)."""
    return bool(final > EXPLOSION_FACTOR * initial)


def steps_per_epoch(n_train: int, batch_size: int | None) -> int:
    return 1 if batch_size is None else math.ceil(n_train / batch_size)


def total_steps(spec: TrainSpec, n_train: int) -> int:
    """Optimizer steps for ``steps``, ``epochs`` (incl. a last partial batch) or ``max_time`` = η₀ · steps."""
    if spec.steps is not None:
        return spec.steps
    if spec.epochs is not None:
        return spec.epochs * steps_per_epoch(n_train, spec.batch_size)
    assert spec.max_time is not None, "a TrainSpec gives steps, epochs or max_time"
    return math.ceil(spec.max_time / spec.optimizer.lr - 1e-9)


def checkpoint_steps(spec: CheckpointSpec, total: int) -> np.ndarray:
    """Sorted unique steps in [0, total]: 0, the grid of ``spec``, and ``total``."""
    if spec.spacing == "log":
        k_max = int(math.floor(spec.per_decade * math.log10(max(total, 1)))) + 1
        grid = np.round(10.0 ** (np.arange(k_max + 1) / spec.per_decade)).astype(np.int64)
    else:
        grid = np.round(np.linspace(0, total, spec.count + 1)).astype(np.int64)
    grid = grid[grid <= total]
    return np.unique(np.concatenate([[0], grid, [total]]))


@dataclass
class Trajectory:
    """What a training run records: checkpoint steps, measured series, divergence and timings."""

    steps: np.ndarray
    time: np.ndarray
    epoch: np.ndarray
    series: dict[str, np.ndarray]
    diverged: bool
    model: eqx.Module | None
    seconds: dict[str, float] = field(default_factory=dict)
    finals: dict[str, float] = field(default_factory=dict)
    """Numbers the dynamics itself yields (e.g. the OFE's conservation error), for final measurements."""
    steps_trained: int = 0
    """Optimizer steps this run took itself (not those of a shorter run it continued)."""
    snapshot: bytes | None = None
    """The member's final snapshot, as a single run's (what a longer run continues from)."""


def stack_records(records: list[dict], n_checkpoints: int) -> dict[str, np.ndarray]:
    """Per-checkpoint records → series over all ``n_checkpoints`` (NaN after a divergence)."""
    series = {}
    for k in records[0] if records else []:
        series[k] = np.full((n_checkpoints, *np.shape(records[0][k])), np.nan)
        for i, rec in enumerate(records):
            series[k][i] = rec[k]
    return series


class Run(Protocol):
    """What a stepper factory reads of a run: its spec, data and initial model (the training job passes
    the run's :class:`ntkpipe.measure.context.RunContext`, which measurements read too)."""

    spec: RunSpec
    data: Dataset
    model0: eqx.Module


class Stepper(Protocol):
    """How one model kind trains k members from checkpoint to checkpoint. Its state is whatever it
    needs (a pytree of parameters and optimizer state, model state such as BatchNorm statistics,
    precomputed closed-form states); the driver only passes it back."""

    members: int
    continues: bool
    """Whether a longer run may continue its state at a step (nothing in its dynamics depends on the
    total number of steps; :func:`continued`)."""
    splits: bool
    """Whether ``advance`` may split a segment at any step (advancing s₀ → s then s → s₁ gives the state
    of s₀ → s₁, bit for bit): the driver then advances long segments in pieces, so that a stop request
    ends the run within about :data:`PIECE_SECONDS`."""

    def init(self, steps: np.ndarray) -> Any:
        """The state at step 0, given the checkpoint steps (the last is the total)."""
        ...

    def advance(self, state: Any, done: int, target: int) -> tuple[Any, np.ndarray]:
        """The state after steps ``done`` … ``target`` − 1 (``target`` a checkpoint, or any step of a
        stepper that ``splits``), and for each member whether its loss at every step and its parameters
        are finite (a closed form: whether it stays bounded)."""
        ...

    def checkpoint(self, state: Any, member: int) -> Any:
        """What the measurements of ``member`` read at this checkpoint: a network, a
        :class:`ntkpipe.train.packed.PackCheckpoint` (every member's) or a kernel model's
        :class:`ntkpipe.train.kernel_dynamics.KernelOutputs` (the training job views each as
        measurements read it, :func:`ntkpipe.jobs.training.checkpoint_view`)."""
        ...

    def can_diverge(self, state: Any, member: int) -> bool:
        """Whether divergence applies to ``member`` (False for a model without dynamics, e.g. an
        ``ofe_fit`` that no γ̂ fits: its checkpoints are NaN)."""
        ...

    def final(self, state: Any, member: int) -> tuple[eqx.Module | None, dict[str, float]]:
        """``member``'s final model (None for a kernel model) and the numbers its dynamics yields."""
        ...

    def member(self, state: Any, member: int) -> Any:
        """``member``'s state as the stepper of a single run of its model kind holds it (what its final
        snapshot keeps, so that a longer run continues it whether it trains alone or packed)."""
        ...

    def joined(self, states: Sequence[Any]) -> Any:
        """The state of all members from each member's (:meth:`member`'s layout)."""
        ...


Measure = Callable[[Any, int, bool], dict]
"""(checkpoint, index, last) → the measured values (a ``loss`` among them for divergence)."""

SNAPSHOT_SECONDS = 30.0
"""A run with a resume file saves a snapshot at a checkpoint at most this often (wall-clock seconds;
the environment variable ``NTKPIPE_SNAPSHOT_SECONDS`` overrides it), and always at its last checkpoint
and when a stop is requested (:mod:`ntkpipe.train.stop`). A SIGKILL loses at most this much training
(plus a segment)."""

PIECE_SECONDS = 2.0
"""A stepper that ``splits`` advances a segment between two checkpoints in pieces of about this many
seconds (at the rate of its previous piece; a segment shorter than that is one piece, as it would be
without pieces), so that a stop request (SIGTERM, SIGINT) ends the run within about this long: at the
end of the piece, with its state saved there. Splitting changes no number (``Stepper.splits``)."""


class Preempted(NtkpipeError, RuntimeError):
    """The run received SIGTERM (Slurm sends it before preemption and at the time limit) or SIGINT:
    its state is saved, and the next attempt resumes from it."""


def _start(stepper: Stepper, template, ckpts: np.ndarray, identity: dict, resume: Path | None,
           stored: Sequence[Sequence[bytes]] | None, same_record: SameRecord | None, label: str) -> Reuse:
    """Where training starts: a valid ``resume`` snapshot of this run (else it is removed with a
    warning), else for a single run what the ``stored`` runs of its lineage give where one reaches its
    horizon (:func:`ntkpipe.train.reuse.reuse`), else the longest shorter stored run of each member's
    lineage continued (:func:`continued`), else step 0."""
    k = stepper.members
    ends = [stepper.final(template, i) for i in range(k)]
    if resume is not None and resume.exists():
        try:
            snap = snapshot.read(resume)
            for name in ("ids", "steps"):
                if snap.meta.get(name) != identity[name]:
                    raise SnapshotMismatch(f"its {name} {snap.meta.get(name)} differ from this run's {identity[name]}")
            position = snap.position(template, ends)
            print(f"{label}: resuming run {', '.join(identity['ids'])} at step {position.done} of {int(ckpts[-1])} "
                  f"(from {resume})", file=sys.stderr, flush=True)
            return Reuse(position, {}, None)
        except SnapshotMismatch as err:
            warnings.warn(f"{resume}: not a snapshot of this run ({err}); removed, training starts over", stacklevel=3)
            resume.unlink(missing_ok=True)
    snaps = [_readable(member, label) for member in stored or [[] for _ in range(k)]]
    total = int(ckpts[-1])
    if k == 1 and same_record is not None and any(int(s.meta["steps"][-1]) >= total for s in snaps[0]):
        try:
            found = reuse(stepper, snaps[0], template, ends, ckpts, identity["lineages"][0], same_record)
            done = found.position.done
            what = ("nothing to train" if found.position.index == len(ckpts) else
                    f"training from step {done} up to step {total}" if found.final is None else
                    f"training from step {done} up to its last new checkpoint (the state at step {total} is stored)")
            print(f"{label}: {found.measured} of {len(ckpts)} checkpoints read from stored runs of the same lineage; "
                  f"{what}", file=sys.stderr, flush=True)
            return found
        except SnapshotMismatch as err:
            print(f"{label}: not reading the stored runs of the same lineage ({err})", file=sys.stderr, flush=True)
    shorter = [max((s for s in member if int(s.meta["steps"][-1]) < total), key=lambda s: int(s.meta["steps"][-1]),
                   default=None) for member in snaps]
    if any(s is not None for s in shorter):
        try:
            if any(s is None for s in shorter):
                raise SnapshotMismatch(f"only {sum(s is not None for s in shorter)} of its {k} runs have one")
            position = continued(stepper, [s for s in shorter if s is not None], template, ends, ckpts, identity)
            print(f"{label}: continuing from step {position.done} of a shorter run of the same lineage "
                  f"({len(position.records[0])} of {len(ckpts)} checkpoints copied)", file=sys.stderr, flush=True)
            return Reuse(position, {}, None)
        except SnapshotMismatch as err:
            print(f"{label}: not continuing the shorter run of the same lineage ({err}); training from step 0",
                  file=sys.stderr, flush=True)
    return Reuse(Position(0, 0, template, [[] for _ in range(k)], [True] * k, [False] * k, [None] * k, [None] * k,
                          finite=[True] * k), {}, None)


def _readable(stored: Sequence[bytes], label: str) -> list[snapshot.Snapshot]:
    """The snapshots of ``stored`` this ntkpipe reads (another version's are passed over, said on stderr)."""
    out = []
    for data in stored:
        try:
            out.append(snapshot.read(data))
        except SnapshotMismatch as err:
            print(f"{label}: not reading a stored run of the same lineage ({err})", file=sys.stderr, flush=True)
    return out


def continued(stepper: Stepper, donors: Sequence[snapshot.Snapshot], template, ends: list, ckpts: np.ndarray,
              identity: dict) -> Position:
    """The position of a run that continues ``donors``, the final snapshots of a shorter run of each
    member's lineage (:mod:`ntkpipe.jobs.lineage`: the same config but for the horizon and the
    checkpoints), all at the same last step T₀: their states at T₀ (:meth:`Stepper.joined`), their
    records at this run's checkpoints before T₀ (they must be the donors' checkpoints before T₀; a log
    grid is, a linear one over the total is not), and a checkpoint at T₀ measured anew from that state
    (a donor measured it as its last). A member that stopped before T₀ stays stopped. Raises
    :class:`SnapshotMismatch` where the result would not equal a run from step 0."""
    if not getattr(stepper, "continues", False):
        raise SnapshotMismatch("its dynamics depend on the number of steps (e.g. train.optimizer.schedule "
                               "linear_decay) or its model kind keeps no state to continue")
    old = np.asarray(donors[0].meta["steps"], np.int64)
    t_old = int(old[-1])
    if not t_old < ckpts[-1]:
        raise SnapshotMismatch(f"it trained {t_old} steps, not fewer than {int(ckpts[-1])}")
    before = ckpts[ckpts < t_old]
    if not np.array_equal(before, old[old < t_old]):
        raise SnapshotMismatch(f"its checkpoints before step {t_old} differ from this run's")
    members = []
    for i, donor in enumerate(donors):
        m = donor.meta
        if m.get("lineages") != identity["lineages"][i:i + 1] or len(m["running"]) != 1:
            raise SnapshotMismatch(f"lineage {m.get('lineages')}, not {identity['lineages'][i]}")
        if m["steps"] != donors[0].meta["steps"]:
            raise SnapshotMismatch("the shorter runs of its members differ in their checkpoints")
        if any(s is not None and s >= t_old for s in m["stopped_at"]):
            raise SnapshotMismatch(f"a member stopped at its last step {t_old}")
        members.append(donor.position(stepper.member(template, i), ends[i:i + 1]))
    n = len(before)
    position = Position(n, t_old, stepper.joined([p.state for p in members]), [p.records[0][:n] for p in members],
                        [p.running[0] for p in members], [p.diverged[0] for p in members],
                        [p.ends[0] for p in members], [p.stopped_at[0] for p in members],
                        [sum(p.seconds[j] for p in members) for j in range(2)], 0, [True] * len(members))
    if not any(position.running):
        position.index = len(ckpts)
    return position


def drive(stepper: Stepper, spec: TrainSpec, measures: Sequence[Measure], *, n_train: int,
          etas: Sequence[float], label: str = "train", identity: dict | None = None, resume: Path | None = None,
          stored: Sequence[Sequence[bytes]] | None = None, same_record: SameRecord | None = None,
          snapshot_seconds: float | None = None) -> list[Trajectory]:
    """Train ``stepper``'s members over the checkpoints of ``spec`` (``n_train`` training points),
    calling ``measures[i](checkpoint, index, last)`` for member i at every checkpoint (``index``
    counts checkpoints from 0; ``last`` marks the final one). Member i's time is t = ``etas[i]`` · step.

    A measure returns a dict of floats or arrays (a ``loss`` that :func:`blew_up` stops the member and
    marks it diverged, as do non-finite steps or a final loss above ``EXPLOSION_FACTOR`` times the
    initial; other values may be NaN where a measurement skips a checkpoint); each is stacked over
    checkpoints into a series, NaN after a stop. Returns one :class:`Trajectory` per member; its
    ``seconds`` are the members' shares (1/k) of the stepper's time and of the measurements'.

    ``identity`` (``ids`` of the members' runs, their ``lineages``) names the run in snapshots
    (:mod:`ntkpipe.train.snapshot`). With a ``resume`` path, a snapshot there of this run is resumed
    from, one is saved there at checkpoints (every ``snapshot_seconds``, default
    :data:`SNAPSHOT_SECONDS`, and at the last once a step is done), and a stop request (SIGTERM, SIGINT;
    :mod:`ntkpipe.train.stop`) saves one at the next step boundary and raises :class:`Preempted`; the
    caller removes it once the run's results are written. ``stored``, per member the final snapshots
    of the finished runs of its lineage (:func:`ntkpipe.jobs.lineage.finished`), are read where that
    equals training from step 0: a single run within the horizon of one of them reads its records
    (those ``same_record`` allows) and states (:mod:`ntkpipe.train.reuse`); else each member continues
    its longest shorter one (:func:`continued`). Each member's trajectory carries its final snapshot
    (``snapshot``), in the layout of a single run's (:meth:`Stepper.member`).
    """
    k = stepper.members
    total = total_steps(spec, n_train)
    ckpts = checkpoint_steps(spec.checkpoints, total)
    last = len(ckpts) - 1
    identity = {"ids": [], "lineages": [], **(identity or {}), "steps": [int(s) for s in ckpts]}
    every = (float(os.environ.get("NTKPIPE_SNAPSHOT_SECONDS", SNAPSHOT_SECONDS)) if snapshot_seconds is None
             else snapshot_seconds)
    tic = time.perf_counter()
    start = _start(stepper, stepper.init(ckpts), ckpts, identity, resume, stored, same_record, label)
    position, known, final_state = start.position, start.known, start.final
    position.seconds[0] += time.perf_counter() - tic
    state, done, seconds = position.state, position.done, position.seconds
    records, running, diverged = position.records, position.running, position.diverged
    ends, stopped_at = position.ends, position.stopped_at  # a stopped member's final state where it stopped

    def stop(i: int) -> None:
        running[i], diverged[i], stopped_at[i] = False, True, done
        ends[i] = stepper.final(state, i)

    def at(index: int) -> Position:
        return Position(index, done, state, records, running, diverged, ends, stopped_at, seconds, trained,
                        [bool(f) for f in finite])

    progress = Progress(label, total)
    trained, saved = position.trained, time.monotonic()
    piece = 1 if stepper.splits else None  # the first piece compiles; the next ones last PIECE_SECONDS
    finite = np.array(position.finite, bool)  # each member's steps since the last checkpoint

    def preempt(signal_name: str, index: int):
        """Save the position (``index``: the next checkpoint to measure) and stop."""
        assert resume is not None, "stop requests are read only for a run with a resume file"
        if done > 0:
            snapshot.write(resume, snapshot.encode(at(index), identity))
        where = (f"its state is saved in {resume}, and the next attempt resumes from it (snakemake --retries, "
                 f"Slurm --requeue)" if done > 0 else "it had taken no step")
        raise Preempted(f"{label}: {signal_name} at step {done} of {total}; {where}")

    with stop_requests() if resume is not None else contextlib.nullcontext(lambda: None) as requested:
        for index in range(position.index, len(ckpts)):
            if not any(running):
                break
            target = int(ckpts[index])
            if final_state is not None and all(j in known for j in range(index, len(ckpts))):
                state, done = final_state, int(ckpts[-1])  # a stored run's state at the last step: nothing to train
                records[0] += [known[j] for j in range(index, len(ckpts))]
                break
            while done < target:
                end = target if piece is None else min(target, done + piece)
                tic = time.perf_counter()
                state, ok = stepper.advance(state, done, end)
                spent = time.perf_counter() - tic
                seconds[0] += spent
                if stepper.splits:
                    piece = max(1, int((end - done) * PIECE_SECONDS / max(spent, 1e-6)))
                trained += end - done
                done, finite = end, finite & np.asarray(ok, bool)
                if done < target and (signal_name := requested()):
                    preempt(signal_name, index)
            for i in range(k):
                if running[i] and not finite[i] and stepper.can_diverge(state, i):
                    stop(i)
            finite[:] = True
            if not any(running):
                break
            tic = time.perf_counter()
            for i in (i for i in range(k) if running[i]):
                if index in known:  # a stored run's record (single runs only, :mod:`ntkpipe.train.reuse`)
                    record = known[index]
                else:
                    with np.errstate(over="ignore", invalid="ignore"):  # an exploding model's measurements overflow
                        record = measures[i](stepper.checkpoint(state, i), index, index == last)
                records[i].append(record)
                if ("loss" in record and stepper.can_diverge(state, i)
                        and blew_up(records[i][0]["loss"], record["loss"], spec.divergence_factor)):
                    stop(i)
            seconds[1] += time.perf_counter() - tic
            signal_name = requested() if index < last else None  # after the last, the store is what is left
            if signal_name:
                preempt(signal_name, index + 1)
            if resume is not None and done > 0 and (index == last or time.monotonic() - saved >= every):
                snapshot.write(resume, snapshot.encode(at(index + 1), identity))
                saved = time.monotonic()
            if not any(running):
                break
            progress.update(done, loss=next((r[-1].get("loss") for r, on in zip(records, running) if on), None))
    final_snapshots = [snapshot.encode(Position(len(ckpts), done, stepper.member(state, i), [records[i]], [running[i]],
                                       [diverged[i]], [ends[i]], [stopped_at[i]], [t / k for t in seconds], trained,
                                       [True]),
                              {**identity, "ids": identity["ids"][i:i + 1], "lineages": identity["lineages"][i:i + 1]})
              for i in range(k)]
    spe = steps_per_epoch(n_train, spec.batch_size)
    out = []
    for i in range(k):
        if records[i] and "loss" in records[i][0] and not diverged[i] and stepper.can_diverge(state, i):
            diverged[i] = exploded(records[i][0]["loss"], records[i][-1]["loss"])
        model, finals = ends[i] or stepper.final(state, i)
        out.append(Trajectory(steps=ckpts, time=ckpts * etas[i], epoch=ckpts / spe,
                              series=stack_records(records[i], len(ckpts)), diverged=diverged[i], model=model,
                              seconds={"train": seconds[0] / k, "measure": seconds[1] / k}, finals=finals,
                              steps_trained=trained, snapshot=final_snapshots[i]))
    progress.close(diverged=all(diverged))
    return out


def stepper_factory(kind: str, packed: bool = False) -> Callable[..., Stepper]:
    """The stepper factory that model kind ``kind``'s record names (its packed one if ``packed``)."""
    record = MODEL_KINDS[kind]
    name = record.pack_stepper if packed else record.stepper
    if name is None:
        raise ValueError(f"model.kind {kind!r} does not train packed runs")
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)
