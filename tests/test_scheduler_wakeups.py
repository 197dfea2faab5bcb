"""Snakemake's job scheduler under a job rate limit (the command line's default, 100/1s) keeps one
timed wake-up pending instead of one per scheduling round (:mod:`ntkpipe.scheduler_wakeups`), and a
rate limit still holds jobs back and lets them all run."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ntkpipe.scheduler_wakeups import one_pending_wakeup

pytestmark = pytest.mark.workflow

SNAKEFILE = """\
import threading
import time
from pathlib import Path

from ntkpipe.scheduler_wakeups import one_pending_wakeup

if config["patch"]:
    one_pending_wakeup()


rule all:
    input:
        expand("out/{i}.txt", i=range(config["jobs"])),


rule one:
    output:
        "out/{i}.txt",
    run:
        time.sleep(0.02)
        Path(output[0]).write_text(str(time.monotonic()))


onsuccess:
    Path("timers.txt").write_text(str(sum(isinstance(t, threading.Timer) for t in threading.enumerate())))
"""


def run(tmp_path: Path, patch: bool, jobs: int, *options: str) -> tuple[int, list[float]]:
    """The tiny workflow through ``snakemake`` (the command line: its rate limit on), its jobs in
    threads as ``profiles/default`` runs them; the timers pending when it ended, and when each job
    wrote its output."""
    directory = tmp_path / ("patched" if patch else "upstream")
    directory.mkdir()
    (directory / "Snakefile").write_text(SNAKEFILE)
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--quiet", "--force-use-threads", *options, "--config",
                    f"patch={int(patch)}", f"jobs={jobs}"], cwd=directory, check=True, capture_output=True)
    ends = sorted(float(p.read_text()) for p in (directory / "out").iterdir())
    return int((directory / "timers.txt").read_text()), ends


def test_one_wakeup_is_pending_where_upstream_keeps_one_per_round(tmp_path):
    upstream, _ = run(tmp_path, False, 40)
    patched, ends = run(tmp_path, True, 40)
    assert upstream >= 10, "upstream no longer chains its timers: ntkpipe.scheduler_wakeups may go"
    assert patched <= 1 and len(ends) == 40


def test_a_rate_limit_still_spaces_the_jobs_and_runs_them_all(tmp_path):
    _, ends = run(tmp_path, True, 6, "--max-jobs-per-timespan", "2/1s")
    assert len(ends) == 6 and ends[-1] - ends[0] >= 1.5  # 3 batches of 2, a second apart


def test_a_wakeup_asked_for_sooner_than_the_pending_one_starts_its_own():
    """The replacement method on a stand-in scheduler: one release per pending wake-up, and a sooner
    request not held back by a later one (Snakemake asks for 10 s while it waits for queue input)."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    one_pending_wakeup()
    assert one_pending_wakeup() is False  # once per process

    class Scheduler:
        _open_jobs = threading.Semaphore(0)

    scheduler = Scheduler()
    wakeup = JobScheduler._schedule_reevalutation
    wakeup(scheduler, 0.05)
    wakeup(scheduler, 0.05)
    assert scheduler._open_jobs.acquire(timeout=5) and not scheduler._open_jobs.acquire(timeout=0.3)
    wakeup(scheduler, 30.0)
    wakeup(scheduler, 0.05)
    assert scheduler._open_jobs.acquire(timeout=5)
