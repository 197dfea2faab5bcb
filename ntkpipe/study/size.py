"""How many runs a study makes, counted from its sweep's axis lengths before anything is expanded,
and the limit on that count (a sweep of 10⁶ runs would take minutes and gigabytes to plan)."""

from __future__ import annotations

import os

from ntkpipe.errors import ConfigError

MAX_RUNS_DEFAULT = 10_000
MAX_RUNS_ENV = "NTKPIPE_MAX_RUNS"
OVERRIDES = "snakemake --config max_runs=N, ntkpipe validate --max-runs N, or the environment variable " \
            f"{MAX_RUNS_ENV}=N"


def run_limit(given: int | str | None = None, source: str = "max_runs") -> int:
    """The most runs one study may have: ``given`` (named ``source`` in messages), else
    ``$NTKPIPE_MAX_RUNS``, else 10,000."""
    if given is None and os.environ.get(MAX_RUNS_ENV, "") != "":
        given, source = os.environ[MAX_RUNS_ENV], MAX_RUNS_ENV
    if given is None:
        return MAX_RUNS_DEFAULT
    try:
        limit = int(str(given).replace("_", "").replace(",", ""))
    except ValueError:
        limit = 0
    if isinstance(given, bool) or limit < 1:
        raise ConfigError(f"{source} = {given!r} is not a positive whole number of runs; set it like "
                          f"{source}=20000 (the default is {MAX_RUNS_DEFAULT:,})")
    return limit


def run_count(spec: dict) -> int:
    """Runs of a merged spec mapping: the sweep's points, those that do not set ``d`` themselves
    times the values of ``scaling.d``."""
    from ntkpipe.lang import scaling as scale  # the language: imported here, not for run_limit (the Snakefile's)
    from ntkpipe.lang.sweep import SweepError, axis_length, count_points

    total, with_d = count_points(spec.get("sweep"), scale.AXIS)
    block = spec.get("scaling")
    if isinstance(block, dict) and "d" in block:
        try:
            total = (total - with_d) * max(axis_length(block["d"]), 1) + with_d
        except SweepError:
            pass  # reported where scaling.d is expanded
    return total


def too_many_runs(count: int, limit: int) -> str | None:
    """The message for a study above the limit, or None."""
    if count <= limit:
        return None
    return (f"the study has {count:,} runs, more than the limit of {limit:,} (a sweep this size takes long to "
            f"plan; is a count or a range too large?); shrink the sweep, or raise the limit: {OVERRIDES}")
