"""Stop requests: SIGTERM (Slurm's signal before preemption and at the time limit, ``scancel``,
``kill``) and SIGINT (Ctrl-C) end a training run at its next step boundary with its state saved
(:func:`ntkpipe.train.driver.drive`), wherever the run's thread is.

Python runs signal handlers in the main thread only, and only the main thread may install them. A
run driven in the main thread (``ntkpipe.jobs.train_run`` called from Python) installs its own
(:func:`requests`). Snakemake runs a job's body in a thread of its process (in-process, and in the
job process a cluster profile starts), and its scheduler owns SIGTERM (it then waits for the running
jobs to finish) and lets SIGINT raise ``KeyboardInterrupt`` (it then waits for them too). The
Snakefile therefore calls :func:`watch` in the main thread while it is parsed: the process's signal
wake-up file descriptor (``signal.set_wakeup_fd``: Python writes to it the number of every signal that
has a handler, whichever handler that is) is read by a daemon thread that records SIGTERM and SIGINT,
and a run in another thread sees the request at its next step boundary; the scheduler's handlers run
as before, so Snakemake ends as it would once the job has stopped. :func:`unwatch` (the workflow's
``onsuccess`` and ``onerror``) stops watching.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import warnings
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""The signals that stop training."""

_received: list[int] = []
"""Stop signals the watcher read (process-wide, while :func:`watch` is on)."""
_watch: dict = {}
"""The watcher's sockets and the wake-up descriptor it replaced, while it is on."""


def _read(sock: socket.socket) -> None:
    while True:
        try:
            data = sock.recv(64)
        except OSError:  # closed by unwatch
            return
        if not data:
            return
        _received.extend(s for s in data if s in SIGNALS)


def watch() -> bool:
    """Record SIGTERM and SIGINT for runs in the other threads of this process (a second call forgets
    the signals read so far: a new workflow). Returns whether it watches: not outside the main thread
    (which alone may set it), nor where another wake-up descriptor is set (an asyncio loop's signal
    handlers), which it leaves in place, with a warning."""
    if _watch:
        _received.clear()
        return True
    if threading.current_thread() is not threading.main_thread():
        return False  # Snakemake run from another thread: signals reach neither it nor its jobs' threads
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    if previous != -1:
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        warnings.warn("another signal wake-up descriptor is set: SIGTERM and SIGINT stop training only in the "
                      "main thread", stacklevel=2)
        return False
    _received.clear()
    _watch.update(reader=reader, writer=writer)
    threading.Thread(target=_read, args=(reader,), name="ntkpipe-stop-watch", daemon=True).start()
    return True


def unwatch() -> None:
    """Stop watching (from the main thread) and forget the signals read."""
    if not _watch:
        return
    signal.set_wakeup_fd(-1)
    _watch.pop("writer").close()
    _watch.pop("reader").close()
    _received.clear()


def _name(signum: int) -> str:
    return signal.Signals(signum).name


@contextlib.contextmanager
def requests() -> Iterator[Callable[[], str | None]]:
    """A callable naming the stop signal (``'SIGTERM'``, ``'SIGINT'``) received, or None. In the main
    thread: since entering, through handlers for :data:`SIGNALS` that only record the signal (the
    previous ones are restored on exit; an ignored signal stays ignored); in another thread: since
    :func:`watch` (a stop request stands until the workflow ends), and never without it."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: _name(_received[0]) if _received else None
        return
    local: list[int] = []
    previous = {signum: signal.signal(signum, lambda s, frame: local.append(s)) for signum in SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}  # an ignored signal stays ignored
    try:
        yield lambda: _name(local[0]) if local else None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
