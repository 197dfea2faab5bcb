"""The stage kinds a study may declare under ``stages:``, one record each, collected from the stage modules.

A :class:`StageKind` (:mod:`ntkpipe.stages.kind`) says what the stage provides to runs (see
:mod:`ntkpipe.stages.inputs`), which other stages of the study it reads (``upstream``), the slice of a
run's config it depends on (its id is the hash of that slice, so runs that share the slice share the
stage), its job function, and the checks a run that uses it must pass. Each module of this package
that defines stage kinds lists them in ``KINDS`` next to their job functions; :data:`STAGES` holds
them all, by module name. The Snakefile's one stage rule runs every kind.
"""

from __future__ import annotations

from pathlib import Path

from ntkpipe.registries import collect_kinds
from ntkpipe.stages.kind import StageKind

__all__ = ["STAGES", "StageKind"]


STAGES: dict[str, StageKind] = collect_kinds("ntkpipe.stages", Path(__file__).parent, lambda kind: kind.compute,
                                             "stage kind")
