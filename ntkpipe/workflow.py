"""What the Snakefile needs: every study in ``specs/`` planned for one variant, indexed by job id.

Validation and planning (the language, and with it JAX) are imported where they run, so that the
Snakefile, when the plan is cached (:mod:`ntkpipe.plan_cache`), imports only what checks its stores.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ntkpipe.errors import ConfigError, SpecError
from ntkpipe.lang.identity import canonical_json
from ntkpipe.plan_cache import PlanDetail, PlanEntry, plan_key, read_detail, read_entry, store_states, write_entry
from ntkpipe.resources import RUNTIME_MINUTES, memory_limit
from ntkpipe.results_dir import planned_stores, set_aside_invalid
from ntkpipe.store import StoreCheck
from ntkpipe.store_stamps import StoreStamp, check_stores
from ntkpipe.study import DEFAULT_VARIANT, SPEC_SUFFIX
from ntkpipe.wiring import SnakefileIndex, StudyWiring, Wiring

if TYPE_CHECKING:
    from ntkpipe.stages import StageJob
    from ntkpipe.study.load import Study
    from ntkpipe.study.plan import FinalJob, RunJob, StudyPlan

SPEC_LIKE_SUFFIXES = (".yaml", ".yml")
"""Suffixes (any case) of files in the specs directory that are taken for specs; all but ``.yaml``
are reported by validation (with the fix: rename)."""
JAX_CACHE_ENV = "NTKPIPE_JAX_CACHE"
"""Environment variable naming the persistent JAX compilation cache directory (default results/.cache/jax)."""


@dataclass
class WorkflowIndex:
    """All jobs of the selected studies: run, final and stage jobs by id, study plans by tag."""

    results: Path
    plans: dict[str, StudyPlan]
    runs: dict[str, RunJob]
    stages: dict[str, StageJob]
    finals: dict[str, FinalJob]

    def set_aside_invalid(self) -> list[Path]:
        """Move the planned stores that exist but fail verification to ``results/.invalid``."""
        stores = {path: store_id for plan in self.plans.values() for path, store_id in planned_stores(plan).items()}
        return set_aside_invalid(stores, self.results)

    def targets(self) -> list[str]:
        """Every study dataset, table (and phase table), figure and index (and claims table, if it states claims), and
        every planned run and stage store (the default target): a store that is missing, e.g. set aside as invalid, is made again and so is every
        job that reads it (were it only an input, Snakemake would not remake a missing store whose
        readers are up to date)."""
        out = []
        for plan in self.plans.values():
            out += [str(plan.dataset_path), str(plan.table_path), str(plan.dataset_path.parent / "index.md")]
            out += [str(plan.claims_table_path)] if plan.study.spec.claims else []
            out += [str(plan.phase_table_path)] if plan.phase_table_path else []
            out += [str(p) for p in plan.figure_paths.values()]
        stores = {path for plan in self.plans.values() for path in planned_stores(plan)}
        return out + sorted(str(p) for p in stores - {plan.dataset_path for plan in self.plans.values()})


CONFIG_KEYS = {
    "specs": "the directory of study specs (default specs)",
    "results": "the results directory (default results)",
    "variant": "the variant every study runs (default default)",
    "studies": "comma-separated study names (default: every spec)",
    "max_runs": "the most runs one study may have (default 10,000)",
    "pack": "1: train same-shape runs together, 0: a job per run (default 1 with gpus >= 1, else 0)",
    "gpus": "GPUs each training, final and stage job requests (default 0)",
    "memory_check": "0: do not refuse runs whose memory estimate exceeds this machine's (default 1)",
    "runtime_minutes": "per rule (train, final, stage, aggregate, plot): the runtime a job requests",
}
"""Every ``--config`` key the Snakefile reads."""


def packing(config: dict) -> bool:
    """Whether same-shape runs are trained together (:mod:`ntkpipe.study.packs`): ``pack`` as given, else
    where the jobs get a GPU (``gpus`` >= 1), on which a pack of small runs trains 1.5x faster than one job
    per run (``benchmarks/packed_runs.py`` on an H200); not on CPU, where a packed main job compiles more
    programs (a pack's are its own) and spends 5 % more job-seconds (``benchmarks/README.md``, "Packed runs")."""
    return bool(int(config.get("pack", 1 if config.get("gpus", 0) else 0)))


def check_config(config: dict) -> None:
    """Raise ConfigError for a ``--config`` key the workflow does not read (a misspelt key would
    silently fall back to its default) or a value it cannot use."""
    for key in config:
        if key not in CONFIG_KEYS:
            from ntkpipe.lang.axes import suggest

            known = "\n".join(f"  {k}: {doc}" for k, doc in CONFIG_KEYS.items())
            raise ConfigError(f"--config {key}={config[key]}: unknown key{suggest(key, CONFIG_KEYS)}; the workflow "
                              f"reads:\n{known}")
    for key in ("pack", "memory_check"):
        if key in config and config[key] not in (0, 1):  # True and False are 1 and 0
            raise ConfigError(f"--config {key}={config[key]}: give {key}=0 or {key}=1")
    gpus = config.get("gpus", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ConfigError(f"--config gpus={gpus}: give a whole number of GPUs >= 0 (e.g. gpus=1)")
    runtimes = config.get("runtime_minutes", {})
    if not isinstance(runtimes, dict) or any(rule not in RUNTIME_MINUTES for rule in runtimes) or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in runtimes.values()):
        raise ConfigError(f"--config runtime_minutes={runtimes}: give whole minutes >= 1 per rule, e.g. "
                          f"runtime_minutes={{train: 240}} (rules: {', '.join(RUNTIME_MINUTES)})")


def spec_files(specs: str | Path, studies: str | list[str] | None = None) -> list[Path]:
    """``specs/*.yaml``, or the named subset (comma-separated names or a list). Files that look like
    specs under another suffix (``*.yml``) are listed too, so that validation stops at them instead
    of the workflow skipping them; a missing or empty directory is a ConfigError."""
    directory = Path(specs)
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ConfigError(f"the specs directory {str(specs)!r} {what} (--config specs={specs}); give a directory "
                          f"that holds the study specs (*{SPEC_SUFFIX})")
    files = sorted(f for f in directory.iterdir() if f.is_file() and f.suffix.lower() in SPEC_LIKE_SUFFIXES)
    if not files:
        raise ConfigError(f"the specs directory {str(specs)!r} holds no study specs (*{SPEC_SUFFIX}); add one or "
                          "point --config specs=DIR at another directory")
    if studies:
        wanted = studies.split(",") if isinstance(studies, str) else list(studies)
        by_name = {f.stem: f for f in files}
        missing = [w for w in wanted if w not in by_name]
        if missing:
            raise SpecError(str(specs), [f"no spec named {m!r} (have: {', '.join(by_name)})" for m in missing])
        files = [by_name[w] for w in wanted]
    return files


def build_index(specs: str | Path = "specs", results: str | Path = "results",
                variant: str = DEFAULT_VARIANT, studies=None, max_runs: int | str | None = None,
                memory_check: bool = False, *, cache: bool = False) -> WorkflowIndex | SnakefileIndex:
    """Validate and plan every selected spec (each of at most ``max_runs`` runs, see
    :func:`~ntkpipe.study.size.run_limit`; with ``memory_check``, none needing more memory than
    :func:`~ntkpipe.resources.memory_limit`). With a named variant, specs that lack it are skipped.
    With ``cache`` (the Snakefile), the Snakefile's index (:class:`~ntkpipe.wiring.SnakefileIndex`),
    its validation and plan reused from the last invocation while nothing they read has changed
    (:mod:`ntkpipe.plan_cache`)."""
    from ntkpipe.study.size import run_limit

    results = Path(results)
    files = spec_files(specs, studies)
    limit = run_limit(max_runs)
    bytes_limit = memory_limit() if memory_check else None
    if not cache:
        loaded, _ = load_studies(files, specs, variant, limit, bytes_limit)
        return index_studies(loaded, results)
    rebuild = partial(build_index, specs, results, variant, studies, max_runs, memory_check)
    return snakefile_index(files, specs, results, variant, limit, bytes_limit, rebuild)


def snakefile_index(files: list[Path], specs: str | Path, results: Path, variant: str, limit: int,
                    bytes_limit: int | None, rebuild: Callable[[], Any]) -> SnakefileIndex:
    """:func:`build_index` with the plan cache (:mod:`ntkpipe.plan_cache`): an entry whose run stores
    are as they were is used as it is (its studies and index unpickled on first use, or planned again
    by ``rebuild()`` if that fails); otherwise the studies are planned again, from the cached
    validation if there is one. Every existing planned store is checked, by its stamp where it holds."""
    key = plan_key(files, variant, limit, bytes_limit, results)
    cached = read_entry(results, key)
    checks: dict[Path, StoreCheck] = {}
    stamps: dict[Path, StoreStamp] = {}
    loaded: dict[str, Study | None] | None = None
    if cached is not None:
        entry, pickled = cached
        _skipped_notes(entry.skipped, variant)
        if entry.revalidate:  # their data files
            load_studies([Path(p) for p in entry.revalidate], specs, variant, limit, bytes_limit)
        stamps = check_stores(entry.wiring.stores, entry.stamps, checks)
        if store_states(entry.runs, checks) == entry.states:
            if stamps != entry.stamps:  # stores made or changed since: stamped for the next invocation
                write_entry(results, key, replace(entry, stamps=stamps), pickled)

            def load() -> WorkflowIndex:  # a damaged detail is planned again, as without the cache
                kept = read_detail(pickled)
                return kept.index if kept else rebuild()

            return SnakefileIndex(results, entry.wiring, load, checks)
        detail = read_detail(pickled)
        if detail is not None:
            loaded, revalidate = detail.studies, entry.revalidate
    if loaded is None:
        loaded, revalidate = load_studies(files, specs, variant, limit, bytes_limit)
    index = index_studies(loaded, results)
    runs = {job.path: job.id for job in index.runs.values()}
    wiring = wire(index)
    skipped = [path for path, study in loaded.items() if study is None]
    stamps = check_stores(wiring.stores, stamps, checks)
    entry = PlanEntry(wiring, skipped, revalidate, runs, store_states(runs, checks), stamps)
    write_entry(results, key, entry, pickle.dumps(PlanDetail(loaded, index), protocol=pickle.HIGHEST_PROTOCOL))
    return SnakefileIndex(results, wiring, lambda: index, checks)


def load_study(path: Path, variant: str, limit: int, **options) -> Study:
    """:func:`ntkpipe.study.load.load_study`, imported when a spec is validated."""
    from ntkpipe.study.load import load_study as load

    return load(path, variant, limit, **options)


def load_studies(files: list[Path], specs: str | Path, variant: str, limit: int,
                 bytes_limit: int | None) -> tuple[dict[str, Study | None], list[str]]:
    """Each spec file's validated study (None: it lacks the named variant, skipped), and the files
    whose studies read local data files; one SpecError for all the problems found."""
    from ntkpipe.data.sources import SOURCES
    from ntkpipe.lang.axes import suggest
    from ntkpipe.study.load import variant_names

    studies: dict[str, Study | None] = {}
    local_data: list[str] = []
    errors: list[SpecError] = []
    for path in files:
        if variant != DEFAULT_VARIANT and variant not in variant_names(path) and variant_names(path):
            studies[str(path)] = None
            continue
        try:
            study = load_study(path, variant, limit, memory_limit=bytes_limit)
        except SpecError as err:
            errors.append(err)
            continue
        studies[str(path)] = study
        if any(SOURCES[run.data.source].files is not None for run in study.runs):
            local_data.append(str(path))
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SpecError(str(specs), [f"{Path(e.path).name}: {p}" for e in errors for p in e.problems])
    _skipped_notes([path for path, study in studies.items() if study is None], variant)
    if files and not any(studies.values()):
        declared = sorted({v for path in files for v in variant_names(path)})
        raise SpecError(str(specs), [f"no spec declares the variant {variant!r}{suggest(variant, declared)} "
                                     f"(--config variant=NAME; declared: {', '.join(declared)})"])
    return studies, local_data


def _skipped_notes(skipped: list[str], variant: str) -> None:
    for path in skipped:
        print(f"ntkpipe: {Path(path).name} has no variant {variant!r}; skipped", file=sys.stderr)


def index_studies(studies: dict[str, Study | None], results: Path) -> WorkflowIndex:
    """Plan the validated ``studies`` into the workflow's index (a run that several studies share is
    one job, computing the final items of all of them)."""
    from ntkpipe.study.final_items import item_key
    from ntkpipe.study.plan import held_items, plan_finals, plan_study

    plans: dict[str, StudyPlan] = {}
    for study in studies.values():
        if study is not None:
            plan = plan_study(study, results)
            plans[plan.tag] = plan
    runs = merged_runs([r for plan in plans.values() for r in plan.runs + plan.support_runs])
    for tag, plan in list(plans.items()):  # a final item that a shared run's training job cannot hold too
        if any(not {item_key(m) for m in r.finals} <= {item_key(m) for m in runs[r.id].finals} for r in plan.runs):
            held = lambda job: held_items(job, runs[job.id])  # noqa: E731
            plans[tag] = replace(plan, finals=plan_finals(plan.runs, results, held))
    stages = {s.id: s for plan in plans.values() for s in plan.stages.values()}
    finals = {f.id: f for plan in plans.values() for f in plan.finals.values()}
    return WorkflowIndex(results, plans, runs, stages, finals)


def merged_runs(jobs: list[RunJob]) -> dict[str, RunJob]:
    """One job per run id, computing the final items of every study that has the run (the first of
    two with one name and different options: one store holds one variable of a name)."""
    runs: dict[str, RunJob] = {}
    for job in jobs:
        first = runs.setdefault(job.id, job)
        names = {m.name for m in first.finals}
        runs[job.id] = replace(first, finals=first.finals + tuple(m for m in job.finals if m.name not in names))
    return runs


def wire(index: WorkflowIndex) -> Wiring:
    """The wiring of ``index`` (:mod:`ntkpipe.wiring`): what the rules' functions read."""
    from ntkpipe.report import claims_caption, figure_caption, table_caption

    studies = {}
    for tag, plan in index.plans.items():
        claims = bool(plan.study.spec.claims)
        studies[tag] = StudyWiring(
            runs=[str(job.path) for job in plan.runs], finals=[str(job.path) for job in plan.finals.values()],
            dataset=str(plan.dataset_path), table=str(plan.table_path),
            figures={name: str(path) for name, path in plan.figure_paths.items()},
            claims_table=str(plan.claims_table_path) if claims else None,
            phase_table=str(plan.phase_table_path) if plan.phase_table_path else None,
            aggregate_config=canonical_json(plan.aggregate_config()),
            claims_caption=claims_caption(plan) if claims else None, table_caption=table_caption(plan),
            figure_configs={name: canonical_json(plan.figure_config(name)) for name in plan.figure_paths},
            figure_captions={name: figure_caption(plan, name) for name in plan.figure_paths})
    stores = {path: store_id for plan in index.plans.values() for path, store_id in planned_stores(plan).items()}
    return Wiring(studies,
                  run_inputs={i: [str(p) for p in job.stage_paths.values()] for i, job in index.runs.items()},
                  stage_inputs={i: [str(p) for p in job.inputs.values()] for i, job in index.stages.items()},
                  final_inputs={i: [str(p) for p in (job.run.path, *job.run.stage_paths.values())]
                                for i, job in index.finals.items()},
                  targets=index.targets(), stores=stores, directories=sorted(written_directories(index)))


def written_directories(index: WorkflowIndex) -> set[Path]:
    """Every directory the jobs of ``index`` write into (stores, figures, logs, the JAX cache)."""
    logs = index.results / "logs"
    dirs = {jax_cache_dir(index.results), logs / "train", logs / "aggregate", logs / "table", logs / "index"}
    dirs |= {logs / "claims" for plan in index.plans.values() if plan.study.spec.claims}
    dirs |= {logs / "phase_table" for plan in index.plans.values() if plan.phase_table_path}
    dirs |= {job.path.parent for job in index.runs.values()}
    dirs |= {d for job in index.finals.values() for d in (job.path.parent, logs / "finals")}
    dirs |= {d for job in index.stages.values() for d in (job.path.parent, logs / "stages" / job.compute)}
    for tag, plan in index.plans.items():
        dirs.add(plan.dataset_path.parent)
        if plan.figure_paths:
            dirs |= {logs / "plot" / tag} | {p.parent for p in plan.figure_paths.values()}
    return dirs


def check_results_writable(index: WorkflowIndex | SnakefileIndex) -> None:
    """Raise ConfigError, before any job runs, if a directory the jobs write into is not writable:
    the directory itself, or (not there yet) the nearest one above it that exists."""
    checked: set[Path] = set()
    wired = isinstance(index, SnakefileIndex)
    for directory in index.wiring.directories if wired else sorted(written_directories(index)):
        existing = directory
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if existing in checked:
            continue
        checked.add(existing)
        if not existing.is_dir():
            raise ConfigError(f"results directory: {existing} is a file, but the workflow writes {directory} there; "
                              f"move the file away or choose another directory with --config results=DIR")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(f"results directory: {existing} is not writable, and the jobs write into "
                              f"{directory}; make it writable (chmod u+w {existing}) or choose another directory "
                              "with --config results=DIR")


def jax_cache_dir(results: str | Path) -> Path:
    """The persistent JAX compilation cache: ``$NTKPIPE_JAX_CACHE`` where set, else ``results/.cache/jax``."""
    return Path(os.environ.get(JAX_CACHE_ENV) or Path(results) / ".cache" / "jax")


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
"""OpenBLAS's thread count, read when the library loads (numpy's and SciPy's each bundle one)."""


def limit_blas_threads(threads: int | None = None) -> int:
    """Give each job the BLAS threads it was scheduled for, and no more; returns the count.

    Snakemake schedules every job of the workflow on one core (no rule declares ``threads``), and
    ``profiles/default`` runs up to ``--cores`` of them at once as threads of one process: with
    OpenBLAS's default of a thread per core, two jobs' matrix products and eigendecompositions ran
    four threads on two cores, and an OpenBLAS thread that waits for a core spins. One thread per job
    (``threads=1``) ran a measurement-bound study in 0.66× the wall time (``benchmarks/README.md``),
    with numbers equal to rounding. A job process on a cluster (``threads`` None) gets the CPUs the
    scheduler gave it (its affinity mask). The environment variable reaches the OpenBLAS libraries
    loaded later (numpy's and SciPy's each bundle one); :mod:`threadpoolctl` limits those loaded."""
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ[BLAS_THREADS_ENV] = str(threads)
    if "numpy" in sys.modules:  # its OpenBLAS (and SciPy's, if loaded) read the variable before it was set
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads, user_api="blas")
    return threads


def configure_jax(results: str | Path) -> None:
    """The JAX compilation cache every job of the workflow shares (a job's own settings, precision
    and device, are made where it starts: :func:`ntkpipe.jobs.log.start_job`).

    The persistent compilation cache lives in :func:`jax_cache_dir` (reused across invocations); its
    path is made absolute because JAX keeps one cache per process and jobs may run from another working
    directory. Every program is cached: a tiny run compiles dozens, most well under JAX's default
    threshold of 1 s. Where JAX is not imported yet (a cached plan: nothing imported it), the settings
    are its environment variables, which it reads when a job imports it.
    """
    cache = jax_cache_dir(results).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    settings = {"jax_compilation_cache_dir": str(cache), "jax_persistent_cache_min_compile_time_secs": 0.0}
    if "jax" not in sys.modules:
        os.environ.update({name.upper(): str(value) for name, value in settings.items()})
        return
    import jax

    for name, value in settings.items():
        jax.config.update(name, value)
