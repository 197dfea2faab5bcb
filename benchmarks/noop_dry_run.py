"""A no-op ``snakemake -n`` of the workflow against the dry run of a one-rule Snakefile (the floor).

    python benchmarks/noop_dry_run.py                     # this checkout, its results/ (all done)
    python benchmarks/noop_dry_run.py --workdir DIR       # another checkout (e.g. an older commit)
    python benchmarks/noop_dry_run.py --config results=DIR  # another results directory

Run it after the main job, when nothing is left to do. Both dry runs are fresh ``snakemake -n --cores
1`` processes, alternated (workflow, floor, workflow, ...), so that the load of a shared machine
falls on both alike. The first workflow dry run is reported apart: it is the one after a change
(code, specs or stores), which validates and plans again and rewrites the plan cache
(``ntkpipe.plan_cache``). Wall time and CPU time (user + system of the child) are reported as
min / median / max, and their ratios to the floor's median.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_RULE = 'rule all:\n    output: "done.txt"\n    shell: "touch {output}"\n'
TARGET = 1.5


def dry_run(workdir: Path, env: dict, config: list[str] = ()) -> tuple[float, float]:
    """Wall and CPU seconds of one ``snakemake -n`` in ``workdir`` (with ``--config config`` if
    given); it must find nothing to do."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(["snakemake", "-n", "--cores", "1", *(["--config", *config] if config else [])], cwd=workdir, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or "Nothing to be done" not in done.stdout + done.stderr:
        raise SystemExit(f"snakemake -n in {workdir} is not a no-op:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary(values: list[float]) -> str:
    return f"{min(values):6.2f} {statistics.median(values):6.2f} {max(values):6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=REPO, help="the checkout whose Snakefile runs (default: this)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE",
                        help="passed to the workflow's snakemake (e.g. results=DIR)")
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    env = {**os.environ, "PYTHONPATH": str(workdir)}
    with tempfile.TemporaryDirectory() as floor_dir:
        floor = Path(floor_dir)
        (floor / "Snakefile").write_text(ONE_RULE)
        (floor / "done.txt").touch()
        first = dry_run(workdir, env, args.config)
        dry_run(floor, env)  # warm the page cache for both
        runs: dict[str, list[tuple[float, float]]] = {"workflow": [], "floor": []}
        for _ in range(args.repeats):
            runs["workflow"].append(dry_run(workdir, env, args.config))
            runs["floor"].append(dry_run(floor, env))
    print(f"no-op snakemake -n in {workdir}, {args.repeats} alternating pairs; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"first workflow dry run (plans again, writes the plan cache): wall {first[0]:.2f} s, CPU {first[1]:.2f} s")
    print(f"{'':10} {'wall s min/median/max':>22} {'CPU s min/median/max':>22}")
    for name, values in runs.items():
        print(f"{name:10} {summary([w for w, _ in values]):>22} {summary([c for _, c in values]):>22}")
    floor_wall = statistics.median(w for w, _ in runs["floor"])
    floor_cpu = statistics.median(c for _, c in runs["floor"])
    wall = [w / floor_wall for w, _ in runs["workflow"]]
    cpu = [c / floor_cpu for _, c in runs["workflow"]]
    print(f"workflow / floor median, wall: {summary(wall)}  (target <= {TARGET})")
    print(f"workflow / floor median, CPU:  {summary(cpu)}")
    print(f"first / floor median, wall {first[0] / floor_wall:.2f}, CPU {first[1] / floor_cpu:.2f}")


if __name__ == "__main__":
    main()
