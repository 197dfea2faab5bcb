"""What a study costs as it grows: its sweep (runs), and the points P of its Gram and eigendecomposition
stages; and the constants of the cost model behind ``ntkpipe plan --cost`` (``ntkpipe.study.cost``).

    python benchmarks/scale.py gram                     # Gram and eigh time and peak memory, P = 250 ... 4000
    python benchmarks/scale.py sweep                    # a tiny study of 10, 100 and 1000 runs through snakemake
    python benchmarks/scale.py calibrate RESULTS        # fit the constants to RESULTS/logs (a finished main job)
    python benchmarks/scale.py calibrate RESULTS --write   # and store them in ntkpipe/study/cost_constants.json
                                                           # (each study's logged seconds: tests/data/cost_study_seconds.json)

``gram``: the NTK Gram of a 2-layer width-64 ReLU MLP (C = 1, D = 10, float64, x2 = x1, the structured
``mlp_layers`` implementation as the stages use it) and the full ``eigh`` of it, each P in a fresh process
(peak RSS above the process's RSS before the call; time: best of 3 after a compiling call); the exponent
is the slope of log time (memory) on log P over the largest four P.
``sweep``: ``snakemake --cores 2`` on a tiny study (a 2-layer width-20 linear network on 50 points, 50 GD
steps, 6 checkpoints) with 10, 100 and 1000 seeds into fresh results directories; wall time, the jobs' logged
seconds and the peak memory of the snakemake process (its jobs run in it), and their exponents.
``calibrate``: each job's logged ``done in S s`` against its features, fitted by non-negative least squares
(each job once, though several studies share it; weighted by 1/√(its study's logged seconds), so that the
small studies count beside the large), and each study's estimate against its logged seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DONE = re.compile(r": done in ([0-9.]+) s$", re.M)
STUDY_SECONDS = REPO / "tests" / "data" / "cost_study_seconds.json"
"""Each study's logged job seconds in the main job that ``calibrate --write`` fitted (``tests/test_cost.py``)."""

GRAM_CHILD = """
import json, resource, sys, time
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from ntkpipe.models import MLP
from ntkpipe.ntk import empirical_ntk
P, what = int(sys.argv[1]), sys.argv[2]
model = MLP(10, 64, 2, 1, activation="relu", key=jax.random.key(0))
x = np.random.default_rng(0).standard_normal((P, 10))
def rss():
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
def gram():
    return np.asarray(empirical_ntk(model, x, implementation="mlp_layers"))[:, :, 0, 0]
k = gram()
if what == "eigh":
    call = lambda: np.linalg.eigh(k)
else:
    call = gram
base = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
call()
times = []
for _ in range(3):
    tic = time.perf_counter(); call(); times.append(time.perf_counter() - tic)
print(json.dumps({"seconds": min(times), "peak": rss() - base}))
"""


def exponent(x: list[float], y: list[float]) -> float:
    """Slope of log y on log x (least squares)."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def gram_curves(points: list[int]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    print(f"P        Gram s   Gram MB   eigh s   eigh MB   (load average {os.getloadavg()[0]:.1f})")
    rows = {}
    for p in points:
        rows[p] = {}
        for what in ("gram", "eigh"):
            out = subprocess.run([sys.executable, "-c", GRAM_CHILD, str(p), what], env=env, capture_output=True,
                                 text=True, check=True).stdout
            rows[p][what] = json.loads(out.splitlines()[-1])
        g, e = rows[p]["gram"], rows[p]["eigh"]
        print(f"{p:<8} {g['seconds']:7.3f} {g['peak'] / 2**20:9.1f} {e['seconds']:8.3f} {e['peak'] / 2**20:9.1f}")
    tail = points[-4:]
    for what in ("gram", "eigh"):
        t = exponent(tail, [rows[p][what]["seconds"] for p in tail])
        m = exponent(tail, [max(rows[p][what]["peak"], 1) for p in tail])
        print(f"{what}: time ∝ P^{t:.2f}, peak memory ∝ P^{m:.2f} (P = {tail[0]} ... {tail[-1]})")


TINY = """\
description: A tiny sweep for benchmarks/scale.py
seed: 0
data: {{source: linear_teacher, dim: 10, n_train: 50, teacher_scale: 1.0, gamma: 0.0}}
model: {{depth: 2, width: 20, activation: linear, parameterization: standard, sigma: 0.1}}
train:
  optimizer: {{name: gd, lr: 0.05}}
  loss: mse
  steps: 50
  checkpoints: {{spacing: linear, count: 5}}
measure: [loss, kernel_norm]
sweep:
  seed: {{range: [0, {seeds}, 1]}}
"""


def job_seconds(results: Path) -> list[float]:
    """Every ``done in S s`` of the job logs under ``results/logs``."""
    return [float(s) for log in (results / "logs").rglob("*.log") for s in DONE.findall(log.read_text())]


PEAK_CHILD = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""
"""Runs a command and prints its peak RSS in MB (the in-process executor runs every job in the snakemake process)."""


def sweep_curve(sizes: list[int]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    walls, summed, peaks = [], [], []
    print(f"runs   wall s   Σ job s   Σ job s per run   peak MB   (load average {os.getloadavg()[0]:.1f})")
    for runs in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            specs = Path(tmp) / "specs"
            specs.mkdir()
            (specs / "tiny_sweep.yaml").write_text(TINY.format(seeds=runs))
            tic = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", PEAK_CHILD, "snakemake", "--cores", "2", "--quiet", "all",
                                   "--config", f"specs={specs}", f"results={Path(tmp) / 'results'}"],
                                  cwd=REPO, env=env, check=True, capture_output=True, text=True)
            walls.append(time.perf_counter() - tic)
            summed.append(sum(job_seconds(Path(tmp) / "results")))
            peaks.append(float(done.stdout.split()[-1]))
        print(f"{runs:<6} {walls[-1]:7.1f} {summed[-1]:9.1f} {summed[-1] / runs:17.2f} {peaks[-1]:9.0f}")
    for label, keep in (("all sizes", slice(None)), (f"{sizes[-2]} … {sizes[-1]} runs", slice(-2, None))):
        if len(sizes[keep]) > 1:  # the per-run costs show at the largest sizes, the fixed ones at the smallest
            print(f"{label}: wall ∝ runs^{exponent(sizes[keep], walls[keep]):.2f}, Σ job s ∝ runs^"
                  f"{exponent(sizes[keep], summed[keep]):.2f}, peak memory ∝ runs^{exponent(sizes[keep], peaks[keep]):.2f}")


def calibrate(results: Path, specs: Path, write: bool) -> None:
    from ntkpipe.study.cost import CONSTANTS_FILE, FEATURES, Constants, fit_constants, job_seconds, study_jobs
    from ntkpipe.workflow import build_index

    index = build_index(specs, results)
    logs = results / "logs"
    samples, by_study = {}, {}  # samples by log: a stage job that several studies share ran once
    for tag, plan in index.plans.items():
        for name, features, _ in study_jobs(plan):
            kind, *rest = name.split()
            log = {"train": lambda: logs / "train" / f"{rest[0]}.log",
                   "stage": lambda: logs / "stages" / rest[0] / f"{rest[1]}.log",
                   "aggregate": lambda: logs / "aggregate" / f"{tag}.log",
                   "plot": lambda: logs / "plot" / tag / f"{rest[1]}.log"}[kind]()
            found = DONE.findall(log.read_text()) if log.exists() else []
            if found:
                samples[log] = (tag, features, float(found[-1]))
                by_study.setdefault(tag, []).append((features, float(found[-1])))
    study_seconds = {tag: sum(s for _, s in rows) for tag, rows in by_study.items()}
    seconds = fit_constants([(features, s) for _, features, s in samples.values()],
                            [study_seconds[tag] ** -0.5 for tag, _, _ in samples.values()])
    machine = (f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}): the {len(samples)} job "
               f"logs of a main job of the {len(by_study)} studies, {time.strftime('%Y-%m-%d')}")
    constants = Constants(seconds, machine)
    print("\n".join(f"{f:18} {seconds[f]:.3e} s per unit  ({doc})" for f, doc in FEATURES.items()))
    print(f"\n{'study':28} {'jobs':>5} {'logged s':>9} {'estimate s':>10} {'ratio':>6}")
    ratios = []
    for tag, rows in by_study.items():
        logged = sum(s for _, s in rows)
        estimate = sum(job_seconds(f, constants) for f, _ in rows)
        ratios.append(estimate / logged)
        print(f"{tag:28} {len(rows):5} {logged:9.1f} {estimate:10.1f} {estimate / logged:6.2f}")
    print(f"estimate / logged per study: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
          f"max {max(ratios):.2f}")
    if write:
        CONSTANTS_FILE.write_text(json.dumps({"machine": machine, "seconds": seconds}, indent=1) + "\n")
        STUDY_SECONDS.write_text(json.dumps({"machine": machine, "logged_seconds": {
            tag: round(seconds, 1) for tag, seconds in sorted(study_seconds.items())}}, indent=1) + "\n")
        print(f"wrote {CONSTANTS_FILE} and {STUDY_SECONDS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gram")
    g.add_argument("--points", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    s = sub.add_parser("sweep")
    s.add_argument("--runs", type=int, nargs="+", default=[10, 100, 1000])
    c = sub.add_parser("calibrate")
    c.add_argument("results", type=Path)
    c.add_argument("--specs", type=Path, default=REPO / "specs")
    c.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.what == "gram":
        gram_curves(args.points)
    elif args.what == "sweep":
        sweep_curve(args.runs)
    else:
        calibrate(args.results, args.specs, args.write)


if __name__ == "__main__":
    main()
