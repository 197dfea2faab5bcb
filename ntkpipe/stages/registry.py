"""The stage kinds a study may declare under ``stages:``, one record each, collected from the stage modules.

A :class:`StageKind` (:mod:`ntkpipe.stages.kind`) says what the stage provides to runs (see
:mod:`ntkpipe.stages.inputs`), which other stages of the study it reads (``upstream``), the slice of a
run's config it depends on (its id is the hash of that slice, so runs that share the slice share the
stage), its job function, and the checks a run that uses it must pass. Each module of this package
that defines stage kinds lists them in ``KINDS`` next to their job functions; :data:`STAGES` holds
them all, by module name. The Snakefile's one stage rule runs every kind.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module
from pathlib import Path

from ntkpipe.stages.kind import StageKind

__all__ = ["STAGES", "StageKind"]


def _collect() -> dict[str, StageKind]:
    """The ``KINDS`` of every module of this package, in module-name order; a name given twice is an error."""
    kinds: dict[str, StageKind] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        for kind in getattr(import_module(f"ntkpipe.stages.{info.name}"), "KINDS", ()):
            if kind.compute in kinds:
                raise ValueError(f"stage kind {kind.compute!r} is defined twice (module ntkpipe.stages.{info.name})")
            kinds[kind.compute] = kind
    return kinds


STAGES: dict[str, StageKind] = _collect()
