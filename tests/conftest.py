"""Shared fixtures: the repository root, a Snakemake driver (Snakemake ≥ 8 Python API) and an
in-process runner of a study's training jobs."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]

# The suite runs as a workflow job does (ntkpipe.jobs.log.start_job): JAX's 64-bit types on, so tests
# build float64 inputs and compare in float64. The library without them: tests/test_imports.py.
jax.config.update("jax_enable_x64", True)

# Hypothesis profiles: ``ci`` (the default) is reproducible -- derandomized, no example database --
# and small; ``long`` is random and large: HYPOTHESIS_PROFILE=long python -m pytest tests/test_generated_*.py
# (NTKPIPE_LONG_EXAMPLES=N sets its example count, 5000 by default).
# Generated studies are slow to draw (each is validated), so the too_slow health check is off.
settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=int(os.environ.get("NTKPIPE_LONG_EXAMPLES", "5000")), deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])  # one example draws many studies
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True, scope="session")
def md5_cache(tmp_path_factory):
    """Keep the on-disk md5 cache of data files inside the test session."""
    os.environ["NTKPIPE_CACHE"] = str(tmp_path_factory.mktemp("ntkpipe-cache"))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def run_snakemake(workdir: Path, *, config: dict | None = None, targets: list[str] | None = None,
                  cores: int = 2) -> list[str]:
    """Run the repository's Snakefile in ``workdir``; return the files the run made or updated."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        ExecutionSettings,
        OutputSettings,
        ResourceSettings,
    )

    updated: list[str] = []
    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.PROGRESS, Quietness.RULES})) as api:
            workflow = api.workflow(
                resource_settings=ResourceSettings(cores=cores),
                config_settings=ConfigSettings(config=config or {}),
                snakefile=REPO / "Snakefile",
                workdir=Path(workdir),
            )
            dag = workflow.dag(DAGSettings(targets=set(targets or [])))
            dag.execute_workflow(executor="local", execution_settings=ExecutionSettings(use_threads=True),
                                 updated_files=updated)
    finally:
        os.chdir(cwd)
    return sorted(os.path.relpath(f, workdir) if os.path.isabs(f) else f for f in updated)


def run_study_jobs(text: str, directory: Path):
    """Write the study ``text`` to ``directory``, plan it and run its training jobs in this process,
    without Snakemake (the network runs that kernel kinds read first). Returns the plan and the run
    stores by sweep point (a tuple of the point's values)."""
    from ntkpipe import train_run
    from ntkpipe.lang.schema import REFERENCE_KINDS
    from ntkpipe.store import read_store
    from ntkpipe.study.load import load_study
    from ntkpipe.study.plan import plan_study

    path = directory / "study.yaml"
    path.write_text(text)
    plan = plan_study(load_study(path), directory / "results")
    for job in plan.support_runs + sorted(plan.runs, key=lambda j: j.spec.model.kind in REFERENCE_KINDS):
        train_run(job, job.path)
    return plan, {tuple(point.values()): read_store(job.path).load() for job, point in zip(plan.runs, plan.study.points)}
