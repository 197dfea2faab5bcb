"""The summary kinds a study may list under ``summaries:``, one record each (:class:`SummaryKind`),
collected from the modules of this package: each lists its kinds in ``KINDS`` next to their functions."""

from __future__ import annotations

import pkgutil
from importlib import import_module
from pathlib import Path

from ntkpipe.summaries.record import SummaryKind, SummaryOptions

__all__ = ["SUMMARY_KINDS", "SummaryKind", "summary_options"]


def _collect() -> dict[str, SummaryKind]:
    """The ``KINDS`` of every module of this package, in module-name order; a name given twice is an error."""
    kinds: dict[str, SummaryKind] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        for kind in getattr(import_module(f"ntkpipe.summaries.{info.name}"), "KINDS", ()):
            if kind.name in kinds:
                raise ValueError(f"summary kind {kind.name!r} is defined twice (module ntkpipe.summaries.{info.name})")
            kinds[kind.name] = kind
    return kinds


SUMMARY_KINDS: dict[str, SummaryKind] = _collect()


def summary_options(item) -> SummaryOptions:
    """A ``summaries:`` item of a validated study (:class:`ntkpipe.lang.schema.SummarySpec`) as its kind's
    options, defaults filled in (validation has checked that it is one)."""
    return SUMMARY_KINDS[item.kind].options.model_validate(item.model_dump(exclude_unset=True))
