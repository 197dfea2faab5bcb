"""A job's start: its process's JAX settings, and its Snakemake log file (when it started, what it
wrote, and how it ended)."""

from __future__ import annotations

import os
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path

import jax

from ntkpipe.compilation_cache import defer_writes
from ntkpipe.errors import NtkpipeError


def start_job() -> None:
    """The settings a job's process runs under, made before its first JAX computation.

    JAX's 64-bit types on for the process: kernels, eigendecompositions, kernel regression and
    theory run in float64 (the library requests it per call too, :func:`ntkpipe.ntk.precision.with_x64`);
    training keeps float32 by passing explicit dtypes. GPUs: no preallocation of 75 % of device memory
    (jobs that share a GPU, or a GPU shared with other users, would not fit), and one device per job
    (a cluster's scheduler sets CUDA_VISIBLE_DEVICES; without one, the first device). A job in a
    thread other than the main one shares its process with other jobs' threads: the compilation cache
    entries it makes are written when the workflow ends (:mod:`ntkpipe.compilation_cache`).
    """
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    jax.config.update("jax_enable_x64", True)
    if threading.current_thread() is not threading.main_thread():
        defer_writes()


def logged(path: str | Path, job, *args):
    """``job(*args)`` with its start, and its duration or why it failed, in ``path`` (the rule's
    ``log:``; on a cluster the job's terminal is gone, so the log is where a failure is read): the
    message of an error raised on purpose (:class:`~ntkpipe.errors.NtkpipeError`: a preemption, a
    missing data file, a damaged store), the traceback of any other. The
    last argument, the job's output path, names it. The job runs under :func:`start_job`."""
    start_job()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    what = f"{job.__name__} -> {args[-1]}"
    tic = time.perf_counter()
    with path.open("w") as log:
        log.write(f"{datetime.now().isoformat(timespec='seconds')} {what}: started\n")
        log.flush()
        try:
            result = job(*args)
        except BaseException as error:
            on_purpose = isinstance(error, NtkpipeError)  # its message names the cause and the fix
            log.write(f"{type(error).__name__}: {error}\n" if on_purpose else traceback.format_exc())
            log.write(f"{what}: failed after {time.perf_counter() - tic:.1f} s\n")
            raise
        log.write(f"{what}: done in {time.perf_counter() - tic:.1f} s\n")
    return result
