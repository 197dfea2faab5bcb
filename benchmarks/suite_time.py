"""Wall time of the whole default suite against the compute its jobs summed.

Runs ``snakemake --cores N all`` once into a fresh results directory (every default study, from
scratch) and reads back every job's log (``results/logs/<rule>/…``: each ends ``done in S s``). It
prints, per rule, the jobs and their summed seconds, and for the suite

    wall / (Σ job seconds / cores)

which is 1 when the cores are never idle and every second of the wall is spent inside a job body.
The rest is Snakemake's DAG building and scheduling, Python start-up, and cores left idle when fewer
jobs than cores are ready (e.g. while the last runs of a study finish before its aggregation).
With ``--pack`` the suite runs twice, unpacked and packed (``--config pack=1``), and the packed
speed-up is printed as unpacked wall / packed wall.

JAX's compilation is timed inside the Snakemake process (``jax.monitoring`` events, see
:data:`COMPILE_EVENTS`): XLA's backend compilation, and tracing plus lowering to MLIR, each as a share
of the summed job seconds (jobs run as threads of that process, ``profiles/default``).

    python benchmarks/suite_time.py                 # about 9 minutes on 2 cores
    python benchmarks/suite_time.py --studies depth_scaling eigenfunction_tasks --pack
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DONE = re.compile(r": done in ([0-9.]+) s$")
COMPILE_EVENTS = {
    "/jax/core/compile/backend_compile_duration": "XLA compilation",
    "/jax/core/compile/jaxpr_trace_duration": "tracing",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering to MLIR",
}
# `snakemake` in this Python, appending one "<event> <seconds>" line per compile event to argv[1].
SNAKEMAKE_TIMING_COMPILES = f"""
import sys, jax.monitoring
out = open(sys.argv.pop(1), "a", buffering=1)
def record(event, seconds, **_):
    if event in {set(COMPILE_EVENTS)!r}:
        out.write(f"{{event}} {{seconds}}\\n")
jax.monitoring.register_event_duration_secs_listener(record)
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


def job_seconds(logs: Path) -> dict[str, tuple[int, float]]:
    """Per rule (the first folder under ``logs``): (jobs, summed seconds) of the jobs whose log ends
    ``done in S s``. A job that failed or never ended is not counted."""
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for log in sorted(logs.rglob("*.log")):
        lines = log.read_text().splitlines()
        match = DONE.search(lines[-1]) if lines else None
        if match:
            rule = log.relative_to(logs).parts[0]
            totals[rule][0] += 1
            totals[rule][1] += float(match.group(1))
    return {rule: (count, seconds) for rule, (count, seconds) in sorted(totals.items())}


def compile_seconds(events: Path) -> dict[str, tuple[int, float]]:
    """Per :data:`COMPILE_EVENTS` label: (events, summed seconds) of the lines ``<event> <seconds>``."""
    totals: dict[str, list] = {label: [0, 0.0] for label in COMPILE_EVENTS.values()}
    for line in events.read_text().splitlines():
        event, seconds = line.split()
        totals[COMPILE_EVENTS[event]][0] += 1
        totals[COMPILE_EVENTS[event]][1] += float(seconds)
    return {label: (count, seconds) for label, (count, seconds) in totals.items()}


def run_suite(cores: int, studies: list[str], pack: bool) -> tuple[float, dict, dict]:
    """(wall seconds, :func:`job_seconds`, :func:`compile_seconds`) of one ``snakemake`` from scratch
    in a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        config = [f"results={Path(tmp) / 'results'}"]
        config += [f"studies={','.join(studies)}"] if studies else []
        config += ["pack=1"] if pack else []
        events = Path(tmp) / "compile_events.txt"
        events.touch()
        cmd = [sys.executable, "-c", SNAKEMAKE_TIMING_COMPILES, str(events),
               "--cores", str(cores), "--quiet", "all", "--config", *config]
        tic = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - tic
        return wall, job_seconds(Path(tmp) / "results" / "logs"), compile_seconds(events)


def report(label: str, wall: float, jobs: dict[str, tuple[int, float]], compiles: dict[str, tuple[int, float]],
           cores: int) -> None:
    summed = sum(seconds for _, seconds in jobs.values())
    print(f"\n{label}: wall {wall:.1f} s, {sum(n for n, _ in jobs.values())} jobs")
    for rule, (count, seconds) in jobs.items():
        print(f"  {rule:12} {count:5d} jobs {seconds:8.1f} s")
    print(f"  summed job seconds / cores = {summed / cores:.1f} s;  wall / (summed / cores) = {wall * cores / summed:.2f}")
    for what, (count, seconds) in compiles.items():
        print(f"  {what:16} {count:5d} calls {seconds:7.1f} s = {seconds / summed:.1%} of the summed job seconds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--studies", nargs="*", default=[], help="spec names (default: every spec in specs/)")
    parser.add_argument("--pack", action="store_true", help="also run packed (--config pack=1) and compare")
    args = parser.parse_args()
    modes = [False, True] if args.pack else [False]
    walls = {}
    for pack in modes:
        wall, jobs, compiles = run_suite(args.cores, args.studies, pack)
        walls[pack] = wall
        report("packed" if pack else "unpacked", wall, jobs, compiles, args.cores)
    if args.pack:
        print(f"\npacked speed-up (unpacked wall / packed wall): {walls[False] / walls[True]:.2f}")


if __name__ == "__main__":
    main()
