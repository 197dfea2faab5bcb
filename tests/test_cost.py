"""The cost model behind ``ntkpipe plan --cost`` (ntkpipe.study.cost): its fit recovers known
constants, the CLI prints an estimate labelled as one, the estimate of every shipped study is within a
factor 2 of the seconds its jobs logged in the main job the constants were fitted on
(``tests/data/cost_study_seconds.json``), and the estimate of a tiny study is within a factor 2 of the
seconds its jobs log when it runs (summed job seconds, not the wall clock, less the start of a worker
process that the main job pays once), divided by how much slower than its CPU time a CPU-bound loop runs
on the machine right then (its load)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from ntkpipe.cli import main
from ntkpipe.study.cost import FEATURES, Constants, fit_constants, study_cost
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from ntkpipe.workflow import build_index
from tests.conftest import REPO

TINY = """\
data: {source: linear_teacher, dim: 4, n_train: 16, gamma: 0.0}
model: {depth: 2, width: 8, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 10
  checkpoints: {per_decade: 4}
measure: [loss, kernel_norm]
sweep:
  seed: [0, 1, 2]
  sigma: [0.1, 0.2]
figures:
  - {name: curves, kind: time_series, variables: [loss], hue: sigma}
"""


def test_the_fit_recovers_the_constants_of_exact_samples():
    rng = np.random.default_rng(0)
    truth = {f: float(c) for f, c in zip(FEATURES, rng.uniform(0.5, 2.0, len(FEATURES)) * 10.0 ** -rng.integers(0, 12, len(FEATURES)))}
    samples = []
    for _ in range(200):
        features = {f: float(rng.uniform(0, 1) / truth[f]) for f in FEATURES if rng.uniform() < 0.6}
        samples.append((features, sum(truth[f] * x for f, x in features.items())))
    fitted = fit_constants(samples)
    for f in FEATURES:
        assert fitted[f] == pytest.approx(truth[f], rel=1e-6)


def test_plan_cost_prints_an_estimate_per_study(tmp_path, capsys):
    spec = tmp_path / "tiny_cost.yaml"
    spec.write_text(TINY)
    assert main(["plan", str(spec), "--cost", "--cores", "2", "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("estimated cost of each study from scratch, variant default (an estimate, not a "
                             "measurement: a linear model of job seconds fitted on ")
    assert Constants.load().machine in out[0]
    assert re.fullmatch(r"tiny_cost: 6 runs, 8 jobs; estimate: \d+ s of job time, \d+ s wall on 2 cores, "
                        r"peak memory \d+\.\d GiB \(largest job\)", out[1]), out[1]


def test_the_estimate_of_each_shipped_study_is_within_a_factor_2_of_its_logged_seconds(tmp_path):
    fitted = json.loads((REPO / "tests" / "data" / "cost_study_seconds.json").read_text())
    assert fitted["machine"] == Constants.load().machine, "refit: scale.py calibrate RESULTS --write writes both"
    plans = build_index(REPO / "specs", tmp_path / "results").plans
    assert set(plans) == set(fitted["logged_seconds"])
    constants = Constants.load()
    ratios = {tag: study_cost(plan, constants).seconds / fitted["logged_seconds"][tag] for tag, plan in plans.items()}
    assert all(0.5 <= r <= 2.0 for r in ratios.values()), ratios


@pytest.mark.workflow
@pytest.mark.usefixtures("optimized_xla")  # the estimate is of the product, which compiles optimized
def test_the_estimate_is_within_a_factor_2_of_a_tiny_run(tmp_path):
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "tiny_cost.yaml"
    spec.write_text(TINY)
    # the regime the constants were fitted in: the main job, whose studies read back from the persistent
    # compilation cache most programs that earlier jobs compiled; so one run of the study (its runs differ
    # in seed and σ, a traced argument: one set of programs) first fills a cache of its own (a first run
    # pays ≈ 2 s more per job thread compiling cold: benchmarks/README.md), and the measured run of the
    # whole study, in its own process and results directory, reads it back
    env = {**os.environ, "NTKPIPE_JAX_CACHE": str(tmp_path / "jax-cache")}
    warm_up = plan_study(load_study(spec), Path("warm-up")).runs[0].path
    slowdowns = [slowdown()]  # the load of the shared machine, sampled around the runs (the other worker's tests)
    for results, targets in (("warm-up", [str(warm_up)]), ("results", [])):
        subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", "2", "--quiet", "--snakefile",
                        str(REPO / "Snakefile"), "--directory", str(tmp_path), "--config", f"results={results}"],
                       check=True, env=env, capture_output=True)
        slowdowns.append(slowdown())
    logs = list((tmp_path / "results" / "logs").rglob("*.log"))
    logged = {log: re.findall(r": done in ([0-9.]+) s$", log.read_text(), re.M) for log in logs}
    assert all(logged.values()) and len(logs) == 6 + 1 + 1 + 1 + 1  # runs, aggregate, figure, table, index
    # the main job starts its worker processes (aggregation, figures, indexes: ntkpipe.jobs.worker_processes)
    # once for its 20 studies; this run's jobs waited for one such start, or for less where the pool
    # started beside other jobs (a start measured apart, under the other worker's load, can exceed the
    # wait the run had: subtracting it left 1.3 s, against an estimate of 4.1 s, in one suite run)
    logged_seconds = sum(float(s[-1]) for log, s in logged.items() if "table" not in log.parts)
    estimate = study_cost(plan_study(load_study(spec), Path(tmp_path / "results")), Constants.load()).seconds
    # the seconds on an idle machine lie between the logged ones less a worker start over the load (a
    # sample of the test thread's slowdown, which the job threads of the run need not have shared) and
    # the logged ones: that interval meets [estimate / 2, 2 · estimate]
    idle = (max(logged_seconds - worker_start(), 0.0) / float(np.median(slowdowns)), logged_seconds)
    assert idle[0] <= 2.0 * estimate and idle[1] >= 0.5 * estimate, (estimate, idle, slowdowns)


def worker_start() -> float:
    """Wall seconds until a new pool's worker process has run its first job, the import of the
    aggregation job's module, as a workflow's first aggregation job waits for it (from a process that
    has imported ntkpipe.jobs.worker_processes, as Snakemake's has ntkpipe.jobs)."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import time
        import ntkpipe.jobs
        from ntkpipe.jobs.worker_processes import in_worker_process, use_worker_processes
        use_worker_processes(2)
        tic = time.perf_counter()
        in_worker_process(exec, "import ntkpipe.jobs.aggregate")
        print(time.perf_counter() - tic)
    """)], check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def slowdown() -> float:
    """Wall time over CPU time of a CPU-bound loop in this thread (1 on an idle machine)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    sum(i * i for i in range(3_000_000))
    return max(1.0, (time.perf_counter() - wall) / (time.thread_time() - cpu))
