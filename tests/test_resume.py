"""Preemption-safe training: a training job killed mid-training (SIGTERM, as Slurm sends before
preemption and at the time limit, or SIGKILL) resumes from its last snapshot on the next attempt,
and the store it writes is bit-identical to an uninterrupted run's (full-batch GD in float64 and
float32, SGD with momentum: same data order and optimizer state; a packed run; a kernel model)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from ntkpipe.jobs.pack_training import train_pack
from ntkpipe.jobs.training import resume_file, train_run
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from ntkpipe.study.packs import plan_packs
from ntkpipe.study.plan import plan_study
from ntkpipe.train import driver, snapshot
from tests.conftest import REPO

train_run_module = importlib.import_module("ntkpipe.jobs.training")  # the module (the package exports the job function)
# the runs here train for seconds (LONG: 80000 steps), and the jobs Snakemake starts compile as the product does
pytestmark = pytest.mark.usefixtures("optimized_xla")

GD = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: tanh, sigma: 0.8}
train:
  optimizer: {name: gd, lr: 0.05}
  dtype: DTYPE
  max_time: 5
  checkpoints: {per_decade: 8}
measure: [loss, alignment, first_layer_alignment, t_half]
"""

SGD = """\
data: {source: digits, classes: [0, 1], n_train: 40, n_test: 20}
model: {depth: 2, width: 16, activation: relu, sigma: 1.4, bias: true}
train:
  optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
  loss: bce
  batch_size: 16
  epochs: 6
  checkpoints: {spacing: linear, count: 9}
measure: [loss, test_accuracy, kernel_norm]
"""

ADAM_PACK = """\
data: {source: digits, classes: [0, 1], n_train: 30, n_test: 20}
model: {depth: 2, width: 16, activation: relu, sigma: 1.4, bias: true}
train:
  optimizer: {name: adam, lr: 0.01}
  steps: 60
  checkpoints: {spacing: linear, count: 8}
measure: [loss, test_loss, kernel_norm, alignment]
sweep:
  sigma: [1.2, 1.4, 1.6]
"""

KGD = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {kind: kgd, depth: 2, width: 16, activation: relu, sigma: 1.0}
train:
  optimizer: {name: gd, lr: 0.5}
  max_time: 40
  checkpoints: {per_decade: 6}
measure: [loss, alignment]
"""

STUDIES = {"gd-float64": GD.replace("DTYPE", "float64"), "gd-float32": GD.replace("DTYPE", "float32"),
           "sgd-momentum": SGD, "kgd": KGD}


def plan(directory: Path, text: str):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "study.yaml").write_text(text)
    return plan_study(load_study(directory / "study.yaml"), directory / "results")


def assert_same_stores(a: Path, b: Path) -> None:
    """Every variable and coordinate bitwise equal (NaN = NaN), but wall-clock timings."""
    x, y = read_store(a).load(), read_store(b).load()
    assert set(x.variables) == set(y.variables) and x.attrs["config"] == y.attrs["config"]
    for name in x.variables:
        if not name.startswith("seconds"):
            assert bitwise_equal(x[name].values, y[name].values), name


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape and values, NaN equal to NaN."""
    return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


class Killed(Exception):
    """What a SIGKILL does to the process, in-process: the job ends between two checkpoints."""


def interrupting(monkeypatch, at: int, how: str) -> None:
    """Make the training job's checkpoint measurement, after measuring checkpoint ``at``, send this
    process SIGTERM (``how='term'``: the driver saves and stops at this checkpoint) or raise
    :class:`Killed` (``'kill'``: the job dies with the snapshot of the previous checkpoint)."""
    original = train_run_module.checkpoint_measure

    def checkpoint_measure(run):
        measure = original(run)

        def measured(view):
            out = measure(view)
            if view.index == at:
                if how == "term":
                    os.kill(os.getpid(), signal.SIGTERM)
                else:
                    raise Killed
            return out

        return measured

    monkeypatch.setattr(train_run_module, "checkpoint_measure", checkpoint_measure)


@pytest.mark.parametrize("how", ["term", "kill"])
@pytest.mark.parametrize("name", list(STUDIES))
def test_killed_run_resumes_to_the_uninterrupted_store(tmp_path, monkeypatch, capfd, name, how):
    job = plan(tmp_path, STUDIES[name]).runs[0]
    reference = train_run(job, tmp_path / "reference" / job.path.name)
    monkeypatch.setattr(driver, "SNAPSHOT_SECONDS", 0.0)  # a snapshot at every checkpoint
    with monkeypatch.context() as patch:
        interrupting(patch, 4, how)
        expected, match = (driver.Preempted, "SIGTERM at step .* next attempt resumes") if how == "term" else (Killed, None)
        with pytest.raises(expected, match=match):
            train_run(job, job.path)
    resume = resume_file(job.path)
    assert resume.is_file() and not job.path.exists()
    meta = snapshot.read(resume).meta
    assert meta["ids"] == [job.id] and meta["index"] == (5 if how == "term" else 4)
    capfd.readouterr()
    train_run(job, job.path)
    steps = read_store(job.path)["step"].values
    assert f"resuming run {job.id} at step {steps[meta['index'] - 1]} of {steps[-1]}" in capfd.readouterr().err
    assert not resume.exists()
    assert_same_stores(reference, job.path)
    assert read_store(job.path).attrs["steps_trained"] == steps[-1]  # over both attempts, each step once


def test_a_foreign_or_torn_snapshot_is_removed_and_training_starts_over(tmp_path, capfd):
    job, other = plan(tmp_path / "a", STUDIES["gd-float64"]).runs[0], plan(tmp_path / "b", SGD).runs[0]
    reference = train_run(job, tmp_path / "reference" / job.path.name)
    resume = resume_file(job.path)
    for content in (b"PK\x03\x04 torn", None):
        if content is None:  # another run's snapshot at this path
            train_run(other, other.path)
            content = (other.path / "final_state.npz").read_bytes()
            assert snapshot.read(content).meta["ids"] == [other.id]
        resume.parent.mkdir(parents=True, exist_ok=True)
        resume.write_bytes(content)
        with pytest.warns(UserWarning, match="not a snapshot of this run"):
            train_run(job, job.path)
        assert "resuming" not in capfd.readouterr().err and not resume.exists()
        assert_same_stores(reference, job.path)
        job.path.rename(tmp_path / f"done-{len(content)}")


def test_killed_pack_resumes_to_the_uninterrupted_stores(tmp_path, monkeypatch):
    runs = plan(tmp_path, ADAM_PACK).runs
    (pack,) = plan_packs(runs).values()
    train_pack(pack.runs, [tmp_path / "reference" / job.path.name for job in pack.runs])
    monkeypatch.setattr(driver, "SNAPSHOT_SECONDS", 0.0)
    with monkeypatch.context() as patch:
        interrupting(patch, 3, "term")
        with pytest.raises(driver.Preempted):
            train_pack(pack.runs, [job.path for job in pack.runs])
    resume = resume_file(pack.runs[0].path, ".pack-resume.npz")
    assert snapshot.read(resume).meta["ids"] == [job.id for job in pack.runs]
    train_pack(pack.runs, [job.path for job in pack.runs])
    assert not resume.exists()
    for job in pack.runs:
        assert_same_stores(tmp_path / "reference" / job.path.name, job.path)


@pytest.mark.parametrize("name", ["gd-float32", "sgd-momentum", "pack"])
def test_advancing_in_pieces_of_one_step_changes_no_number(tmp_path, monkeypatch, name):
    """The driver advances long segments in pieces (so that a stop request ends a run within about
    ``PIECE_SECONDS``): with a piece of one step everywhere, the stores are bit-identical."""
    def stores(directory: Path, pieces: float) -> list[Path]:
        monkeypatch.setattr(driver, "PIECE_SECONDS", pieces)
        runs = plan(directory, ADAM_PACK if name == "pack" else STUDIES[name]).runs
        if name == "pack":
            (pack,) = plan_packs(runs).values()
            return train_pack(pack.runs, [job.path for job in pack.runs])
        return [train_run(runs[0], runs[0].path)]

    for a, b in zip(stores(tmp_path / "whole", 1e9), stores(tmp_path / "steps", 0.0), strict=True):
        assert_same_stores(a, b)


JOB = """\
import importlib, sys, time
from pathlib import Path
from ntkpipe.train import driver
from ntkpipe.jobs.log import start_job
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study

train_run_module = importlib.import_module("ntkpipe.jobs.training")
start_job()
driver.SNAPSHOT_SECONDS = 0.0
delay = float(sys.argv[2])
original = train_run_module.checkpoint_measure

def slow(run):  # a slower machine: time to kill the job mid-training
    measure = original(run)
    return lambda view: (time.sleep(delay), measure(view))[1]

train_run_module.checkpoint_measure = slow
directory = Path(sys.argv[1])
job = plan_study(load_study(directory / "study.yaml"), directory / "results").runs[0]
train_run_module.train_run(job, job.path)
"""


def start_job(directory: Path, delay: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(JOB), str(directory), str(delay)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("name", "sig"), [("gd-float64", signal.SIGTERM), ("sgd-momentum", signal.SIGKILL)])
def test_job_process_killed_mid_training_resumes(tmp_path, monkeypatch, capfd, name, sig):
    """The training job as its own process, killed by a real signal once a snapshot exists, then rerun
    (here: what the job process saved is what a rerun reads)."""
    job = plan(tmp_path, STUDIES[name]).runs[0]
    reference = train_run(job, tmp_path / "reference" / job.path.name)
    resume = resume_file(job.path)
    process = start_job(tmp_path, 0.3)
    deadline = time.monotonic() + 300
    while not resume.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(sig)
    _, err = process.communicate(timeout=300)
    assert process.returncode != 0 and resume.exists() and not job.path.exists(), err[-2000:]
    if sig == signal.SIGTERM:
        assert "SIGTERM at step" in err and "the next attempt resumes from it" in err
    monkeypatch.setattr(driver, "SNAPSHOT_SECONDS", 0.0)  # as in the job process
    capfd.readouterr()
    train_run(job, job.path)
    assert f"resuming run {job.id} at step" in capfd.readouterr().err and not resume.exists()
    assert_same_stores(reference, job.path)


LONG_STEPS = 80000
"""The steps of :data:`LONG`: about 9 s of training on a 2-core machine (9000 steps/s). A signal 2 CPU
seconds after its job starts stops it at the end of its first or second piece (the driver's pieces last
about ``PIECE_SECONDS`` however fast the machine): at steps 11000–30000 in six runs there (one under
another process's load), so a machine up to 2.5× as fast still stops it between the checkpoints."""

# One run that trains for seconds between its two checkpoints, 0 and LONG_STEPS (GD in float64: bit-identical on resume).
LONG = """\
data: {source: linear_teacher, dim: 16, n_train: 64, gamma: 0.0}
model: {depth: 3, width: 64, activation: tanh, sigma: 0.8}
train:
  optimizer: {name: gd, lr: 0.01}
  dtype: float64
  steps: STEPS
  checkpoints: {spacing: linear, count: 1}
measure: [loss, alignment]
""".replace("STEPS", str(LONG_STEPS))


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory):
    """The run of :data:`LONG` trained without interruption, in this process: its job and store."""
    directory = tmp_path_factory.mktemp("long")
    job = plan(directory, LONG).runs[0]
    return job, train_run(job, directory / "reference" / job.path.name)


def snakemake_run(directory: Path) -> subprocess.Popen:
    """``snakemake`` as a user starts it: jobs in threads of its process (the workflow profile
    ``profiles/default``), its output (job progress lines among it) on a pipe."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
               str(REPO / "profiles" / "default"), "--cores", "1", "--config", f"specs={directory / 'specs'}",
               f"results={directory / 'results'}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "NTKPIPE_SNAPSHOT_SECONDS": "3600"}  # no periodic snapshot: what is saved is the signal's
    # SIGINT not ignored, as in a terminal: a suite started in the background of a non-interactive shell
    # inherits SIGINT ignored, which a child keeps (and ntkpipe.train.stop leaves an ignored signal ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(command, cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
    finally:
        signal.signal(signal.SIGINT, previous)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (Linux ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def signal_after(directory: Path, log: Path, sig: int, wait: float) -> tuple[subprocess.Popen, str, float]:
    """Start :func:`snakemake_run` in ``directory``, send it ``sig`` once its training job (``log``)
    has run for ``wait`` CPU seconds of the process, and wait for it to end: (process, its output,
    seconds from the signal to its end). The job compiles its step (about 1 s of CPU) and trains; CPU
    seconds, which a machine loaded by other tests does not stretch as it does wall time."""
    process = snakemake_run(directory)
    deadline = time.monotonic() + 300
    while not log.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    started = cpu_seconds(process.pid)
    while cpu_seconds(process.pid) - started < wait and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(sig)
    signalled = time.monotonic()
    text, _ = process.communicate(timeout=120)
    return process, text, time.monotonic() - signalled


@pytest.mark.workflow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_snakemake_stops_training_in_its_job_thread_and_the_rerun_resumes(tmp_path, long_reference, sig):
    """SIGTERM (or SIGINT) to a real ``snakemake`` whose training job runs in one of its threads, a few
    seconds into training: the job stops at its next step boundary, between two checkpoints, with
    its state saved (no periodic snapshot here), and Snakemake exits before training could have ended.
    The rerun resumes from that state, and the store equals the uninterrupted run's bit for bit. A
    signal that lands before the first step (the job still compiling) is tried again, later."""
    job, reference = long_reference
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "long.yaml").write_text(LONG)
    store = tmp_path / "results" / "runs" / job.path.name
    resume = resume_file(store)
    log = tmp_path / "results" / "logs" / "train" / f"{job.id}.log"
    for wait in (2, 4, 6):  # CPU seconds of the Snakemake process after the job's log appears (6: ≈ 5 s trained)
        process, text, stopped = signal_after(tmp_path, log, sig, wait)
        if not log.exists() or "it had taken no step" not in log.read_text():
            break
        shutil.rmtree(tmp_path / "results")  # signalled while the job still compiled: again, later
    assert process.returncode != 0 and not store.exists() and resume.is_file(), text[-3000:]
    name = signal.Signals(sig).name
    said = re.search(rf"{name} at step (\d+) of {LONG_STEPS}; its state is saved", log.read_text())
    meta = snapshot.read(resume).meta
    assert said and meta["done"] == int(said.group(1)) and meta["index"] == 1, text[-3000:]
    assert "Traceback" not in log.read_text()  # a preemption is logged as its message
    assert 0 < meta["done"] < LONG_STEPS and stopped < 30, (meta["done"], stopped)  # between checkpoints 0 and LONG_STEPS
    rerun = snakemake_run(tmp_path)
    text, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, text[-3000:]
    assert f"resuming run {job.id} at step {meta['done']} of {LONG_STEPS}" in text and not resume.exists()
    assert_same_stores(reference, store)
    assert read_store(store).attrs["steps_trained"] == LONG_STEPS
