"""Packed vs unpacked training of shipped studies, alternating fresh processes (best of several).

For each study (default: depth_scaling and eigenfunction_tasks, default variant) the stage jobs run
once into a temporary results directory; then every run is trained in a fresh Python process
(cold JAX compilation, as a ``snakemake`` invocation), alternately packed (the packs
``snakemake --config pack=1`` plans from scratch, :mod:`ntkpipe.study.packs`; one ``train_pack``
per pack, ``train_run`` for the rest) and unpacked (one ``train_run`` per run), ``--repeats``
times each. Prints per study and mode, for its fastest process: runs, jobs, wall seconds, the
summed ``seconds_train`` (compiled training calls; packed, they also compute the shared checkpoint
quantities) and ``seconds_measure`` (the other checkpoint and final measurements) of the stores,
and the ratios unpacked / packed; and the largest relative difference between the stores' variables.

    python benchmarks/packed_runs.py                         # both studies
    python benchmarks/packed_runs.py depth_scaling           # one study
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the child process imports this checkout's ntkpipe


def _run_stages(plan) -> None:
    from ntkpipe.stages import run_stage

    pending = dict(plan.stages)
    while pending:
        ready = [s for s in pending.values() if all(Path(p).exists() for p in s.inputs.values())]
        for stage in ready:
            run_stage(stage, stage.path)
            del pending[stage.id]


def _seconds(paths) -> tuple[float, float]:
    from ntkpipe.store import read_store

    stores = [read_store(p) for p in paths]
    return (sum(float(s["seconds_train"]) for s in stores), sum(float(s["seconds_measure"]) for s in stores))


def _max_difference(a_paths, b_paths) -> float:
    from ntkpipe.store import read_store

    worst = 0.0
    for pa, pb in zip(a_paths, b_paths):
        a, b = read_store(pa).load(), read_store(pb).load()
        for name in a.data_vars:
            if name.startswith("seconds"):
                continue
            x, y = np.asarray(a[name].values, float), np.asarray(b[name].values, float)
            finite = np.isfinite(x) & np.isfinite(y)
            if finite.any():
                scale = max(np.max(np.abs(x[finite])), 1e-30)
                worst = max(worst, float(np.max(np.abs(x[finite] - y[finite])) / scale))
    return worst


def _plan(name: str, tmp: Path):
    from ntkpipe.study.load import load_study
    from ntkpipe.study.plan import plan_study

    plan = plan_study(load_study(REPO / "specs" / f"{name}.yaml"), tmp / name)
    return plan, list({job.id: job for job in plan.runs + plan.support_runs}.values())


def train_all(name: str, tmp: Path, mode: str, tag: str) -> None:
    """Train every run of study ``name`` into ``tmp/<name>/<tag>``, packed or not (a child process)."""
    from ntkpipe.jobs import train_pack, train_run
    from ntkpipe.study.packs import plan_packs

    _, runs = _plan(name, tmp)
    out = tmp / name / tag
    packs = plan_packs(runs) if mode == "packed" else {}
    packed_ids = {job.id for pack in packs.values() for job in pack.runs}
    for pack in packs.values():
        train_pack(pack.runs, [out / job.path.name for job in pack.runs])
    for job in runs:
        if job.id not in packed_ids:
            train_run(job, out / job.path.name)
    print(len(packs) + len(runs) - len(packed_ids))


def bench(name: str, tmp: Path, repeats: int) -> None:
    """Alternate packed and unpacked child processes ``repeats`` times; report each mode's fastest."""
    plan, runs = _plan(name, tmp)
    _run_stages(plan)
    best: dict[str, tuple[float, int, str]] = {}
    for rep in range(repeats):
        for mode in ("packed", "unpacked"):
            tag = f"{mode}-{rep}"
            tic = time.perf_counter()
            out = subprocess.run([sys.executable, __file__, name, "--child", mode, "--tag", tag, "--tmp", str(tmp)],
                                 check=True, stdout=subprocess.PIPE, text=True,
                                 cwd=REPO).stdout
            wall = time.perf_counter() - tic
            if mode not in best or wall < best[mode][0]:
                best[mode] = (wall, int(out.split()[-1]), tag)
    names = [job.path.name for job in runs]
    seconds = {mode: _seconds(tmp / name / tag / n for n in names) for mode, (_, _, tag) in best.items()}
    for mode, (wall, jobs, _) in best.items():
        print(f"{name:22} {mode:9} {len(names):5d} {jobs:5d} {wall:8.1f} {seconds[mode][0]:8.1f} "
              f"{seconds[mode][1]:9.1f}")
    diff = _max_difference([tmp / name / best["unpacked"][2] / n for n in names],
                           [tmp / name / best["packed"][2] / n for n in names])
    (train_p, measure_p), (train_u, measure_u) = seconds["packed"], seconds["unpacked"]
    print(f"{name:22} {'ratio':9} {'':5} {'':5} {best['unpacked'][0] / best['packed'][0]:8.2f} "
          f"{train_u / train_p:8.2f} {measure_u / measure_p:9.2f}   max |Δ|/max|x| = {diff:.1e}", flush=True)


def main() -> None:
    from ntkpipe.jobs.log import start_job

    start_job()  # a job's settings (float64 on) in the parent (stages) and each child (training)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", nargs="*", default=["depth_scaling", "eigenfunction_tasks"])
    parser.add_argument("--child", choices=["packed", "unpacked"], help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=2, help="alternating packed/unpacked pairs (default 2)")
    args = parser.parse_args()
    if args.child:
        train_all(args.studies[0], args.tmp, args.child, args.tag)
        return
    print(f"{'study':22} {'mode':9} {'runs':>5} {'jobs':>5} {'wall s':>8} {'train s':>8} {'measure s':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.studies:
            bench(name, Path(tmp), args.repeats)
    print("wall: the process that trains every run (JAX import and compilation included); train, measure: the\n"
          "stores' summed seconds_train (a pack's time split among its members) and seconds_measure; ratio:\n"
          "unpacked / packed; max |Δ|/max|x|: the largest difference of a stored variable between the two\n"
          "stores of a run, relative to the variable's largest magnitude.", file=sys.stderr)


if __name__ == "__main__":
    main()
