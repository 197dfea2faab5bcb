"""The summary kinds a study may list under ``summaries:``, one record each (:class:`SummaryKind`),
collected from the modules of this package: each lists its kinds in ``KINDS`` next to their functions."""

from __future__ import annotations

from pathlib import Path

from ntkpipe.registries import collect_kinds
from ntkpipe.summaries.record import SummaryKind, SummaryOptions

__all__ = ["SUMMARY_KINDS", "SummaryKind", "summary_options"]


SUMMARY_KINDS: dict[str, SummaryKind] = collect_kinds("ntkpipe.summaries", Path(__file__).parent,
                                                      lambda kind: kind.name, "summary kind")


def summary_options(item) -> SummaryOptions:
    """A ``summaries:`` item of a validated study (:class:`ntkpipe.lang.schema.SummarySpec`) as its kind's
    options, defaults filled in (validation has checked that it is one)."""
    return SUMMARY_KINDS[item.kind].options.model_validate(item.model_dump(exclude_unset=True))
