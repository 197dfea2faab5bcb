"""A run within the horizon of stored runs of its lineage: measured where they measured, trained only
where they saved no state.

Runs of one lineage (:mod:`ntkpipe.jobs.lineage`) differ only in their horizon and checkpoints, and
training is deterministic, so their states at a step are equal, and so are their measurements there
when the checkpoint's measurements are taken alike (:data:`SameRecord`: a measurement taken every
n-th checkpoint reads the checkpoint's index, and every measurement is taken at the last). A stored
run keeps its records at its checkpoints and its state at its last step (its final snapshot). A run
whose last step T some stored run reaches (a shorter horizon of a longer run; checkpoints added to a
finished horizon) is therefore made of:

- the stored records at its checkpoints that a stored run measured alike (:class:`Reuse` ``known``);
- the state at T, where a stored run ends at T (``final``): nothing is trained after its last
  checkpoint without a record;
- otherwise states replayed from the latest saved state before the first checkpoint without a record
  (a stored run's last step, or step 0), measured only at the checkpoints without one.

The result equals training it from step 0 bit for bit (``tests/test_train_longer.py``). Only single
runs of a stepper that ``continues`` (no dynamics that depend on the total) reuse, and only stored
runs that did not stop (diverge).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntkpipe.train.snapshot import Position, Snapshot, SnapshotMismatch

SameRecord = Callable[[int, bool, int, bool], bool]
"""(index, last) of a checkpoint in a stored run and (index, last) of the same step in this run →
whether the measurements there are taken alike (their records are equal)."""


@dataclass
class Reuse:
    """Where training starts (``position``: a stored state or step 0, with the records before it),
    the stored records of later checkpoints by index (``known``), and the state at the last step if a
    stored run ends there (``final``; None: train up to it)."""

    position: Position
    known: dict[int, dict]
    final: Any | None

    @property
    def measured(self) -> int:
        """Checkpoints whose records are read, not measured."""
        return len(self.position.records[0]) + len(self.known)


def _steps(snap: Snapshot) -> list[int]:
    return [int(s) for s in snap.meta["steps"]]


def reuse(stepper, stored: Sequence[Snapshot], template, ends: list, ckpts: np.ndarray, lineage: str,
          same_record: SameRecord) -> Reuse:
    """The :class:`Reuse` of the single run of ``stepper`` (checkpoints ``ckpts``, ``lineage``) from the
    final snapshots ``stored`` of its lineage's runs; :class:`SnapshotMismatch` where none reaches its
    last step or nothing is reused."""
    if stepper.members != 1 or not stepper.continues:
        raise SnapshotMismatch("only single runs whose dynamics do not depend on the number of steps reuse")
    usable = [s for s in stored if s.meta.get("lineages") == [lineage] and len(s.meta["running"]) == 1
              and s.meta["stopped_at"][0] is None]
    total, last = int(ckpts[-1]), len(ckpts) - 1
    if not any(_steps(s)[-1] >= total for s in usable):
        raise SnapshotMismatch(f"no stored run of its lineage reaches step {total}")
    known: dict[int, dict] = {}
    for index, step in enumerate(int(c) for c in ckpts):
        for snap in usable:
            steps = _steps(snap)
            if step in steps:
                j = steps.index(step)
                if same_record(j, j == len(steps) - 1, index, index == last):
                    known[index] = snap.record(0, j)
                    break
    finals = [s for s in usable if _steps(s)[-1] == total]
    final = finals[0].position(template, ends).state if finals else None
    needed = [i for i in range(len(ckpts)) if i not in known]
    if not needed and final is not None:  # every record stored, and the state at the end
        records = [known[i] for i in range(len(ckpts))]
        return Reuse(Position(len(ckpts), total, final, [records], [True], [False], [None], [None], finite=[True]),
                     {}, None)
    need = int(ckpts[needed[0]]) if needed else total  # the first step whose state is needed
    starts = [s for s in usable if _steps(s)[-1] <= need]
    start = max(starts, key=lambda s: _steps(s)[-1]) if starts else None
    state, done = (template, 0) if start is None else (start.position(template, ends).state, _steps(start)[-1])
    index = next(i for i in range(len(ckpts)) if i not in known or ckpts[i] > done)
    if not known:
        raise SnapshotMismatch("no stored run measured its checkpoints alike")
    position = Position(index, done, state, [[known.pop(i) for i in range(index)]], [True], [False], [None], [None],
                        finite=[True])
    return Reuse(position, known, final)
