"""Shared fixtures: the repository root, a Snakemake driver (Snakemake ≥ 8 Python API), an
in-process runner of a study's training jobs, one persistent JAX compilation cache per session, and
XLA's backend optimizations off and XLA:CPU's loop emitters on but in the modules that ask for the
product's compilation (``optimized_xla``)."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]

# The suite runs as a workflow job does (ntkpipe.jobs.log.start_job): JAX's 64-bit types on, so tests
# build float64 inputs and compare in float64. The library without them: tests/test_imports.py.
jax.config.update("jax_enable_x64", True)
# JAX's strict dtype promotion: mixing dtypes (float32 weights with float64 data, a weak Python scalar
# aside) is an error, so every cast in ntkpipe says the dtype it means (float64 for kernels, eigen and
# theory work, the training dtype for training). Job processes that tests start inherit it.
os.environ["JAX_NUMPY_DTYPE_PROMOTION"] = "strict"
jax.config.update("jax_numpy_dtype_promotion", "strict")

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


JAX_CACHE_ENV = "NTKPIPE_JAX_CACHE"
"""ntkpipe.workflow.JAX_CACHE_ENV, written out: the xdist controller sets it and imports no ntkpipe."""

XLA_OPTIMIZATIONS_OFF = "JAX_DISABLE_MOST_OPTIMIZATIONS"
"""JAX's switch for XLA's backend optimizations (``jax_disable_most_optimizations``: LLVM at level 0,
the same HLO programs); the suite sets it to 1 unless the caller set it (``=0``: as the product compiles)."""

TRUE = ("y", "yes", "t", "true", "on", "1")
"""The values JAX reads as true in a boolean environment variable."""

EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters"
LOOP_EMITTERS = f"{EMITTERS_FLAG}=false"
"""XLA:CPU's loop emitters for every program of a test process (``XLA_FLAGS``), with the optimizations
off: they compile a program in about 0.6× the time of the fusion emitters (ntkpipe's measurement
programs use them too: ``ntkpipe.compile_options``), which most tests, compiling many small programs and
running each once or twice, feel (the ResNet, NTK, CNN and kernel-option files: 125 → 81 s)."""


def pytest_configure(config):
    """One persistent JAX compilation cache for the session: this process, the xdist workers (they
    inherit the environment) and the Snakemake jobs, in threads or processes (configure_jax reads
    $NTKPIPE_JAX_CACHE), so a program compiled once is read back by every later test that compiles
    it. It lives in pytest's cache (``.pytest_cache/d/ntkpipe-jax``), so a later session reads the
    programs back instead of compiling them (``--cache-clear`` starts cold); without the cache plugin
    (``-p no:cacheprovider``) in a temporary directory of the session. A directory set by the caller
    is used as it is. Set before any compile: JAX decides once per process whether it uses the cache."""
    # one BLAS thread per test process, as a workflow job gets (ntkpipe.workflow.limit_blas_threads):
    # the two xdist workers share two cores; set here, before the workers start, so they inherit it
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    # Most tests compile many small programs and run each once or twice, so XLA's backend optimizations
    # cost more than they save: off, with the modules that train for seconds or time the product
    # turning them back on (optimized_xla), the suite took 506 s against 601 s with them on everywhere
    # (one 2-core host, one run after the other: benchmarks/README.md, "The test suite's time")
    os.environ.setdefault(XLA_OPTIMIZATIONS_OFF, "1")
    if os.environ[XLA_OPTIMIZATIONS_OFF].lower() in TRUE and EMITTERS_FLAG not in os.environ.get("XLA_FLAGS", ""):
        # unless the caller chose the emitters; read by XLA once per process, when JAX first starts its
        # backend: before any test runs
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {LOOP_EMITTERS}".strip()
    if not os.environ.get(JAX_CACHE_ENV):
        if getattr(config, "cache", None) is not None:
            os.environ[JAX_CACHE_ENV] = str(config.cache.mkdir("ntkpipe-jax"))
        else:
            os.environ[JAX_CACHE_ENV] = config._ntkpipe_jax_cache = tempfile.mkdtemp(prefix="ntkpipe-jax-")
    if config.pluginmanager.hasplugin("dsession"):  # the xdist controller: it runs no test
        return
    import jax
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # numpy's OpenBLAS, loaded before this hook
    jax.config.update("jax_compilation_cache_dir", os.environ[JAX_CACHE_ENV])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_disable_most_optimizations", os.environ[XLA_OPTIMIZATIONS_OFF].lower() in TRUE)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Scheduling over the xdist workers (``--dist loadgroup --no-loadscope-reorder``): the tests of a
    file that share a module- or class-scoped fixture (a study run once for the file) form one group,
    run by one worker; every other test is dealt out on its own, so the workers stay busy to the end;
    and the files with tests that drive Snakemake end to end (the ``workflow`` mark: the longest, some
    a single test of minutes) are dealt first, so that none of them starts last."""
    def shares_a_fixture(item) -> bool:
        definitions = getattr(item, "_fixtureinfo", None)
        return bool(definitions) and any(d.scope in ("module", "class", "package")
                                         for defs in definitions.name2fixturedefs.values() for d in defs)

    # the whole file: a test may also reach its file's fixture through request.getfixturevalue
    grouped = {item.path for item in items if shares_a_fixture(item) or item.get_closest_marker("file_group")}
    for item in items:
        if item.path in grouped:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    first = {item.path for item in items if item.get_closest_marker("workflow")}  # whole files: a file's tests stay together
    items.sort(key=lambda item: item.path not in first)


def pytest_unconfigure(config):
    if made := getattr(config, "_ntkpipe_jax_cache", None):
        shutil.rmtree(made, ignore_errors=True)


@contextmanager
def warnings_as_errors():
    """Every warning raised as an error inside the block, but the ResourceWarning of a source-cache
    directory that Snakemake's API leaves to the garbage collector (pyproject's filterwarnings): a
    collection inside the block may finalize one left by an earlier test of this process."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", "Implicitly cleaning up <TemporaryDirectory", ResourceWarning)
        yield


@pytest.fixture(autouse=True, scope="session")
def md5_cache(tmp_path_factory):
    """Keep the on-disk md5 cache of data files inside the test session."""
    os.environ["NTKPIPE_CACHE"] = str(tmp_path_factory.mktemp("ntkpipe-cache"))


@pytest.fixture(scope="module")
def optimized_xla():
    """XLA's optimizations on, as the product compiles, in this process and in the processes its tests
    start (Snakemake, jobs), for a module whose runs train for seconds or that times the product; those
    processes also compile with the product's emitters (this process keeps :data:`LOOP_EMITTERS`, which
    XLA read when it started). The compiled programs held in memory are dropped on the way in and out:
    none compiled the other way is reused (the persistent cache keys programs by their compile options)."""
    before = jax.config.read("jax_disable_most_optimizations")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(XLA_OPTIMIZATIONS_OFF, "0")
        if flags := os.environ.get("XLA_FLAGS", "").replace(LOOP_EMITTERS, "").strip():
            patch.setenv("XLA_FLAGS", flags)
        else:
            patch.delenv("XLA_FLAGS", raising=False)
        jax.config.update("jax_disable_most_optimizations", False)
        jax.clear_caches()
        try:
            yield
        finally:
            jax.config.update("jax_disable_most_optimizations", before)
            jax.clear_caches()


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@contextmanager
def snakemake_workflow(workdir: Path, *, config: dict | None = None, cores: int = 2, quiet=("progress", "rules")):
    """The repository's Snakefile in ``workdir`` through Snakemake's API in this process (Snakemake ≥ 8
    has no ``snakemake()``), as ``snakemake --config …`` there reads it: yields the workflow
    (``snakemake.api.WorkflowApi``); this process's working directory is restored on the way out.
    ``quiet``: the Quietness names of the output left out."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.parse_choice(q) for q in quiet})) as api:
            yield api.workflow(resource_settings=ResourceSettings(cores=cores),
                               config_settings=ConfigSettings(config=config or {}),
                               snakefile=REPO / "Snakefile", workdir=Path(workdir))
    finally:
        os.chdir(cwd)


def run_snakemake(workdir: Path, *, config: dict | None = None, targets: list[str] | None = None,
                  cores: int = 2, keep_going: bool = False) -> list[str]:
    """Run the repository's Snakefile in ``workdir``, its jobs in threads; return the files the run made
    or updated (``keep_going``: past a failed job, as ``--keep-going``)."""
    from snakemake.settings.types import DAGSettings, ExecutionSettings

    updated: list[str] = []
    with snakemake_workflow(workdir, config=config, cores=cores) as workflow:
        workflow.dag(DAGSettings(targets=set(targets or []))).execute_workflow(
            executor="local", execution_settings=ExecutionSettings(use_threads=True, keep_going=keep_going),
            updated_files=updated)
    return sorted(os.path.relpath(f, workdir) if os.path.isabs(f) else f for f in updated)


def dry_run(workdir: Path) -> list[str]:
    """``snakemake -n`` in ``workdir``, in this process: the outputs of the jobs a run would make
    (Snakemake's dry-run executor)."""
    from snakemake.settings.types import DAGSettings

    outputs: list[str] = []
    with snakemake_workflow(workdir, cores=1, quiet=("all",)) as workflow:
        workflow.dag(DAGSettings()).execute_workflow(executor="dryrun", updated_files=outputs)
    return outputs


def run_study_jobs(text: str, directory: Path):
    """Write the study ``text`` to ``directory``, plan it and run its training jobs in this process,
    without Snakemake (the network runs that kernel kinds read first). Returns the plan and the run
    stores by sweep point (a tuple of the point's values)."""
    from ntkpipe import train_run
    from ntkpipe.lang.model_kinds import MODEL_KINDS
    from ntkpipe.store import read_store
    from ntkpipe.study.load import load_study
    from ntkpipe.study.plan import plan_study

    path = directory / "study.yaml"
    path.write_text(text)
    plan = plan_study(load_study(path), directory / "results")
    for job in plan.support_runs + sorted(plan.runs, key=lambda j: MODEL_KINDS[j.spec.model.kind].reference is not None):
        train_run(job, job.path)
    return plan, {tuple(point.values()): read_store(job.path).load() for job, point in zip(plan.runs, plan.study.points)}
