"""At most one timed wake-up of Snakemake's job scheduler pending at a time.

Snakemake 9 with a job rate limit (``--max-jobs-per-timespan``, whose command-line default is
``100/1s``) ends every scheduling round of ``JobScheduler.schedule`` by starting a
``threading.Timer`` that wakes the scheduler for another round one timespan later. A round woken by
that timer starts the next timer, so each wake-up from elsewhere (a job's end) begins a chain of
rounds, one per timespan, that lasts until the workflow ends: after n jobs, n rounds a second, each a
pass of the job selector in Snakemake's main thread, which holds the GIL that job threads need, and
at exit the interpreter waits for the last timers. Measured (``benchmarks/README.md``): 120 jobs
started 5,300 timer threads, 11 s of the main thread's CPU against 6 s without them.

:func:`one_pending_wakeup` keeps what the timer is for (a round at most one timespan after any
round, so that jobs held back by the rate limit start once it allows them) with one timer pending
at a time (a wake-up asked for sooner than the pending one is due starts its own), each a daemon
thread that exit does not wait for.
"""

from __future__ import annotations

import threading
import time

_MARK = "_ntkpipe_one_pending_wakeup"  # on the method that replaced upstream's
_DUE = "_ntkpipe_wakeup_due"  # on a scheduler: when its pending wake-up is due, if one is


def one_pending_wakeup() -> bool:
    """Make Snakemake's ``JobScheduler`` keep at most one timed wake-up pending. Idempotent; returns
    whether it changed the scheduler (False where this Snakemake has no such method: nothing to do)."""
    from snakemake.scheduling import job_scheduler

    scheduler = getattr(job_scheduler, "JobScheduler", None)
    start_timer = getattr(scheduler, "_schedule_reevalutation", None)  # upstream's spelling
    if scheduler is None or start_timer is None or getattr(start_timer, _MARK, False):
        return False
    lock = threading.Lock()

    def schedule_wakeup(self, delay: float) -> None:
        due = time.monotonic() + delay
        with lock:
            pending = getattr(self, _DUE, None)
            if pending is not None and pending <= due:
                return
            setattr(self, _DUE, due)
        timer = threading.Timer(delay, wake, args=(self, due))
        timer.daemon = True
        timer.start()

    def wake(self, due: float) -> None:
        with lock:
            if getattr(self, _DUE, None) == due:
                setattr(self, _DUE, None)  # before the round it starts, which may schedule the next
        self._open_jobs.release()

    setattr(schedule_wakeup, _MARK, True)
    scheduler._schedule_reevalutation = schedule_wakeup
    return True
