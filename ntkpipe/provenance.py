"""Provenance of a result store: the versions of the software that made it, the device it ran on,
and when.

Versions are looked up once per process (the git commit runs ``git`` once); a store records them as
its ``versions`` attr (JSON) next to ``created`` (UTC, ISO 8601).
"""

from __future__ import annotations

import functools
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

PACKAGES = ("jax", "jaxlib", "numpy", "xarray", "zarr")


@functools.cache
def versions() -> dict[str, str]:
    """ntkpipe, Python and :data:`PACKAGES` versions, the JAX ``device`` (:func:`device`), and ``git``
    (the commit of the ntkpipe checkout, ``+dirty`` with uncommitted changes to tracked files) when
    ntkpipe runs from one."""
    from ntkpipe import __version__

    out = {"ntkpipe": __version__, "python": platform.python_version(), "device": device()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    commit = git_commit(Path(__file__).resolve().parents[1])
    if commit:
        out["git"] = commit
    return out


def device() -> str:
    """The device JAX computes on by default: ``cpu``, or the platform and model of the first
    accelerator (``gpu: NVIDIA H200``). CPU and GPU runs of one spec agree to float tolerance, not bit
    for bit, so a store says which made it."""
    import jax

    first = jax.devices()[0]
    return first.platform if first.platform == "cpu" else f"{first.platform}: {first.device_kind}"


def git_commit(root: Path) -> str | None:
    """HEAD of the git checkout at ``root`` (``+dirty`` if tracked files changed), or None."""
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def utc_now() -> str:
    """The current UTC time, to the second (``2025-01-31T12:00:00Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
