"""Studies through a real Slurm cluster: tests/cluster/slurm-up starts a single-node cluster on this
machine (root, Debian's slurm-wlm and munge) and the study's jobs run as Slurm jobs through
`profiles/slurm` (GPU requests, met by the test node's placeholder GPUs; computed on the CPU) and
`profiles/slurm-cpu`, each job its own process sharing only the filesystem. `pytest -m slurm` runs
them; the default run deselects them. Without root or apt they skip, except under CI=true, where
a cluster that does not start is a failure."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import xarray as xr

# STUDY: the multi-stage study the processes profile runs (NTK Gram -> eigendecomposition, whose
# eigenvectors give the labels; two training runs, one job array here; final test accuracy,
# aggregation, a figure and the summary table)
from tests.test_workflow_processes import STUDY

# runs through Slurm, compiled as the product compiles (tests/conftest.py turns XLA's optimizations off elsewhere)
pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("optimized_xla")]

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "tests" / "cluster"
CANNOT_RUN_HERE = 77  # slurm-up's exit status on a machine without root or apt
# Two runs that differ only in σ: one `train_pack_<id>` job with `--config pack=1`.
PACKED_STUDY = """\
data: {source: digits, n_train: 30, n_test: 20, labels: {kind: two_groups, groups: [[1, 3, 5, 7, 9], [0, 2, 4, 6, 8]]}}
model: {depth: 2, width: 16, activation: relu}
train:
  optimizer: {name: gd, lr: 0.05}
  steps: 30
  checkpoints: {per_decade: 5}
measure: [loss, kernel_norm, test_accuracy]
sweep:
  sigma: [1.2, 1.4]
figures:
  - {name: curves, kind: time_series, variables: [loss], hue: sigma}
"""
# Job states every few seconds instead of the plugin's first check after 40 s (the cluster's
# MinJobAge of 600 s is far above the 3 x this the plugin asks of squeue).
FAST_STATUS = ("--slurm-init-seconds-before-status-checks", "3")


def cluster_is_up() -> bool:
    try:
        return subprocess.run(["sinfo", "--noheader"], capture_output=True, timeout=20).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def slurm_cluster():
    """The single-node cluster of tests/cluster/slurm-up, stopped afterwards if this session started it."""
    was_up = cluster_is_up()
    up = subprocess.run(["bash", str(CLUSTER / "slurm-up")], capture_output=True, text=True, timeout=900)
    if up.returncode == CANNOT_RUN_HERE and os.environ.get("CI") != "true":
        pytest.skip(f"no Slurm cluster on this machine: {up.stderr.strip()}")
    if up.returncode != 0:
        pytest.fail(f"tests/cluster/slurm-up failed (exit {up.returncode}):\n{up.stdout}{up.stderr}")
    yield
    if not was_up:
        subprocess.run(["bash", str(CLUSTER / "slurm-down")], check=True, timeout=120)


def write_specs(directory: Path, text: str) -> Path:
    (directory / "specs").mkdir(parents=True)
    (directory / "specs" / "tiny.yaml").write_text(text)
    return directory


def snakemake(tmp: Path, results: str, *options: str, config: tuple[str, ...] = (), env: dict | None = None,
              label: str | None = None) -> tuple[subprocess.Popen, Path]:
    """Start Snakemake on ``tmp/specs`` writing ``tmp/<results>``, as a user runs it; the jobs import
    this checkout. Its output goes to ``tmp/<label or results>.out`` (a pipe left unread could fill)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    output = tmp / f"{label or results}.out"
    with open(output, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
                                    *options, "--config", f"specs={tmp / 'specs'}", f"results={tmp / results}",
                                    *config], cwd=tmp, env=environment, stdout=out, stderr=subprocess.STDOUT)
    return process, output


def finish(started: tuple[subprocess.Popen, Path], timeout: float = 900) -> tuple[int, str]:
    """Wait for a Snakemake started by `snakemake`; its exit status and output."""
    process, output = started
    process.wait(timeout=timeout)
    return process.returncode, output.read_text()


def stop_snakemake(process: subprocess.Popen) -> None:
    """End a Snakemake still running (a test failed): SIGINT makes it scancel its jobs and exit."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def through(profile: str) -> tuple[str, ...]:
    return ("--profile", str(ROOT / "profiles" / profile), *FAST_STATUS)


def submissions(output: str, rule: str) -> int:
    """Slurm submissions of ``rule``'s jobs in a Snakemake output (an array counts its tasks)."""
    rule_of, current = {}, None
    for line in output.splitlines():
        if named := re.match(r"(?:local)?rule (\w+):$", line):
            current = named.group(1)
        elif number := re.match(r"\s+jobid: (\d+)$", line):
            rule_of[number.group(1)] = current
    ids = re.findall(r"^Job (\d+) has been submitted with SLURM jobid", output, flags=re.MULTILINE)
    for array in re.findall(r"^Submitted array job with Snakemake IDs ([\d,]+)", output, flags=re.MULTILINE):
        ids += array.split(",")
    return sum(rule_of.get(i) == rule for i in ids)


def cancel_first_running(rule: str, cancelled: list[str], stop: threading.Event) -> None:
    """scancel the first Slurm job (or array task) of ``rule`` seen running (the plugin's job comment
    is `rule_<rule>_wildcards_<values>`); its id goes to ``cancelled``."""
    while not stop.is_set():
        listed = subprocess.run(["squeue", "--noheader", "--states=RUNNING", "--format=%i %k"],
                                capture_output=True, text=True).stdout.split()
        running = [job for job, comment in zip(listed[::2], listed[1::2])
                   if comment.startswith(f"rule_{rule}_wildcards_")]
        if running:
            subprocess.run(["scancel", running[0]], check=True)
            cancelled.append(running[0])
            return
        time.sleep(0.3)


def open_dataset(results: Path) -> xr.Dataset:
    return xr.open_zarr(results / "tiny" / "tiny.zarr").load()


def same_variables(a: xr.Dataset, b: xr.Dataset) -> list[str]:
    """The study variables (all but timings) on which ``a`` and ``b`` are identical; asserts they all are."""
    compared = [v for v in b.data_vars if not v.startswith("seconds")]
    assert set(compared) == {v for v in a.data_vars if not v.startswith("seconds")}
    for name in compared:
        assert a[name].drop_attrs().identical(b[name].drop_attrs()), name
    return compared


@pytest.fixture(scope="module")
def cluster_runs(slurm_cluster, tmp_path_factory):
    """Three Snakemake runs on the cluster at once (each spends most of its time waiting for its jobs):
    the study through profiles/slurm, one of its training jobs cancelled with scancel while it runs;
    packed runs through profiles/slurm-cpu; the study with jobs that fail (their JAX is asked for a
    backend that does not exist) and no retries. Meanwhile the in-process runs they are compared with
    (threads, `--cores 2`)."""
    study = write_specs(tmp_path_factory.mktemp("study"), STUDY)
    packed = write_specs(tmp_path_factory.mktemp("packed"), PACKED_STUDY)
    failing = write_specs(tmp_path_factory.mktemp("failing"), STUDY)
    cancelled: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=cancel_first_running, args=("train", cancelled, stop), daemon=True)
    watcher.start()
    started = {"study": snakemake(study, "slurm", *through("slurm")),
               "packed": snakemake(packed, "slurm", *through("slurm-cpu"), config=("pack=1",)),
               "failing": snakemake(failing, "slurm", *through("slurm-cpu"), "--retries", "0",
                                    env={"JAX_PLATFORMS": "no_such_backend"})}
    try:
        for tmp, config in [(study, ()), (packed, ("pack=1",))]:
            code, output = finish(snakemake(tmp, "threads", "--cores", "2", config=config))
            assert code == 0, output[-3000:]
        runs = {}
        for name, (process, output) in started.items():
            code, text = finish((process, output))
            runs[name] = SimpleNamespace(tmp=output.parent, code=code, output=text)
    finally:
        stop.set()
        for process, _ in started.values():
            stop_snakemake(process)
    runs["study"].cancelled = cancelled
    return runs


def test_study_through_slurm_equals_the_in_process_run(cluster_runs):
    run = cluster_runs["study"]
    assert run.code == 0, run.output[-4000:]
    cluster, in_process = open_dataset(run.tmp / "slurm"), open_dataset(run.tmp / "threads")
    compared = same_variables(cluster, in_process)
    assert {"loss", "alignment", "eigenvalue", "test_accuracy"} <= set(compared)
    assert int(in_process["diverged"].sum()) == 0 and in_process.sizes["eigen_index"] == 2
    assert (run.tmp / "slurm" / "tiny" / "figures" / "curves.png").stat().st_size > 0
    # every job went through sbatch: the kernel stage and eigendecomposition, two runs as one array
    assert "Submitted array job with Snakemake IDs" in run.output
    assert submissions(run.output, "stage") == 2 and submissions(run.output, "aggregate") == 1
    assert submissions(run.output, "plot") == 1 and "localrule train" not in run.output


def test_training_job_killed_by_scancel_is_retried(cluster_runs):
    run = cluster_runs["study"]
    assert len(run.cancelled) == 1, "no training job was seen running"
    assert f"SLURM-job '{run.cancelled[0]}' failed, SLURM status is: 'CANCELLED'" in run.output
    assert run.code == 0, run.output[-4000:]
    assert submissions(run.output, "train") == 3  # two runs, one of them again (profile: retries: 1)


def test_rerun_with_nothing_changed_submits_nothing(cluster_runs):
    run = cluster_runs["study"]
    assert run.code == 0
    code, output = finish(snakemake(run.tmp, "slurm", *through("slurm"), label="rerun"))
    assert code == 0, output[-3000:]
    assert "Nothing to be done" in output
    assert "submitted" not in output.lower()


def test_failing_job_names_its_slurm_log(cluster_runs):
    """A job that fails stops the run, and the output names the job's Slurm log, which holds the error."""
    run = cluster_runs["failing"]
    assert run.code != 0
    logs = re.findall(r"SLURM-job '[\d_]+' failed.*?(/\S+/slurm_logs/\S+\.log)", run.output, flags=re.DOTALL)
    assert logs, run.output[-3000:]
    log = Path(logs[0])
    assert log.is_relative_to(run.tmp / ".snakemake" / "slurm_logs" / "rule_stage")
    assert "Unable to initialize backend 'no_such_backend'" in log.read_text()


def test_packed_runs_through_slurm_cpu_equal_the_in_process_packed_run(cluster_runs):
    run = cluster_runs["packed"]
    assert run.code == 0, run.output[-4000:]
    assert re.search(r"^rule train_pack_[0-9a-f]+:", run.output, flags=re.MULTILINE)
    assert submissions(run.output, "train") == 0 and "SLURM jobid" in run.output
    cluster, in_process = open_dataset(run.tmp / "slurm"), open_dataset(run.tmp / "threads")
    compared = same_variables(cluster, in_process)
    assert {"loss", "kernel_norm", "test_accuracy"} <= set(compared) and in_process.sizes["sigma"] == 2


# One run long enough to be cancelled mid-training (GD in float64: bit-identical on resume).
LONG_STUDY = """\
data: {source: digits, classes: [0, 1], n_train: 60, n_test: 20}
model: {depth: 3, width: 32, activation: tanh, sigma: 1.2}
train:
  optimizer: {name: adam, lr: 0.002}
  dtype: float64
  steps: 3000
  checkpoints: {per_decade: 40}
measure: [loss, kernel_norm, alignment, test_accuracy]
"""


def kill_when_snapshot(runs: Path, killed: list[int], stop: threading.Event, sig: int) -> None:
    """Send ``sig`` to the training job's process (the job step's `snakemake --target-jobs train:…` on
    this single-node cluster) as soon as its resume snapshot exists."""
    while not stop.is_set():
        if list(runs.glob("*.resume.npz")):
            for proc in Path("/proc").iterdir():
                try:
                    command = (proc / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                ours = any(str(runs.parent).encode() in arg for arg in command)  # its --config results=…
                # the job step's snakemake, which runs the job (the batch script's has --executor slurm-jobstep;
                # srun, which started it, has it among its arguments and cancels the step on a signal)
                if (ours and Path(command[0].decode()).name.startswith("python") and b"--target-jobs" in command
                        and b"--executor" not in command and any(arg.startswith(b"train:run_id=") for arg in command)):
                    os.kill(int(proc.name), sig)
                    killed.append(int(proc.name))
                    return
        time.sleep(0.2)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_training_job_killed_mid_training_resumes_on_retry(slurm_cluster, tmp_path, sig):
    """A training job killed mid-training: the retry resumes from its last snapshot (snapshots at every
    checkpoint here: NTKPIPE_SNAPSHOT_SECONDS=0) instead of starting over, and the study's dataset
    equals the in-process run's bit for bit. The job's process gets SIGKILL (what a lost node does, and
    what follows SIGTERM after the cluster's KillWait) or SIGTERM (what scancel, preemption and the
    time limit send first): the job, which Snakemake runs in a thread of that process, stops at its
    next step with its state saved (ntkpipe.train.stop), and its log says so."""
    tmp = write_specs(tmp_path, LONG_STUDY)
    killed: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=kill_when_snapshot, args=(tmp / "slurm" / "runs", killed, stop, sig),
                               daemon=True)
    watcher.start()
    started = snakemake(tmp, "slurm", *through("slurm-cpu"), "--slurm-keep-successful-logs",
                        env={"NTKPIPE_SNAPSHOT_SECONDS": "0"})
    try:
        code, output = finish(snakemake(tmp, "threads", "--cores", "1"))
        assert code == 0, output[-3000:]
        code, output = finish(started)
    finally:
        stop.set()
        stop_snakemake(started[0])
    assert code == 0 and len(killed) == 1, output[-4000:]
    assert "Error in rule train" in output and "Trying to restart job" in output
    logs = "".join(p.read_text() for p in (tmp / ".snakemake" / "slurm_logs" / "rule_train").rglob("*.log"))
    resumed = re.search(r"resuming run ([0-9a-f]{16}) at step (\d+) of 3000", logs)
    assert resumed and 0 < int(resumed.group(2)) < 3000, logs[-3000:]
    if sig == signal.SIGTERM:
        stopped = re.search(r"SIGTERM at step (\d+) of 3000; its state is saved", logs)
        assert stopped and stopped.group(1) == resumed.group(2), logs[-3000:]
    assert not list((tmp / "slurm" / "runs").glob("*.resume.npz"))
    compared = same_variables(open_dataset(tmp / "slurm"), open_dataset(tmp / "threads"))
    assert {"loss", "kernel_norm", "alignment", "test_accuracy"} <= set(compared)
