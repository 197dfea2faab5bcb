"""A planned stage job: what it computes, from which config slice, reading which other stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ntkpipe.lang.schema import RunSpec


@dataclass(frozen=True)
class StageJob:
    """``config`` is the slice of the study the stage depends on (its id is its hash); ``inputs``
    maps a role (another stage's role, or what a data stage provides) to the store it reads; ``run`` is
    the first run that reads it, whose shapes size the job's resources."""

    id: str
    compute: str
    config: dict
    path: Path
    inputs: dict[str, Path] = field(default_factory=dict)
    run: RunSpec | None = field(default=None, compare=False, repr=False)
