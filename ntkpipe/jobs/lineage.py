"""Runs of one lineage: the same resolved config but for the horizon (``train.steps``, ``epochs``,
``max_time``) and the checkpoint schedule. A run's id hashes its whole config, so a longer horizon is
another run; its lineage names what a longer run of it may continue (:func:`ntkpipe.train.driver.continued`).

Every run store keeps its lineage (attr ``lineage``) and its final snapshot (:data:`FINAL_SNAPSHOT`,
a file of the store, listed in its manifest). The training job of a run finds the other runs of its
lineage through an index of markers, ``runs/.lineage/<lineage>/<id>.json`` holding that run's total
steps, one file per run (so concurrent jobs never write one file); a marker whose store is gone or
invalid is skipped.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ntkpipe.lang.identity import content_id
from ntkpipe.store import verify_store
from ntkpipe.train import snapshot

HORIZON_KEYS = ("steps", "epochs", "max_time", "checkpoints")
"""The ``train`` keys a lineage leaves out of a run's config."""
FINAL_SNAPSHOT = "final_state.npz"
INDEX = ".lineage"


def lineage_id(config: dict) -> str:
    """The hash of the run ``config`` without :data:`HORIZON_KEYS` of its ``train`` section."""
    config = copy.deepcopy(config)
    for key in HORIZON_KEYS:
        config.get("train", {}).pop(key, None)
    return content_id(config)


def _marker(store: Path, lineage: str) -> Path:
    return store.parent / INDEX / lineage / f"{store.stem}.json"


def record(store: Path, lineage: str, total: int) -> None:
    """Index the finished run ``store`` (``runs/<id>.zarr``) under ``lineage`` with its ``total`` steps."""
    marker = _marker(store, lineage)
    marker.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write(marker, json.dumps({"total": int(total)}).encode())


def finished(store: Path, lineage: str) -> list[bytes]:
    """The final snapshots of the valid runs of ``lineage`` beside ``store`` (``store`` itself left out),
    shortest first: what a run of the lineage may continue (the longest shorter one,
    :func:`ntkpipe.train.driver.continued`) or read (those that reach its horizon, and the states they
    save, :mod:`ntkpipe.train.reuse`)."""
    found = []
    for marker in (store.parent / INDEX / lineage).glob("*.json"):
        try:
            steps = int(json.loads(marker.read_text())["total"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if marker.stem != store.stem:
            found.append((steps, store.parent / f"{marker.stem}.zarr"))
    return [(path / FINAL_SNAPSHOT).read_bytes() for _, path in sorted(found)
            if verify_store(path, path.stem).valid and (path / FINAL_SNAPSHOT).is_file()]
