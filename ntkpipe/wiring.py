"""What the Snakefile reads while Snakemake builds its DAG, as plain data: every job's inputs and
params, the default targets, the stores to check and the directories the jobs write into.

Snakemake calls the rules' input and params functions for every job of the DAG, also when nothing
is to be done; they read a :class:`Wiring` (strings, lists and dicts), which
:func:`ntkpipe.workflow.wire` computes from the planned index and the plan cache
(:mod:`ntkpipe.plan_cache`) keeps, so that a no-op ``snakemake -n`` unpickles no spec, plan or job
(and so imports neither the language nor JAX). The
Snakefile's index, :class:`SnakefileIndex`, makes the full :class:`~ntkpipe.workflow.WorkflowIndex`
on first use: a job's body, or a resource estimate of a job that is to run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ntkpipe.results_dir import set_aside_invalid
from ntkpipe.store import StoreCheck


@dataclass(frozen=True)
class StudyWiring:
    """A study's jobs (aggregate, table, phase table, plots, claims, index): their input paths and params
    (configs as canonical JSON, report captions)."""

    runs: list[str]
    finals: list[str]
    dataset: str
    table: str
    figures: dict[str, str]
    claims_table: str | None
    phase_table: str | None
    aggregate_config: str
    claims_caption: str | None
    table_caption: str
    figure_configs: dict[str, str]
    figure_captions: dict[str, str]


@dataclass(frozen=True)
class Wiring:
    """The inputs and params of every job (studies by tag; runs, stages and finals by id), the
    default targets, the planned stores (path -> the id each must hold) and the written directories."""

    studies: dict[str, StudyWiring]
    run_inputs: dict[str, list[str]]
    stage_inputs: dict[str, list[str]]
    final_inputs: dict[str, list[str]]
    targets: list[str]
    stores: dict[Path, str]
    directories: list[Path]


class SnakefileIndex:
    """The Snakefile's index: the :class:`Wiring` at once, and the ``plans``, ``runs``, ``stages``
    and ``finals`` of the full index (a :class:`~ntkpipe.workflow.WorkflowIndex`, which ``load()``
    returns) on first use."""

    def __init__(self, results: Path, wiring: Wiring, load: Callable[[], Any], checks: dict[Path, StoreCheck]):
        self.results = results
        self.wiring = wiring
        self._load = load
        self.checks = checks
        """Fast store checks made while planning, reused once (by :meth:`set_aside_invalid`)."""

    @cached_property
    def full(self) -> Any:
        return self._load()

    @property
    def plans(self):
        return self.full.plans

    @property
    def runs(self):
        return self.full.runs

    @property
    def stages(self):
        return self.full.stages

    @property
    def finals(self):
        return self.full.finals

    def targets(self) -> list[str]:
        """The default target's inputs (:meth:`~ntkpipe.workflow.WorkflowIndex.targets`)."""
        return self.wiring.targets

    def set_aside_invalid(self) -> list[Path]:
        """Move the planned stores that exist but fail verification to ``results/.invalid``."""
        return set_aside_invalid(self.wiring.stores, self.results, self.checks)
