"""The packed training job: the runs of one pack trained in compiled programs, one store per run,
each what :func:`ntkpipe.jobs.training.train_run` would write (up to float rounding)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from ntkpipe.jobs.lineage import finished, lineage_id
from ntkpipe.jobs.training import member_measures, remove_resume_file, resume_file, train_run, write_run_store
from ntkpipe.measure.context import RunContext
from ntkpipe.stages import run_context
from ntkpipe.study.plan import RunJob
from ntkpipe.train import snapshot
from ntkpipe.train.driver import drive, stepper_factory, total_steps
from ntkpipe.train.packed import structure_key


def _label(job: RunJob, size: int) -> str:
    """``<study> pack of <size>`` for progress lines (the study tag leads each run's label)."""
    return f"{job.label.partition(' ')[0] or 'runs'} pack of {size}"


def _within_stored(job: RunJob, run: RunContext, out: str | Path) -> bool:
    """Whether a stored run of the run's lineage reaches its horizon: it is then made alone, reading
    that run (:mod:`ntkpipe.train.reuse`, single runs only) instead of training in the pack."""
    total = total_steps(job.spec.train, len(run.data.y_train))
    return any(int(snapshot.read(data).meta["steps"][-1]) >= total
               for data in finished(Path(out), lineage_id(job.config)))


def train_pack(jobs: Sequence[RunJob], outs: Sequence[str | Path]) -> list[Path]:
    """Train ``jobs`` (one pack, :mod:`ntkpipe.study.packs`) and write ``outs[i]`` for ``jobs[i]``.
    Members whose networks differ in a static field or whose data differ in shape train in
    separate compiled programs within this job. A run's ``seconds_train`` and ``seconds_measure``
    are its share (1/k) of its program's compiled calls and checkpoint measurements, plus its own
    final measurements; ``seconds_job`` adds its share of the setup and its own store. Each program
    resumes from its snapshot (``<first member's store>.pack-resume.npz``) if an attempt was killed, else
    continues the finished shorter runs of its members' lineages (:mod:`ntkpipe.jobs.lineage`), whether
    they trained packed or alone, where each member has one and all stopped at the same step. A member
    within the horizon of a stored run of its lineage is made alone (:func:`ntkpipe.jobs.training.train_run`)."""
    if len(jobs) != len(outs):
        raise ValueError(f"train_pack: {len(jobs)} runs but {len(outs)} output paths")
    tic = time.perf_counter()
    runs = [run_context(job.spec, job.stage_paths) for job in jobs]
    groups: dict[tuple, list[int]] = {}
    for i, run in enumerate(runs):
        groups.setdefault(structure_key(run.model0, run.data.x_train, run.data.y_train, run.data.x_test), []).append(i)
    written: list[Path | None] = [None] * len(jobs)
    setup = (time.perf_counter() - tic) / len(jobs)
    for group in groups.values():
        for i in (i for i in group if _within_stored(jobs[i], runs[i], outs[i])):
            written[i] = train_run(jobs[i], outs[i])
        members = [i for i in group if written[i] is None]
        if not members:
            continue
        pack = [runs[i] for i in members]
        stepper = stepper_factory(pack[0].spec.model.kind, packed=True)(pack)
        resume = resume_file(Path(outs[members[0]]), ".pack-resume.npz")
        n_train, lineages = len(pack[0].data.y_train), [lineage_id(jobs[i].config) for i in members]
        stored = None if resume.exists() else [finished(Path(outs[i]), lineage) for i, lineage in zip(members, lineages)]
        trajectories = drive(stepper, pack[0].spec.train, member_measures(pack), n_train=n_train,
                             etas=[run.spec.train.optimizer.lr for run in pack],
                             label=_label(jobs[members[0]], len(members)),
                             identity={"ids": [jobs[i].id for i in members], "lineages": lineages}, resume=resume,
                             stored=stored)
        for i, traj in zip(members, trajectories):
            start = time.perf_counter() - setup - traj.seconds["train"] - traj.seconds["measure"]
            written[i] = write_run_store(jobs[i], runs[i], traj, outs[i], start)
        remove_resume_file(resume)
    return cast("list[Path]", written)  # every run is in one group, so every entry is written
