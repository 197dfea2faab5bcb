"""The workflow's plan, kept between Snakemake invocations so that a no-op ``snakemake -n`` costs
about what Snakemake's own DAG costs (``benchmarks/noop_dry_run.py``).

A plan is cached in ``results/.cache/plan/<key>.pickle``, where the key hashes everything validation
reads: each spec file's bytes, the variant, the run and memory limits, the environment variables
that steer validation and the code (path, size and mtime of every ``ntkpipe`` source file). The
entry is two pickles in one file. The first, a :class:`PlanEntry`, is plain data: the Snakefile's
wiring (:class:`~ntkpipe.wiring.Wiring`); the spec files skipped (they lack the variant) or to
validate again on every use (they read local data files, MNIST or CIFAR-10, which are not in the
key); the state of every run store that planning read (:func:`store_states`): planning asks which
final items a run store holds, so the plan is reused only while every such store is as it was (its
manifest and attrs files unchanged, and still passing the fast :func:`~ntkpipe.store.verify_store`);
and the stamps of the valid stores (:mod:`ntkpipe.store_stamps`), which spare their fast check while
they hold. The second, a :class:`PlanDetail`, holds the validated studies and the planned index; it
is unpickled only when they are needed (a job is to run, or a run store changed: then the studies are
planned again from the cached validation), since unpickling them imports the language, and with it
JAX. Stores are checked as before in every invocation (the Snakefile's ``set_aside_invalid``), by
stamp or in full: the cache never marks a store done.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import os
import pickle
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ntkpipe.store import MANIFEST, StoreCheck, verify_store
from ntkpipe.store_stamps import StoreStamp
from ntkpipe.wiring import Wiring

CACHE_DIR = Path(".cache") / "plan"
"""Under the results directory."""
FORMAT = 3
KEPT_DAYS = 7
"""Entries unused this long are deleted when another is written."""
ENVIRONMENT = ("NTKPIPE_DATA", "NTKPIPE_SKIP_CHECKSUMS", "NTKPIPE_MAX_RUNS")
"""Environment variables that validation reads (data directory, checksums, run limit)."""


@dataclass
class PlanEntry:
    """One cached plan's plain part: the Snakefile's wiring, the spec files skipped (no such variant)
    and to validate again on every use (local data files), the run stores (path -> id) with the
    states they were planned with, and the stamps of the valid planned stores."""

    wiring: Wiring
    skipped: list[str]
    revalidate: list[str]
    runs: dict[Path, str]
    states: dict[Path, tuple | None]
    stamps: dict[Path, StoreStamp]


@dataclass
class PlanDetail:
    """One cached plan's objects: per spec file, its validated study (None: skipped), and the index
    (a :class:`~ntkpipe.workflow.WorkflowIndex`)."""

    studies: dict[str, Any]
    index: Any


def code_fingerprint() -> str:
    """Hash of the path, size and mtime of every source file of the ntkpipe package."""
    root = Path(__file__).parent
    digest = hashlib.sha256(sys.version.encode())
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                stat = os.stat(os.path.join(folder, name))
                digest.update(f"{folder}/{name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def plan_key(files: list[Path], variant: str, limit: int, bytes_limit: int | None, results: Path) -> str:
    """The cache key of planning ``files`` for ``variant`` into ``results`` (see the module docstring;
    the planned paths are relative to the working directory, so it is in the key too)."""
    digest = hashlib.sha256(f"{FORMAT}\n{variant}\n{limit}\n{bytes_limit}\n{results}\n{os.getcwd()}\n"
                            f"{code_fingerprint()}\n".encode())
    for name in ENVIRONMENT:
        digest.update(f"{name}={os.environ.get(name)}\n".encode())
    for path in files:
        digest.update(f"{path}\n{path.resolve()}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


def store_state(path: Path, store_id: str, checks: dict[Path, StoreCheck]) -> tuple | None:
    """What planning read of the run store ``path``: None if it is not done (fast check), else the
    size, mtime and inode of its manifest and attrs files. The check is kept in ``checks``."""
    check = checks.get(path)
    if check is None:
        check = checks[path] = verify_store(path, store_id)
    if not check.valid:
        return None
    try:
        return tuple((s.st_size, s.st_mtime_ns, s.st_ino) for s in (os.stat(path / MANIFEST), os.stat(path / ".zattrs")))
    except OSError:
        return None


def store_states(runs: dict[Path, str], checks: dict[Path, StoreCheck]) -> dict[Path, tuple | None]:
    """:func:`store_state` of every run store in ``runs`` (path -> id), by path."""
    return {path: store_state(path, run_id, checks) for path, run_id in runs.items()}


def entry_path(results: Path, key: str) -> Path:
    return Path(results) / CACHE_DIR / f"{key}.pickle"


def read_entry(results: Path, key: str) -> tuple[PlanEntry, bytes] | None:
    """The cached plan of ``key``: its plain part and the pickle of its :class:`PlanDetail` (see
    :func:`read_detail`), or None (absent, unreadable, or made by other code)."""
    try:
        with open(entry_path(results, key), "rb") as f:
            stream = io.BytesIO(f.read())
        entry = _unpickle(stream)
    except Exception:  # a damaged or foreign file is a cache miss: the plan is made again
        return None
    return (entry, stream.read()) if isinstance(entry, PlanEntry) else None


def read_detail(data: bytes) -> PlanDetail | None:
    """The :class:`PlanDetail` pickled in ``data`` (from :func:`read_entry`), or None if it is damaged."""
    try:
        detail = _unpickle(io.BytesIO(data))
    except Exception:  # as in read_entry: the plan is made again
        return None
    return detail if isinstance(detail, PlanDetail) else None


def _unpickle(stream: io.BytesIO) -> object:
    """The next object pickled in ``stream``, unpickled with the cyclic garbage collector off: its
    many new containers would otherwise set off collections that scan every object of the process."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pickle.load(stream)
    finally:
        if enabled:
            gc.enable()


def write_entry(results: Path, key: str, entry: PlanEntry, detail: bytes) -> None:
    """Write ``entry`` and ``detail`` (a pickled :class:`PlanDetail`) atomically, deleting entries
    unused for :data:`KEPT_DAYS`; an unwritable results directory only costs the cache."""
    path = entry_path(results, key)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("*.pickle"):
            if old.stat().st_atime < time.time() - KEPT_DAYS * 86400:
                old.unlink(missing_ok=True)
        with open(tmp, "wb") as f:
            pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.write(detail)
        os.replace(tmp, path)
    except OSError:  # e.g. results is a file: check_results_writable says so next
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)

