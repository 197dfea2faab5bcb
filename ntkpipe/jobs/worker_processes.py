"""Worker processes for the jobs that hold the GIL from start to end and compile no JAX program
(figures, aggregation, claims, tables: :func:`worker_job`), where the jobs of a Snakemake process
are its threads (``profiles/default``).

A thread that draws a figure holds the GIL for its whole length (matplotlib's layout, text and
tick code is Python), and matplotlib is not thread-safe, so the plot jobs of one process drew one
figure at a time and stalled the Python of every other job thread: the main job's last minute,
figures beside aggregation, ran on 1.1 of its 2 cores (``benchmarks/README.md``). With
:func:`use_worker_processes` set to the process's job slots, :func:`in_worker_process` runs a job
in one of that many spawned processes (started on first use, kept for later jobs; a spawned
process, not a fork of one whose JAX runtime holds threads). The calling thread waits without
the GIL; the job's exceptions, its worker's traceback attached, are raised in it.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

PARENT_POLL_SECONDS = 1.0
"""How often a worker checks that the process that started it is alive."""

_lock = threading.Lock()
_slots = 0  # workers jobs may use now
_pool: ProcessPoolExecutor | None = None
_pool_slots = 0  # workers of _pool


def use_worker_processes(slots: int) -> None:
    """Run :func:`in_worker_process` jobs in up to ``slots`` worker processes (0 or 1: in the calling
    thread, where one job runs at a time or each job is a process of its own; a workflow sets 0 when
    it ends). Workers are kept while they are not used, for a later workflow of this process; a pool
    of another size is shut down once its jobs end."""
    global _slots, _pool
    slots = slots if slots > 1 else 0
    with _lock:
        _slots = slots
        old = _pool if _pool is not None and slots not in (0, _pool_slots) else None
        if old is not None:
            _pool = None
    if old is not None:
        old.shutdown(wait=True)


def in_worker_process(job: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``job(*args, **kwargs)`` in a worker process where :func:`use_worker_processes` set some, else
    here. ``job`` and its arguments are pickled (a module-level function and plain records). A worker
    that dies (killed, out of memory) fails the jobs of its pool; the next job starts a new pool."""
    for _ in range(2):  # a worker that died between jobs broke the pool: once more with a new one
        pool = _worker_pool()
        if pool is None:
            return job(*args, **kwargs)
        try:
            future = pool.submit(_as_the_caller, job, args, kwargs, os.getcwd(), dict(os.environ))
            break
        except BrokenProcessPool:
            _discard(pool)
    else:
        raise WorkerJobError("no worker process could be started for this job")
    try:
        return future.result()
    except BrokenProcessPool as error:
        _discard(pool)
        raise WorkerJobError("the worker process running this job ended abruptly (killed, or out of "
                             "memory): run the workflow again to make its output") from error


class WorkerJobError(RuntimeError):
    """A job's exception that cannot be sent back from its worker as itself (it does not unpickle):
    its type, message and traceback, as text."""


def _as_the_caller(job: Callable[..., T], args: tuple, kwargs: dict, cwd: str, environ: dict[str, str]) -> T:
    """``job(*args, **kwargs)`` in the caller's working directory and environment (Snakemake's
    ``--directory``, a job's relative paths; they may have changed since the worker started), its
    exception sent back: one that does not survive pickling would break the pool, so it becomes a
    :class:`WorkerJobError` with its traceback."""
    os.chdir(cwd)
    if environ != os.environ:
        os.environ.clear()
        os.environ.update(environ)
    try:
        return job(*args, **kwargs)
    except Exception as error:
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            raise WorkerJobError(traceback.format_exc()) from None
        raise


def worker_job(job: Callable[P, T]) -> Callable[P, T]:
    """``job`` run by :func:`in_worker_process`: a rule body that holds the GIL from start to end. The
    worker unpickles this wrapper by name and, having no workers of its own, runs ``job`` there."""

    @functools.wraps(job)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        if _worker_pool() is None:
            return job(*args, **kwargs)
        return in_worker_process(run, *args, **kwargs)

    return run


def _worker_pool() -> ProcessPoolExecutor | None:
    global _pool, _pool_slots
    with _lock:
        if not _slots:
            return None
        if _pool is None:
            _pool_slots = _slots
            _pool = ProcessPoolExecutor(_slots, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_start_worker, initargs=(os.getpid(),))
        return _pool


def _discard(pool: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False)


def _start_worker(parent: int) -> None:
    """A worker runs under a job's settings (:func:`ntkpipe.jobs.log.start_job`), leaves Ctrl-C to its
    parent (Snakemake decides what an interrupt stops) and ends when the parent is gone, killed
    included (it would otherwise wait for jobs forever)."""
    from ntkpipe.jobs.log import start_job

    start_job()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True, name="exit-with-parent").start()


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)
