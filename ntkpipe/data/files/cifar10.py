"""CIFAR-10 in Krizhevsky's "python version" batches (https://www.cs.toronto.edu/~kriz/cifar.html), read,
checked and md5-verified against torchvision's table.

``cifar-10-batches-py/data_batch_1..5`` and ``test_batch``, each a pickled dict with ``b"data"`` (n, 3072)
uint8, channel-major (1024 red, 1024 green, 1024 blue values, each a row-major 32x32 plane), and
``b"labels"`` (n integers in 0..9). Images are returned NHWC: (n, 32, 32, 3). The batches are unpickled
with :mod:`~ntkpipe.data.files.safe_pickle`, so a tampered file cannot run code.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from ntkpipe.data.files import safe_pickle
from ntkpipe.data.files.local import (
    ENV_VAR,
    DirReport,
    LocalFiles,
    md5_problem,
    require_dir,
    verify_or_raise,
)
from ntkpipe.errors import DataFileError

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
ARCHIVE = "cifar-10-python.tar.gz"
DIRNAME = "cifar-10-batches-py"
ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
"""torchvision.datasets.CIFAR10.tgz_md5 (the official archive)."""
BATCH_MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}
"""torchvision.datasets.CIFAR10.train_list / test_list (md5 of the extracted batches)."""
SPLITS = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}
IMAGE = (32, 32, 3)
ROW = IMAGE[0] * IMAGE[1] * IMAGE[2]
CLASSES = 10
OFFICIAL_COUNTS = {"train": np.full(CLASSES, 5000), "test": np.full(CLASSES, 1000)}
"""Images per class of the official batches."""
EXPECTED = (
    *(f"{DIRNAME}/{name}  pickled dict: b'data' uint8 (10000, 3072), b'labels' 10000 ints in 0..9"
      for name in SPLITS["train"] + SPLITS["test"]),
    f"{ARCHIVE}  optional, next to {DIRNAME}; only used to verify the md5 {ARCHIVE_MD5}",
)


def fix(directory: Path | None = None) -> str:
    where = f"in {directory}" if directory is not None else "in one directory"
    return (
        f"fix: download {ARCHIVE} (python version) from "
        f"https://www.cs.toronto.edu/~kriz/cifar.html ({URL}), extract it with "
        f"`tar xzf {ARCHIVE}` {where} so that {DIRNAME}/data_batch_1 "
        f"exists there, or set data.path / {ENV_VAR} (which means ${ENV_VAR}/cifar10) to "
        f"that directory or to {DIRNAME} itself"
    )


def batch_dir(directory: Path) -> Path:
    """The ``cifar-10-batches-py`` directory: ``directory`` itself or its child."""
    if directory.name == DIRNAME or (directory / "data_batch_1").exists():
        return directory
    child = directory / DIRNAME
    if child.is_dir():
        return child
    if (directory / ARCHIVE).is_file():
        raise DataFileError(
            f"{directory}: expected the extracted {DIRNAME}/ directory, found "
            f"only the archive {directory / ARCHIVE}. fix: run "
            f"`tar xzf {ARCHIVE}` in {directory}"
        )
    return directory


def root(batches: Path) -> Path:
    """Where the archive is (to be) extracted: the parent of ``cifar-10-batches-py``."""
    return batches.parent if batches.name == DIRNAME else batches


def paths(batches: Path) -> dict[str, Path]:
    """Path of each batch in the batch directory."""
    names = SPLITS["train"] + SPLITS["test"]
    missing = [n for n in names if not (batches / n).is_file()]
    if missing:
        present = sorted(p.name for p in batches.iterdir())[:20]
        where = "" if batches.name == DIRNAME else f" (or a {DIRNAME}/ directory)"
        raise DataFileError(
            f"{batches}: expected the CIFAR-10 python batches{where}, missing "
            f"{len(missing)}: {', '.join(missing)}; found "
            f"{present or 'an empty directory'}. {fix(root(batches))}"
        )
    return {n: batches / n for n in names}


def _unpickle(path: Path) -> Any:
    advice = fix(root(path.parent))
    try:
        with open(path, "rb") as f:
            # the official batches are Python 2 pickles whose str keys must stay bytes
            return safe_pickle.load(f)
    except pickle.UnpicklingError as exc:
        if safe_pickle.REFUSED in str(exc):
            raise DataFileError(
                f"{path}: expected a CIFAR-10 batch (a pickled dict of numpy arrays and "
                f"lists), found a pickle that {exc}; the file may be malicious and was not "
                f"loaded. {advice}"
            ) from exc
        raise DataFileError(
            f"{path}: expected a CIFAR-10 python batch (pickle), found data that does not "
            f"unpickle ({exc}); the file is corrupt or not a CIFAR-10 batch. {advice}"
        ) from exc
    except OSError as exc:
        raise DataFileError(f"{path}: expected a readable file, found an error ({exc}). {advice}") from exc
    except Exception as exc:  # truncated/garbled pickles raise many types
        raise DataFileError(
            f"{path}: expected a CIFAR-10 python batch (pickle), found data that does not "
            f"unpickle ({type(exc).__name__}: {exc}); the file is truncated or corrupt. {advice}"
        ) from exc


def _get(batch: dict, key: str) -> Any:
    for k in (key.encode(), key):
        if k in batch:
            return batch[k]
    raise KeyError(key)


def load_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch: images (n, 32, 32, 3) uint8 NHWC and labels (n,) uint8, checked."""
    advice = fix(root(path.parent))
    batch = _unpickle(path)
    if not isinstance(batch, dict):
        raise DataFileError(
            f"{path}: expected a pickled dict with b'data' and b'labels', found "
            f"{type(batch).__name__}. {advice}"
        )
    try:
        data, labels = _get(batch, "data"), _get(batch, "labels")
    except KeyError as exc:
        raise DataFileError(
            f"{path}: expected keys b'data' and b'labels', found keys "
            f"{sorted(map(repr, batch))}; missing {exc.args[0]!r} (a CIFAR-100 batch uses "
            f"b'fine_labels'). {advice}"
        ) from None
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != ROW or data.shape[0] == 0:
        found = (f"{type(data).__name__} {data.dtype} {data.shape}" if isinstance(data, np.ndarray)
                 else type(data).__name__)
        raise DataFileError(
            f"{path}: expected b'data' to be a uint8 array of shape (n, {ROW}) with "
            f"n > 0, found {found}. {advice}"
        )
    try:
        y = np.asarray(labels)
    except Exception:  # noqa: BLE001 - ragged or exotic objects
        y = np.asarray([None])
    if y.ndim != 1 or y.shape[0] != data.shape[0] or not np.issubdtype(y.dtype, np.integer):
        raise DataFileError(
            f"{path}: expected b'labels' to be {data.shape[0]} integers (one per image row), "
            f"found {type(labels).__name__} with dtype {y.dtype} and shape {y.shape}. {advice}"
        )
    y = y.astype(np.int64)
    bad = np.flatnonzero((y < 0) | (y >= CLASSES))
    if bad.size:
        raise DataFileError(
            f"{path}: expected labels in 0..9, found {int(y[bad[0]])} at index "
            f"{int(bad[0])}; the file is corrupt or not CIFAR-10. {advice}"
        )
    x = data.reshape(-1, IMAGE[2], *IMAGE[:2]).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), y.astype(np.uint8)


def load_cifar10(directory: str | os.PathLike[str], *, verify: bool = False) -> dict[str, np.ndarray]:
    """CIFAR-10 from the python batches.

    ``directory`` is ``cifar-10-batches-py`` itself or its parent.  Returns ``x_train``
    (n, 32, 32, 3) uint8 NHWC, ``y_train`` (n,) uint8, ``x_test``, ``y_test``.  With
    ``verify`` the batches' (and archive's, if present) md5 are checked first.
    """
    d = require_dir(directory, FORMAT)
    found = paths(batch_dir(d))
    if verify:
        verify_or_raise(d, FORMAT)
    out: dict[str, np.ndarray] = {}
    for split, names in SPLITS.items():
        parts = [load_batch(found[n]) for n in names]
        out[f"x_{split}"] = np.concatenate([p[0] for p in parts])
        out[f"y_{split}"] = np.concatenate([p[1] for p in parts])
    return {k: out[k] for k in ("x_train", "y_train", "x_test", "y_test")}


def checksums(directory: Path) -> tuple[list[str], list[str]]:
    """The six batches against torchvision's ``CIFAR10.train_list``/``test_list``, and
    ``cifar-10-python.tar.gz`` against the official archive md5 when the archive is present (else
    skipped with a note)."""
    problems: list[str] = []
    skipped: list[str] = []
    try:
        batches = batch_dir(directory)
    except DataFileError as exc:  # only the archive is there: check it, report the rest
        problems.append(str(exc))
        batches = directory / DIRNAME
    for name, want in BATCH_MD5.items():
        p = batches / name
        if not batches.is_dir():
            break
        if p.is_file():
            problems += filter(None, [md5_problem(p, want, "torchvision CIFAR10 batch table")])
        else:
            problems.append(f"{p}: expected the batch file, found nothing. {fix(root(batches))}")
    archives = [c / ARCHIVE for c in dict.fromkeys((directory, root(batches)))]
    archive = next((a for a in archives if a.is_file()), None)
    if archive is not None:
        problems += filter(None, [md5_problem(archive, ARCHIVE_MD5, "official cifar-10-python.tar.gz")])
    else:
        skipped.append(f"{archives[0]}: archive absent, its md5 {ARCHIVE_MD5} not checked")
    return problems, skipped


def pickle_problem(path: Path) -> str | None:
    """Cheap structural check of a batch: its first two and last bytes (a pickle's start and its
    STOP opcode, a truncation check)."""
    advice = fix(root(path.parent))
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(2)
            if size:
                f.seek(-1, os.SEEK_END)
            tail = f.read(1)
    except OSError as exc:
        return f"{path}: expected a readable file, found an error ({exc}). {advice}"
    what = "a CIFAR-10 python batch (a pickle; the official ones start with bytes 0x80 0x02)"
    if size == 0:
        return f"{path}: expected {what}, found an empty file. {advice}"
    if head[:1] == b"\x80":
        protocol = head[1] if len(head) > 1 else None
        if protocol is None or not 2 <= protocol <= pickle.HIGHEST_PROTOCOL:
            return (f"{path}: expected {what}, found pickle protocol {protocol}, which this "
                    f"Python (highest protocol {pickle.HIGHEST_PROTOCOL}) cannot read. {advice}")
    elif head[:1] not in (b"(", b"}"):  # protocol 0 / 1 dict pickles
        hint = ""
        if head == b"\x1f\x8b":
            hint = " (gzip-compressed data: is this the archive? extract it with tar xzf)"
        return f"{path}: expected {what}, found a file starting with {head!r}{hint}. {advice}"
    if tail != b".":
        return (f"{path}: expected {what} ending with the pickle STOP byte '.', found "
                f"{tail!r} at the end of its {size} bytes; the file is truncated "
                f"(incomplete download or extraction?). {advice}")
    return None


def inspect(directory: Path) -> DirReport:
    """Each batch exists, is non-empty, starts like a pickle and ends with the STOP opcode; batches
    are unpickled (30 MB each) only when loaded or counted."""
    report = DirReport()
    try:
        found = paths(batch_dir(require_dir(directory, FORMAT)))
    except DataFileError as exc:
        report.problems.append(str(exc))
        return report
    report.problems += filter(None, map(pickle_problem, found.values()))
    report.label_files = {split: found[names[0]].parent for split, names in SPLITS.items()}
    return report


def candidates(directory: Path) -> list[Path]:
    """Every path whose state decides :func:`inspect` of ``directory``."""
    names = [*BATCH_MD5, ARCHIVE]
    dirs = [directory, directory / DIRNAME]
    if directory.name == DIRNAME:
        dirs.append(directory.parent)
    return dirs + [d / n for d in dirs for n in names]


def count_classes(directory: Path) -> dict[str, np.ndarray]:
    """Images per class of each split, read from the batches' labels (unpickles every batch)."""
    found = paths(batch_dir(directory))
    return {split: np.bincount(np.concatenate([load_batch(found[name])[1] for name in names]), minlength=CLASSES)
            for split, names in SPLITS.items()}


FORMAT = LocalFiles("cifar10", IMAGE, CLASSES, EXPECTED, fix, load_cifar10, inspect, checksums, candidates,
                    official_counts=OFFICIAL_COUNTS, count_classes=count_classes)
