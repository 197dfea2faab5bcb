"""md5 of local data files, remembered on disk by (path, size, mtime).

Every Snakefile parse validates the specs, and so the MNIST/CIFAR-10 files they name; hashing
~200 MB each time would cost seconds. The cache is a JSON file under ``$NTKPIPE_CACHE`` (default
``$XDG_CACHE_HOME/ntkpipe``, else ``~/.cache/ntkpipe``); an entry is reused only while the
file's absolute path, size and modification time (ns) are unchanged, so an edited or replaced
file is hashed again. An unreadable or unwritable cache is ignored (the file is hashed).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from pathlib import Path

CACHE_ENV = "NTKPIPE_CACHE"
_lock = threading.Lock()


def cache_file() -> Path:
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ntkpipe"
    return Path(root) / "md5.json"


def _hash(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load(cache: Path) -> dict:
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}


def file_md5(path: str | os.PathLike[str]) -> str:
    """md5 hex digest of ``path``, from the cache when its path, size and mtime are unchanged."""
    path = Path(os.path.abspath(path))
    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns]
    cache = cache_file()
    with _lock:
        entry = _load(cache).get(str(path))
        if entry is not None and entry[:2] == stamp:
            return entry[2]
    digest = _hash(path)
    with _lock:
        entries = _load(cache)
        entries[str(path)] = stamp + [digest]
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.{uuid.uuid4().hex[:8]}")
            tmp.write_text(json.dumps(entries))
            os.replace(tmp, cache)
        except OSError:
            pass
    return digest
