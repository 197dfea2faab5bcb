"""A planned stage job: what it computes, from which config slice, reading which other stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class StageJob:
    """``config`` is the slice of the study the stage depends on (its id is its hash); ``inputs``
    maps a role (another stage's role, or what a data stage provides) to the store it reads."""

    id: str
    compute: str
    config: dict
    path: Path
    inputs: dict[str, Path] = field(default_factory=dict)
