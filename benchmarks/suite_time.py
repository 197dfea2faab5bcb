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

    python benchmarks/suite_time.py                 # about 9 minutes on 2 cores
    python benchmarks/suite_time.py --studies depth_scaling eigenfunction_tasks --pack
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DONE = re.compile(r": done in ([0-9.]+) s$")


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


def run_suite(cores: int, studies: list[str], pack: bool) -> tuple[float, dict[str, tuple[int, float]]]:
    """(wall seconds, :func:`job_seconds`) of one ``snakemake`` from scratch in a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        config = [f"results={Path(tmp) / 'results'}"]
        config += [f"studies={','.join(studies)}"] if studies else []
        config += ["pack=1"] if pack else []
        cmd = ["snakemake", "--cores", str(cores), "--quiet", "all", "--config", *config]
        tic = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - tic
        return wall, job_seconds(Path(tmp) / "results" / "logs")


def report(label: str, wall: float, jobs: dict[str, tuple[int, float]], cores: int) -> None:
    summed = sum(seconds for _, seconds in jobs.values())
    print(f"\n{label}: wall {wall:.1f} s, {sum(n for n, _ in jobs.values())} jobs")
    for rule, (count, seconds) in jobs.items():
        print(f"  {rule:12} {count:5d} jobs {seconds:8.1f} s")
    print(f"  summed job seconds / cores = {summed / cores:.1f} s;  wall / (summed / cores) = {wall * cores / summed:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--studies", nargs="*", default=[], help="spec names (default: every spec in specs/)")
    parser.add_argument("--pack", action="store_true", help="also run packed (--config pack=1) and compare")
    args = parser.parse_args()
    modes = [False, True] if args.pack else [False]
    walls = {}
    for pack in modes:
        wall, jobs = run_suite(args.cores, args.studies, pack)
        walls[pack] = wall
        report("packed" if pack else "unpacked", wall, jobs, args.cores)
    if args.pack:
        print(f"\npacked speed-up (unpacked wall / packed wall): {walls[False] / walls[True]:.2f}")


if __name__ == "__main__":
    main()
