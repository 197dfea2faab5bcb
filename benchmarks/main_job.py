"""Where the main job's time goes: ``snakemake --cores 2`` (the README's main command) from a fresh
results directory, broken down per study and per job.

Snakemake runs in this Python with every job in a thread of its process (``profiles/default``), and
``ntkpipe.jobs.logged`` (every rule body calls it) wrapped to time each job and to attribute JAX's
compile events (``jax.monitoring``, recorded in the thread that compiles) to it:

- compile: tracing to a jaxpr, lowering to MLIR, XLA's backend compilation (the persistent cache
  starts cold: ``results/.cache/jax`` of the fresh directory, ``$NTKPIPE_JAX_CACHE`` unset; with
  ``--warm DIR`` that cache instead, e.g. one kept from an earlier run);
- train, measure: what run stores record (``seconds_train``: the compiled optimizer steps;
  ``seconds_measure``: checkpoint and final measurements) and stage stores (``seconds_kernel``);
  both *include* the compiles made inside them;
- write: a run's dataset description and zarr store (the job's time after ``seconds_job``);
- rest: the remainder of the job (data, model init; aggregation, figures and tables entire);
- Snakemake: the wall time outside job bodies on ``--cores`` cores, wall − Σ jobs / cores, and
  in it the time until the first job starts (spec loading, planning, the DAG);
- process CPU: user + system seconds of the Snakemake process against ``--cores`` × wall (jobs are
  threads of one process: Python parts of two jobs take turns holding the GIL);
- per measurement (``ntkpipe.measure.registry.REGISTRY``, each ``compute`` wrapped in a wall-clock
  timer): calls and seconds. A measurement that first asks a checkpoint for its outputs or its NTK
  Gram (``ModelView``), which later ones read back, pays for them, compiles included.

A job belongs to the first selected study (in name order) that plans it; runs shared by several
studies are counted once.

    python benchmarks/main_job.py                                   # every default study (minutes)
    python benchmarks/main_job.py --studies phase_diagram nad_tasks # some
    python benchmarks/main_job.py --studies nad_tasks --readme      # and refresh benchmarks/README.md
    python benchmarks/main_job.py --studies nad_tasks --keep /tmp/r # keep the results (to compare them)
    python benchmarks/main_job.py --against 6d9bfa4                 # and the ratio to that revision's main job

With ``--against REV`` the same main job of revision ``REV`` (a git worktree of this repository, its own
``ntkpipe`` first on the path, a fresh results directory and so a cold compilation cache) runs first,
plain ``snakemake``, and the report gives this code's wall time as a ratio to it: seconds of one host
at one hour compare, seconds of different hours of a shared host do not (a float64 GEMM in NumPy, timed
before, between and after the two jobs, shows how far the host drifted). ``6d9bfa4`` is ``main`` when
issue 23 measured the main job at 526–548 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "xla",
}
PHASES = ["compile", "train", "measure", "write", "rest"]
README_START, README_END = "<!-- main_job.py: start -->", "<!-- main_job.py: end -->"

# Snakemake in this Python: argv[1] is the JSON-lines file that gets one record per job.
SNAKEMAKE_TIMING_JOBS = f"""
import json, sys, threading, time
import jax.monitoring
import ntkpipe.jobs
out = open(sys.argv.pop(1), "a", buffering=1)
current = threading.local()
def record(event, seconds, **_):
    label = {EVENTS!r}.get(event)
    job = getattr(current, "job", None)
    if label and job is not None:
        job[label] = job.get(label, 0.0) + seconds
        job["programs"] += label == "xla"
jax.monitoring.register_event_duration_secs_listener(record)
import atexit, dataclasses
from ntkpipe.measure.registry import REGISTRY
measured, lock = {{}}, threading.Lock()
def timed_compute(name, compute):
    def call(*args, **kwargs):
        tic = time.perf_counter()
        try:
            return compute(*args, **kwargs)
        finally:
            with lock:
                calls, seconds = measured.get(name, (0, 0.0))
                measured[name] = (calls + 1, seconds + time.perf_counter() - tic)
    return call
for name, measurement in list(REGISTRY.items()):
    REGISTRY[name] = dataclasses.replace(measurement, compute=timed_compute(name, measurement.compute))
atexit.register(lambda path=out.name + ".measurements": open(path, "w").write(json.dumps(measured)))
logged = ntkpipe.jobs.logged
def timed(path, job, *args):
    current.job = {{"log": str(path), "programs": 0, "start": time.time()}}
    try:
        return logged(path, job, *args)
    finally:
        current.job["end"] = time.time()
        out.write(json.dumps(current.job) + "\\n")
        current.job = None
ntkpipe.jobs.logged = timed
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


def snakemake_config(results: Path, studies: list[str]) -> list[str]:
    """The ``--config`` values of a main job into ``results`` (of ``studies`` only, if any)."""
    return [f"results={results}"] + ([f"studies={','.join(studies)}"] if studies else [])


def run_main_job(results: Path, studies: list[str], cores: int,
                 extra: list[str]) -> tuple[float, float, float, list[dict], dict[str, list]]:
    """(process start time, wall seconds, CPU seconds (user + system), one record per job, [calls,
    seconds] per measurement) of one ``snakemake`` into ``results``."""
    results.mkdir(parents=True)
    records = results / "jobs.jsonl"
    records.touch()
    cmd = [sys.executable, "-c", SNAKEMAKE_TIMING_JOBS, str(records), "--cores", str(cores), "--quiet", "all",
           "--config", *snakemake_config(results, studies), *extra]
    start = time.time()
    tic = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - tic
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    measured = json.loads(Path(f"{records}.measurements").read_text())
    return start, wall, cpu, [json.loads(line) for line in records.read_text().splitlines()], measured


def revision_wall(rev: str, studies: list[str], cores: int, extra: list[str]) -> float:
    """Wall seconds of the main job of revision ``rev`` (plain ``snakemake --cores``, its default target)
    in a temporary git worktree, with that worktree's ``ntkpipe`` first on the path, into a fresh results
    directory."""
    with tempfile.TemporaryDirectory() as tmp:
        tree, results = Path(tmp) / "tree", Path(tmp) / "results"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True,
                       capture_output=True)
        try:
            env = {k: v for k, v in os.environ.items() if k != "NTKPIPE_JAX_CACHE"} | {"PYTHONPATH": str(tree)}
            tic = time.perf_counter()
            subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--quiet", "--config",
                            *snakemake_config(results, studies), *extra], cwd=tree, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return time.perf_counter() - tic
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


def gemm_rate(n: int = 4000, repeats: int = 5) -> float:
    """GFLOP/s of NumPy's float64 n × n GEMM, the median of ``repeats``: how fast the host is now."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((n, n))
    seconds = []
    for _ in range(repeats):
        tic = time.perf_counter()
        a @ a.T
        seconds.append(time.perf_counter() - tic)
    return 2 * n**3 / float(np.median(seconds)) / 1e9


def store_seconds(path: Path) -> dict[str, float]:
    """The ``seconds_*`` variables of a run or stage store (none if it is missing)."""
    import xarray as xr

    if not path.exists():
        return {}
    with xr.open_zarr(path) as ds:
        return {k: float(ds[k]) for k in ds.data_vars if k.startswith("seconds_")}


def job_phases(record: dict, results: Path, index) -> tuple[str, str, dict[str, float]]:
    """(rule, what the job makes, seconds per phase) of one job record (:data:`PHASES`; compile also
    split into trace, lower, xla)."""
    log = Path(record["log"]).relative_to(results / "logs")
    rule, name = log.parts[0], log.stem
    wall = record["end"] - record["start"]
    compile_s = sum(record.get(k, 0.0) for k in EVENTS.values())
    phases = dict.fromkeys(PHASES, 0.0) | {k: record.get(k, 0.0) for k in EVENTS.values()}
    phases["compile"] = compile_s
    if rule == "train":
        ids = [name]
        if name.startswith("pack-"):
            from ntkpipe.study.packs import packs_by_run, plan_packs

            packs = packs_by_run(plan_packs(index.runs.values(), only_missing=False))  # as the fresh run packed them
            ids = [job.id for job in next(p for p in packs.values() if p.id == name[5:]).runs]
        stores = [store_seconds(results / "runs" / f"{i}.zarr") for i in ids]
        phases["train"] = sum(s.get("seconds_train", 0.0) for s in stores)
        phases["measure"] = sum(s.get("seconds_measure", 0.0) for s in stores)
        phases["write"] = max(wall - sum(s.get("seconds_job", 0.0) for s in stores), 0.0)
        name = ids[0]
    elif rule == "stages":
        phases["measure"] = store_seconds(results / "stages" / log.parts[1] / f"{name}.zarr").get("seconds_kernel", 0.0)
    gross = phases["train"] + phases["measure"]
    phases["rest"] = wall - max(gross, compile_s) - phases["write"]
    return rule, name, phases | {"wall": wall}


def owners(index) -> dict[tuple[str, str], str]:
    """(rule, id or tag) → the first study (in name order) that plans it."""
    out: dict[tuple[str, str], str] = {}
    for tag in sorted(index.plans):
        plan = index.plans[tag]
        for job in plan.runs + plan.support_runs:
            out.setdefault(("train", job.id), tag)
        for stage_id in plan.stages:
            out.setdefault(("stages", stage_id), tag)
        for final in plan.finals.values():
            out.setdefault(("finals", final.id), tag)
        for rule in ("aggregate", "table", "plot"):
            out[(rule, tag)] = tag
    return out


def breakdown(results: Path, records: list[dict], studies: list[str]):
    """Per study and per rule: jobs and seconds per phase."""
    from ntkpipe.workflow import build_index

    index = build_index(REPO / "specs", results, studies=studies or None)
    own = owners(index)
    per_study: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    per_rule: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for record in records:
        rule, name, phases = job_phases(record, results, index)
        key = Path(record["log"]).parent.name if rule == "plot" else name
        study = own.get((rule, key), "?")
        for table, row in ((per_study, study), (per_rule, rule)):
            table[row]["jobs"] += 1
            table[row]["programs"] += record["programs"]
            for k, v in phases.items():
                table[row][k] += v
    return per_study, per_rule


COLUMNS = ["jobs", "wall", "compile", "trace", "lower", "xla", "programs", "train", "measure", "write", "rest"]


def table(title: str, rows: dict[str, dict]) -> list[str]:
    """A Markdown table of ``rows`` (seconds summed over jobs) with a total row."""
    total = defaultdict(float)
    for row in rows.values():
        for k in COLUMNS:
            total[k] += row[k]
    head = f"| {title} | jobs | job s | compile s (trace, lower, XLA) | programs | train s | measure s | write s | rest s |"
    lines = [head, "|" + "---|" + "---:|" * 8]
    for name, row in sorted(rows.items(), key=lambda kv: -kv[1]["wall"]) + [("**total**", total)]:
        lines.append(f"| {name} | {int(row['jobs'])} | {row['wall']:.1f} | {row['compile']:.1f} ({row['trace']:.1f}, "
                     f"{row['lower']:.1f}, {row['xla']:.1f}) | {int(row['programs'])} | {row['train']:.1f} | "
                     f"{row['measure']:.1f} | {row['write']:.1f} | {row['rest']:.1f} |")
    return lines


def measurement_table(measured: dict[str, list]) -> list[str]:
    """A Markdown table of every measurement's calls and wall seconds, the largest first."""
    lines = ["| measurement | calls | s | ms per call |", "|---|---:|---:|---:|"]
    for name, (calls, seconds) in sorted(measured.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {name} | {calls} | {seconds:.1f} | {1e3 * seconds / calls:.1f} |")
    return lines


def summary(wall: float, cpu: float, start: float, records: list[dict], cores: int, per_rule: dict) -> list[str]:
    summed = sum(r["wall"] for r in per_rule.values())
    compile_s = sum(r["compile"] for r in per_rule.values())
    first = min((r["start"] for r in records), default=start) - start
    return [f"wall {wall:.1f} s on {cores} cores; Σ job seconds {summed:.1f} s "
            f"(compile {compile_s:.1f} s = {compile_s / max(summed, 1e-9):.0%} of it)",
            f"Snakemake and idle cores: wall − Σ jobs / cores = {wall - summed / cores:.1f} s "
            f"({(wall - summed / cores) / wall:.0%} of the wall); until the first job started: {first:.1f} s",
            f"process CPU (user + system) {cpu:.1f} s = {cpu / (cores * wall):.0%} of {cores} cores × wall"]


def refresh_readme(text: str) -> None:
    """Replace (or append) the section between the markers in benchmarks/README.md."""
    readme = REPO / "benchmarks" / "README.md"
    old = readme.read_text()
    block = f"{README_START}\n{text}\n{README_END}"
    if README_START in old:
        head, _, tail = old.partition(README_START)
        old = head + block + tail.partition(README_END)[2]
    else:
        old = old.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", nargs="*", default=[], help="spec names (default: every spec in specs/)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--warm", type=Path, help="use this JAX compilation cache instead of a cold one")
    parser.add_argument("--keep", type=Path, help="write the results here (a new directory) and keep them")
    parser.add_argument("--readme", action="store_true", help="refresh the generated block of benchmarks/README.md")
    parser.add_argument("--against", metavar="REV", help="first run revision REV's main job, and report the ratio")
    parser.add_argument("snakemake_args", nargs="*", help="after --: more snakemake arguments (e.g. --config pack=1)")
    args = parser.parse_args()
    if args.warm:
        os.environ["NTKPIPE_JAX_CACHE"] = str(args.warm.resolve())
    else:
        os.environ.pop("NTKPIPE_JAX_CACHE", None)
    if args.keep and args.keep.exists():
        parser.error(f"--keep {args.keep}: exists; name a new directory")
    rates, against = [gemm_rate()], None
    if args.against:
        against = revision_wall(args.against, args.studies, args.cores, args.snakemake_args)
        rates.append(gemm_rate())
    with tempfile.TemporaryDirectory() as tmp:
        results = args.keep.resolve() if args.keep else Path(tmp) / "results"
        start, wall, cpu, records, measured = run_main_job(results, args.studies, args.cores, args.snakemake_args)
        per_study, per_rule = breakdown(results, records, args.studies)
    rates.append(gemm_rate())
    load = os.getloadavg()
    host = f"NumPy's float64 4000² GEMM at {', '.join(f'{r:.0f}' for r in rates)} GFLOP/s" + (
        " (before, between and after the two jobs)" if against else " (before and after the job)")
    ratio = ([f"revision {args.against}: wall {against:.1f} s, run just before; this code / {args.against}: "
              f"**{wall / against:.2f}**"] if against else [])
    lines = [f"`python benchmarks/main_job.py {' '.join(sys.argv[1:])}` "
             f"({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average at the end {load[0]:.1f}; "
             f"{host}):", "", *summary(wall, cpu, start, records, args.cores, per_rule), *ratio, "", *table("study", per_study), "",
             *table("rule", per_rule), "", *measurement_table(measured)]
    print("\n".join(lines))
    if args.readme:
        refresh_readme("\n".join(lines))


if __name__ == "__main__":
    main()
