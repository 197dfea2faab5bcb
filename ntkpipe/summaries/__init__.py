"""Study summaries: results computed across a study's runs (power-law and log-law fits, endpoint tables,
phases), one record per kind (:mod:`ntkpipe.summaries.record`), collected in :data:`SUMMARY_KINDS`."""

from ntkpipe.summaries.registry import SUMMARY_KINDS, SummaryKind, summary_options

__all__ = ["SUMMARY_KINDS", "SummaryKind", "summary_options"]
