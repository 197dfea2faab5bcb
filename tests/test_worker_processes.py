"""Jobs that hold the GIL run in worker processes where the workflow's jobs are threads of one process
(:mod:`ntkpipe.jobs.worker_processes`): results and errors come back to the job's thread, a worker
that dies fails only its job, and workers end with the process that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from ntkpipe.errors import SpecError
from ntkpipe.jobs.worker_processes import WorkerJobError, in_worker_process, use_worker_processes, worker_job


@pytest.fixture
def two_workers():
    use_worker_processes(2)
    yield
    use_worker_processes(0)


def test_without_worker_processes_a_job_runs_in_the_calling_process():
    use_worker_processes(1)  # one job at a time: nothing to gain from a worker
    assert in_worker_process(os.getpid) == os.getpid()


def test_a_job_runs_in_a_worker_and_returns_its_result(two_workers):
    worker = in_worker_process(os.getpid)
    assert worker != os.getpid()
    assert in_worker_process(divmod, 17, 5) == (3, 2)
    assert in_worker_process(os.getenv, "OPENBLAS_NUM_THREADS") == os.getenv("OPENBLAS_NUM_THREADS")


def test_a_failing_job_raises_its_error_in_the_calling_thread(two_workers):
    with pytest.raises(ValueError, match="invalid literal for int"):
        in_worker_process(int, "not a number")
    assert in_worker_process(int, "12") == 12  # the worker is still there


class TwoArgumentError(Exception):
    """An exception whose arguments are not those of its ``__init__``: it does not unpickle."""

    def __init__(self, what: str, why: str):
        super().__init__(f"{what}: {why}")


def raise_two_argument_error():
    raise TwoArgumentError("figure", "no data")


def raise_spec_error():
    raise SpecError("study.yaml", ["model.width: must be positive; set it to 1 or more"])


def test_errors_that_do_not_unpickle_come_back_as_text_and_ntkpipe_errors_as_themselves(two_workers):
    with pytest.raises(WorkerJobError, match=r"(?s)raise_two_argument_error.*TwoArgumentError: figure: no data"):
        in_worker_process(raise_two_argument_error)
    with pytest.raises(SpecError) as caught:
        in_worker_process(raise_spec_error)
    assert caught.value.path == "study.yaml" and caught.value.problems == ["model.width: must be positive; set it to 1 or more"]
    assert in_worker_process(os.getpid) != os.getpid()  # the pool survived both


@worker_job
def worker_pid(offset: int) -> int:
    return os.getpid() + offset


def test_a_worker_job_runs_in_a_worker_where_there_are_some_and_here_otherwise(two_workers):
    assert worker_pid(0) != os.getpid()
    use_worker_processes(0)
    assert worker_pid(1) == os.getpid() + 1


def kill_this_process() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_fails_its_job_and_the_next_job_gets_a_new_one(two_workers):
    workers = {in_worker_process(os.getpid) for _ in range(4)}
    with pytest.raises(WorkerJobError, match="ended abruptly .* run the workflow again") as caught:
        in_worker_process(kill_this_process)  # the worker is killed mid-job
    assert isinstance(caught.value.__cause__, BrokenProcessPool)
    assert in_worker_process(divmod, 7, 2) == (3, 1)
    assert in_worker_process(os.getpid) not in workers | {os.getpid()}


def test_a_worker_killed_between_jobs_is_replaced(two_workers):
    worker = in_worker_process(os.getpid)
    os.kill(worker, signal.SIGKILL)
    while _alive(worker):
        time.sleep(0.05)
    time.sleep(0.5)  # the pool has seen it: broken
    assert in_worker_process(divmod, 9, 4) == (2, 1)


ORPHAN = """
import os, sys
from ntkpipe.errors import SpecError
from ntkpipe.jobs.worker_processes import WorkerJobError, in_worker_process, use_worker_processes, worker_job
use_worker_processes(2)
print(in_worker_process(os.getpid), flush=True)
os.kill(os.getpid(), 9)  # killed: no exit handler shuts the pool down
"""


def test_workers_end_when_the_process_that_started_them_is_killed():
    out = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=120)
    worker = int(out.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
