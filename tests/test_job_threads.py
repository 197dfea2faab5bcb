"""Jobs that run as threads of one Snakemake process (``profiles/default``): what they share must be
shared safely -- matplotlib one figure at a time, BLAS one thread per job."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from ntkpipe.jobs.plot import MATPLOTLIB_LOCK, plot_figure
from ntkpipe.jobs.worker_processes import use_worker_processes
from ntkpipe.workflow import BLAS_THREADS_ENV, limit_blas_threads


def test_figures_of_concurrent_plot_jobs_are_drawn_one_at_a_time(tmp_path):
    """Two figures drawn at once failed the main job with a spurious mathtext ParseException: a plot
    job waits while another holds matplotlib (drawn in this process: no worker processes)."""
    use_worker_processes(0)
    failures = []

    def job():
        try:
            plot_figure(None, "f", tmp_path / "f.png")  # type: ignore[arg-type]  # fails once it may draw
        except AttributeError as err:
            failures.append(err)

    with MATPLOTLIB_LOCK:
        thread = threading.Thread(target=job)
        thread.start()
        thread.join(timeout=0.5)
        assert thread.is_alive() and not failures  # waiting for the lock, not drawing
    thread.join(timeout=10)
    assert not thread.is_alive() and len(failures) == 1


def test_blas_threads_are_limited_per_job(monkeypatch):
    """One thread per job in the threads of one process; a job process the CPUs of its affinity mask;
    every loaded OpenBLAS obeys, and the numbers of a product are those of the unlimited library."""
    monkeypatch.delenv(BLAS_THREADS_ENV, raising=False)
    a = np.random.default_rng(0).standard_normal((300, 300))
    with threadpool_limits(user_api="blas"):  # restores the limits on exit
        expected = a @ a
        assert limit_blas_threads(1) == 1
        assert os.environ[BLAS_THREADS_ENV] == "1"
        blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
        assert blas and all(info["num_threads"] == 1 for info in blas)
        np.testing.assert_allclose(a @ a, expected, rtol=1e-13)
        cpus = len(os.sched_getaffinity(0))
        assert limit_blas_threads() == cpus and os.environ[BLAS_THREADS_ENV] == str(cpus)


DEFERRED_CACHE_WRITES = """
import pathlib, sys, threading
import jax, jax.numpy as jnp
from ntkpipe.compilation_cache import flush, pending
from ntkpipe.jobs.log import start_job

jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
hits = []
jax.monitoring.register_event_listener(lambda event, **_: hits.append(event == "/jax/compilation_cache/cache_hits"))

def job():  # a job thread, as Snakemake's local executor runs a rule body
    start_job()
    print(float(jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((7, 5))).sum()))
    descending = jax.jit(lambda x: jnp.sort(-x))  # a sort: once it has run, XLA:CPU cannot serialize it
    print(descending(jnp.arange(5.0)).tolist())

thread = threading.Thread(target=job)
thread.start()
thread.join()
print(pending(), len(list(pathlib.Path(sys.argv[1]).iterdir())), flush(), pending(), any(hits))
"""


def test_a_job_thread_writes_its_compilation_cache_entries_when_the_workflow_ends(tmp_path):
    """jaxlib 0.10.2 can crash the process serializing a cache entry while another thread compiles or
    runs: job threads queue their entries and ``flush`` (the Snakefile's onsuccess and onerror)
    writes them. A second process reads the program back from the written entry; a sort, which XLA:CPU
    cannot serialize once it has run, is left out without a warning."""
    script = tmp_path / "job.py"
    script.write_text(DEFERRED_CACHE_WRITES)
    cache = tmp_path / "cache"
    cache.mkdir()
    command = [sys.executable, "-W", "error", script, cache]  # a warning fails the script
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    value, ordered, counts = first.stdout.split("\n")[:3]
    assert ordered == "[-4.0, -3.0, -2.0, -1.0, -0.0]"
    queued, files_before_flush, written, left, hit = counts.split()
    assert files_before_flush == "0" and left == "0" and hit == "False"
    assert 1 <= int(written) < int(queued)  # the product's entry, not the sort's
    assert len(list(cache.iterdir())) >= int(written)
    second = subprocess.run(command, capture_output=True, text=True, check=True)
    assert second.stdout.split("\n")[:2] == [value, ordered]
    assert second.stdout.split("\n")[2].split()[-1] == "True"  # the product read back, not compiled
