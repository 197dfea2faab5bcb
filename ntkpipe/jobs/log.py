"""A job's Snakemake log file: when it started, what it wrote, and how it ended."""

from __future__ import annotations

import time
import traceback
from datetime import datetime
from pathlib import Path


def logged(path: str | Path, job, *args):
    """``job(*args)`` with its start, and its duration or its traceback, in ``path`` (the rule's
    ``log:``; on a cluster the job's terminal is gone, so the log is where a failure is read). The
    last argument, the job's output path, names it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    what = f"{job.__name__} -> {args[-1]}"
    tic = time.perf_counter()
    with path.open("w") as log:
        log.write(f"{datetime.now().isoformat(timespec='seconds')} {what}: started\n")
        log.flush()
        try:
            result = job(*args)
        except BaseException:
            log.write(traceback.format_exc())
            log.write(f"{what}: failed after {time.perf_counter() - tic:.1f} s\n")
            raise
        log.write(f"{what}: done in {time.perf_counter() - tic:.1f} s\n")
    return result
