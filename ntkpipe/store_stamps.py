"""Stamps of valid stores: what lets the Snakefile's fast store check (:func:`ntkpipe.store.verify_store`)
be skipped for a store that cannot have changed since it passed, by stats alone.

A stamp holds, for a store that passed, the inode, mtime and ctime of each of its directories, of
its attrs and of its manifest, and the size of every file its manifest lists. While a stamp holds
(:func:`stamp_holds`), the check would find what it found: no file was added, removed or renamed
(each would change a directory's mtime and ctime), the attrs and manifest it read are the same
files, unwritten (a write changes the ctime, which no one can set back), and every listed file has
its manifest's size. So an edited or damaged store still fails: a file written in place (e.g. a
truncated chunk) by its size, as before. The stamps live in the plan cache (:mod:`ntkpipe.plan_cache`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ntkpipe.store import MANIFEST, StoreCheck, verify_store

KEY_FILES = (".zattrs", MANIFEST)
"""The files the check reads, stamped like directories."""


@dataclass(frozen=True)
class StoreStamp:
    """``stats``: (relative path, inode, mtime, ctime) of each directory and key file; ``sizes``:
    (relative path, size) of each listed file; ``check``: what the check found."""

    stats: tuple[tuple[str, int, int, int], ...]
    sizes: tuple[tuple[str, int], ...]
    check: StoreCheck


def _stat(path: str) -> tuple[int, int, int]:
    s = os.stat(path)
    return s.st_ino, s.st_mtime_ns, s.st_ctime_ns


def _stats(root: str) -> tuple[tuple[str, int, int, int], ...]:
    """The stamped stats of the store ``root`` (its directories, found by walking it, and key files)."""
    out = []
    for folder, dirs, _ in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        out.append((rel, *_stat(folder)))
    return tuple(out) + tuple((name, *_stat(f"{root}/{name}")) for name in KEY_FILES)


def stamp_store(path: Path, store_id: str) -> tuple[StoreCheck, StoreStamp | None]:
    """:func:`verify_store` (fast) of ``path``, and its stamp if it is valid and did not change
    while it was checked (stats taken before and after)."""
    try:
        before = _stats(str(path))
    except OSError:
        return verify_store(path, store_id), None
    check = verify_store(path, store_id)
    if not check.valid:
        return check, None
    try:
        listed = json.loads((path / MANIFEST).read_text())["files"]
        if _stats(str(path)) != before:
            return check, None
    except (OSError, ValueError, KeyError, TypeError):
        return check, None
    return check, StoreStamp(before, tuple((rel, entry[0]) for rel, entry in sorted(listed.items())), check)


def stamp_holds(path: Path, stamp: StoreStamp) -> bool:
    """Whether the store ``path`` is as it was stamped (see the module docstring)."""
    root = str(path)
    try:
        return (all(_stat(f"{root}/{rel}") == tuple(key) for rel, *key in stamp.stats)
                and all(os.stat(f"{root}/{rel}").st_size == size for rel, size in stamp.sizes))
    except OSError:
        return False


def check_stores(stores: dict[Path, str], stamps: dict[Path, StoreStamp],
                 checks: dict[Path, StoreCheck]) -> dict[Path, StoreStamp]:
    """Check every existing store of ``stores`` (path -> id) into ``checks``: by its stamp in
    ``stamps`` where that holds, else by :func:`stamp_store`. Returns the stamps of the valid ones."""
    kept = {}
    for path, store_id in stores.items():
        stamp = stamps.get(path)
        if stamp is not None and stamp_holds(path, stamp):
            checks[path], kept[path] = stamp.check, stamp
        elif path.exists():
            checks[path], fresh = stamp_store(path, store_id)
            if fresh is not None:
                kept[path] = fresh
    return kept
