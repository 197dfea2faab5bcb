"""JAX's persistent compilation cache written after the job threads that compiled, not beside them.

JAX writes a cache entry right after compiling a program, by serializing the executable
(``executable.serialize()``). On CPU, jaxlib 0.10.2 can crash the whole process there (SIGSEGV)
while another thread of the process compiles or runs a program: twice in three runs of the generated
studies' long profile, where the jobs are threads of Snakemake's process and a crash kills every job
at once. Where jobs run as threads, :func:`defer_writes` therefore queues the entries as they are
compiled, and :func:`flush` writes them once no job thread is left: the Snakefile calls it when the
workflow ends (``onsuccess``, ``onerror``), and it runs at interpreter exit. Reading the cache is
unchanged. The threads of one process share JAX's in-memory caches, so a queued program is not
compiled twice there; the cache is for later runs and job processes (a job process writes as JAX
does). An entry not yet written when the process is killed is compiled again by the next run, and
so is a program that has no entry because it cannot be serialized once it has run: XLA:CPU resolves
a sort's comparator at the first run (``LessThan`` is then "not serializable"), which leaves out the
programs that sort, such as the minibatch orders of :mod:`ntkpipe.train.batches` (the training steps
themselves hold no sort, and are cached).
"""

from __future__ import annotations

import atexit
import sys
import threading
import warnings

_PENDING: list[tuple[tuple, dict]] = []
_LOCK = threading.Lock()


def defer_writes() -> None:
    """Queue this process's cache writes until :func:`flush`. Where this JAX has no
    ``jax._src.compiler._cache_write`` (an internal function), its entries are written as compiled."""
    from jax._src import compiler

    write = getattr(compiler, "_cache_write", None)
    if write is None or hasattr(write, "deferred_write"):
        return

    def queue(*args, **kwargs) -> None:
        with _LOCK:
            _PENDING.append((args, kwargs))

    queue.deferred_write = write  # type: ignore[attr-defined]
    compiler._cache_write = queue
    atexit.register(flush)


def pending() -> int:
    """How many entries wait for :func:`flush`."""
    with _LOCK:
        return len(_PENDING)


def flush() -> int:
    """Write the queued entries (as JAX would have when each was compiled); returns how many were
    written. An entry that cannot be serialized any more (module docstring) is left out without a
    warning. Call it when no other thread of the process runs JAX. Does nothing where writes were not
    deferred."""
    if "jax" not in sys.modules:
        return 0
    from jax._src import compiler

    write = getattr(compiler._cache_write, "deferred_write", None)
    if write is None:
        return 0
    with _LOCK:
        entries = _PENDING[:]
        _PENDING.clear()
    written = 0
    for args, kwargs in entries:
        with warnings.catch_warnings(record=True) as warned:  # JAX warns where it cannot write an entry
            warnings.simplefilter("always")
            try:
                write(*args, **kwargs)
            except Exception:  # with jax_raise_persistent_cache_errors on: the same failure, raised
                continue
        written += not warned
    return written
