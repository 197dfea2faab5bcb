"""Snapshots of the training driver: where :func:`ntkpipe.train.driver.drive` stands, in one ``.npz`` file.

A snapshot holds what the driver needs to go on as if it had never stopped: the next checkpoint
index and the steps done, the stepper's state (its array leaves: parameters, optimizer state,
BatchNorm statistics, typed PRNG keys as their key data; python numbers too), the per-member
records measured so far, which members still run or diverged, a stopped member's final state,
and the seconds spent. Whatever is not an array (a network's structure, activation functions, a
stepper's constants) comes from a template, the state a fresh stepper gives (``stepper.init``), so
a snapshot restores only onto the same layout of array leaves (shapes and dtypes are checked).

The driver writes one at checkpoints (its resume file, a run that was killed goes on from there)
and one at the end (the run's final state, kept in its store, which a longer run of the same
lineage continues, :mod:`ntkpipe.jobs.lineage`). Files are written atomically (a temporary file,
then ``os.replace``): a kill while writing leaves the previous snapshot.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

FORMAT = 2
"""The snapshot layout; a snapshot of another layout (or another ntkpipe version) is not used."""


class SnapshotMismatch(ValueError):
    """A snapshot that does not belong to this run, or cannot be read."""


@dataclass
class Position:
    """Where the driver stands: the next checkpoint ``index`` to measure, ``done`` steps taken, the
    stepper ``state``, per member its ``records`` (one dict per measured checkpoint), whether it
    ``running`` or ``diverged``, its ``ends`` (final model and numbers where it stopped, else None)
    and ``stopped_at`` (the step it stopped at), and the seconds of training and of measuring."""

    index: int
    done: int
    state: Any
    records: list[list[dict]]
    running: list[bool]
    diverged: list[bool]
    ends: list
    stopped_at: list[int | None]
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0])
    trained: int = 0
    """Optimizer steps this run has taken itself (not counting those of the run it continues)."""
    finite: list[bool] = field(default_factory=list)
    """Per member, whether its steps since the last checkpoint were finite (a run stopped between two
    checkpoints judges them at the next)."""


def _is_key(leaf) -> bool:
    # jax.dtypes.issubdtype is public API that jax/dtypes.py re-exports without `as` (a stub gap)
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(  # pyright: ignore[reportPrivateImportUsage]
        leaf.dtype, jax.dtypes.prng_key)


def _saved(leaf) -> bool:
    return isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float))


def leaf_arrays(tree) -> dict[str, np.ndarray]:
    """The saved leaves of ``tree`` (arrays, typed keys as key data, python numbers) by leaf index."""
    out = {}
    for j, leaf in enumerate(jax.tree.leaves(tree)):
        if _is_key(leaf):
            out[str(j)] = np.asarray(jax.random.key_data(leaf))
        elif _saved(leaf):
            out[str(j)] = np.asarray(leaf)
    return out


def with_leaf_arrays(template, arrays: dict[str, np.ndarray]):
    """``template`` with its saved leaves replaced by ``arrays`` (:func:`leaf_arrays` of a tree of the
    same layout), each of the template leaf's kind; raises :class:`SnapshotMismatch` on another layout."""
    leaves, treedef = jax.tree.flatten(template)
    expected = leaf_arrays(template)
    if set(expected) != set(arrays):
        raise SnapshotMismatch(f"its state has {len(arrays)} saved leaves, this run's {len(expected)}")
    for j, a in expected.items():
        if (a.shape, a.dtype) != (arrays[j].shape, arrays[j].dtype):
            raise SnapshotMismatch(f"state leaf {j} is {arrays[j].dtype}{list(arrays[j].shape)}, this run's "
                                   f"{a.dtype}{list(a.shape)}")
    out = []
    for j, leaf in enumerate(leaves):
        a = arrays.get(str(j))
        if a is None:
            out.append(leaf)
        elif _is_key(leaf):
            out.append(jax.random.wrap_key_data(jnp.asarray(a), impl=jax.random.key_impl(leaf)))
        elif isinstance(leaf, jax.Array):
            out.append(jnp.asarray(a, dtype=leaf.dtype))
        elif isinstance(leaf, np.ndarray):
            out.append(a)
        elif isinstance(leaf, np.generic):
            out.append(a[()])
        else:
            out.append(type(leaf)(a.item()))
    return jax.tree.unflatten(treedef, out)


def encode(position: Position, identity: dict) -> bytes:
    """The ``.npz`` bytes of ``position`` with ``identity`` (run ids, lineages, checkpoint steps)."""
    from ntkpipe import __version__

    arrays: dict[str, np.ndarray] = {f"state.{j}": a for j, a in leaf_arrays(position.state).items()}
    keys = []
    for i, records in enumerate(position.records):
        keys.append(list(records[0]) if records else [])
        for k in keys[-1]:
            arrays[f"records.{i}.{k}"] = np.stack([np.asarray(r[k]) for r in records])
    for i, end in enumerate(position.ends):
        if end is not None:
            arrays.update({f"ends.{i}.{j}": a for j, a in leaf_arrays(end).items()})
    meta = {"format": FORMAT, "ntkpipe": __version__, **identity, "index": position.index, "done": position.done,
            "running": position.running, "diverged": position.diverged, "stopped_at": position.stopped_at,
            "records": [len(r) for r in position.records], "record_keys": keys, "seconds": position.seconds,
            "trained": position.trained, "finite": position.finite}
    buffer = io.BytesIO()
    # numpy's stub types savez's allow_pickle, which **arrays could name (their keys are dotted paths)
    np.savez(buffer, meta=np.array(json.dumps(meta)), **arrays)  # pyright: ignore[reportArgumentType]
    return buffer.getvalue()


def write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class Snapshot:
    """A snapshot read back: its ``meta`` (identity and position numbers) and its arrays."""

    meta: dict
    arrays: dict[str, np.ndarray]

    def position(self, template_state, template_ends: list) -> Position:
        """The position it holds, restored onto ``template_state`` (and ``template_ends[i]``, the
        template of member i's final model and numbers)."""
        m = self.meta
        state = with_leaf_arrays(template_state, self._group("state"))
        ends = [None if m["stopped_at"][i] is None else with_leaf_arrays(template_ends[i], self._group(f"ends.{i}"))
                for i in range(len(m["running"]))]
        records = [[self.record(i, c) for c in range(n)] for i, n in enumerate(m["records"])]
        return Position(m["index"], m["done"], state, records, list(m["running"]), list(m["diverged"]), ends,
                        list(m["stopped_at"]), list(m["seconds"]), m["trained"], list(m["finite"]))

    def record(self, member: int, index: int) -> dict:
        """What member ``member`` measured at checkpoint ``index``."""
        return {k: self.arrays[f"records.{member}.{k}"][index] for k in self.meta["record_keys"][member]}

    def _group(self, prefix: str) -> dict[str, np.ndarray]:
        return {k[len(prefix) + 1:]: v for k, v in self.arrays.items() if k.startswith(prefix + ".")
                and k[len(prefix) + 1:].isdigit()}


def read(source: Path | bytes) -> Snapshot:
    """The snapshot in the file ``source`` (or its bytes); :class:`SnapshotMismatch` if unreadable or
    of another format or ntkpipe version."""
    from ntkpipe import __version__

    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        meta = json.loads(str(arrays.pop("meta")))
    except Exception as err:  # a torn or foreign file: any reader error means "not usable"
        raise SnapshotMismatch(f"unreadable ({type(err).__name__}: {err})") from err
    if (meta.get("format"), meta.get("ntkpipe")) != (FORMAT, __version__):
        raise SnapshotMismatch(f"made by format {meta.get('format')} / ntkpipe {meta.get('ntkpipe')}, this is "
                               f"format {FORMAT} / ntkpipe {__version__}")
    return Snapshot(meta, arrays)
