"""A stage kind as one record (:class:`StageKind`); each stage module lists its kinds in ``KINDS``, and
:mod:`ntkpipe.stages.registry` collects them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ntkpipe.stages.job import StageJob


@dataclass(frozen=True)
class StageKind:
    """One kind of stage.

    Attributes:
        compute: its name in a spec (``stages: {name: {compute: ...}}``).
        provides: ``labels`` | ``directions`` | ``origin`` (what runs that name it get), or None
            for a stage only other stages read.
        upstream: stage spec → {role: (name of another stage, the kind it must be)}.
        config: (stage spec, run, run config with its data stages resolved, {role: upstream id})
            → the config slice that the stage's id hashes.
        reads_run_data: whether the stage reads the run's data, and so the stages that provide it.
        job: (StageJob, output path) → output path.
        check: (stage name, stage spec, run) → problems of that run with this stage, as (key path
            in the spec, message): the stage's options against the run's data and what the run reads.
    """

    compute: str
    provides: str | None
    config: Callable[..., dict]
    job: Callable[[StageJob, Path], Path]
    reads_run_data: bool = True
    upstream: Callable[..., dict[str, tuple[str, str]]] = lambda spec: {}
    check: Callable[..., list[tuple[tuple, str]]] = lambda name, spec, run: []
