"""Validation-time checks of a study's local MNIST / CIFAR-10 files.

:func:`data_file_problems` runs while a study is validated, i.e. every time Snakemake parses
the workflow, so it never reads image payloads:

* MNIST: each IDX file's header (magic number, dimension sizes) is parsed and its size is
  compared with the header's: the file size of a plain file, the gzip trailer's ISIZE
  (uncompressed size mod 2**32) of a ``.gz`` (only the header bytes are decompressed).
  The label files (60 kB + 10 kB) are read whole to check labels and images agree in
  number and to count the images of each class against ``n_train`` / ``n_test``.
* CIFAR-10: each batch must exist, be non-empty, start like a pickle and end with the
  pickle STOP opcode (a cheap truncation check).  Batches are unpickled (30 MB each) only
  at load time; ``n_train`` / ``n_test`` are checked against the official class counts
  when the md5s show the official files.
* With ``verify_checksums`` the md5 of the official files (see
  :func:`ntkpipe.data.files.verify_checksums`) -- about 0.02 s for MNIST and 0.55 s for
  CIFAR-10 with its archive, from the page cache -- only when the structure is sound.

Results are cached per process, keyed by the resolved directory and the size, mtime and
inode of every file that could be read (and of the directories holding them), so several
data specs on the same directory cost one check.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ntkpipe.data import files as _files
from ntkpipe.data.files import (
    CIFAR10_ARCHIVE,
    CIFAR10_DIRNAME,
    DATASETS,
    ENV_VAR,
    _check_mnist_counts,
    _check_mnist_image_dims,
    _cifar_dir,
    _cifar_paths,
    _cifar_root,
    _fix,
    _mnist_dir,
    _mnist_paths,
    _read_idx_header,
    _read_mnist_labels,
    _require_dir,
    resolve_data_dir,
)
from ntkpipe.errors import DataFileError
from ntkpipe.lang.schema import DataSpec

__all__ = ["PATH_KEY", "clear_data_file_cache", "data_file_problems"]

Problem = tuple[tuple, str]
PATH_KEY = ("data", "path")
CIFAR10_CLASS_COUNTS = {"train": np.full(10, 5000), "test": np.full(10, 1000)}
"""Images per class of the official CIFAR-10 batches (checked against n_train / n_test when their
md5s match; a custom copy, NTKPIPE_SKIP_CHECKSUMS=1, is counted from its labels)."""
_CACHE_SIZE = 32


@dataclass
class _DirReport:
    """What is known about one directory of one dataset (cached)."""

    problems: list[str] = field(default_factory=list)
    # MNIST: images per class of each split, from the label files (None when unreadable).
    class_counts: dict[str, np.ndarray] = field(default_factory=dict)
    label_files: dict[str, Path] = field(default_factory=dict)
    # CIFAR-10 with checksums skipped: images per class of each split, from the batches' labels.
    batch_counts: dict[str, np.ndarray] = field(default_factory=dict)
    checksum_problems: list[str] | None = None  # filled on the first verify_checksums=True


_cache: OrderedDict[tuple, _DirReport] = OrderedDict()
_lock = threading.Lock()


def clear_data_file_cache() -> None:
    """Forget every cached directory check (tests; or after replacing files in place)."""
    with _lock:
        _cache.clear()


def data_file_problems(spec: DataSpec, *, verify_checksums: bool) -> list[Problem]:
    """``(key path, message)`` pairs for the local files of ``spec`` (empty = usable).

    Sources other than mnist/cifar10 have no files: ``[]``.  The directory is
    ``resolve_data_dir(spec.path, spec.source)`` (``data.path``, else ``$NTKPIPE_DATA/<source>``).
    Missing or malformed files are reported at ``("data", "path")``; an ``n_train`` /
    ``n_test`` larger than the MNIST images of ``spec.classes`` at ``("data", "n_train")`` /
    ``("data", "n_test")``; with ``verify_checksums``, md5 mismatches at ``("data", "path")``.
    Each message names the file, what was expected, what was found and the fix.
    """
    if spec.source == "digits":
        return _digits_count_problems(spec)
    if spec.source not in DATASETS:
        return []
    try:
        directory = resolve_data_dir(spec.path, spec.source)
    except DataFileError as exc:
        return [(PATH_KEY, str(exc))]
    origin = _origin_note(spec)
    report = _report(directory, spec.source)
    path_problems = list(report.problems)
    if verify_checksums and not report.problems:
        path_problems += _checksums(report, directory, spec.source)
    problems: list[Problem] = [(PATH_KEY, msg + origin) for msg in path_problems]
    for split, n in (("train", spec.n_train), ("test", spec.n_test)):
        counts = report.class_counts.get(split)
        if counts is not None:
            problems += _count_problem(spec, split, n, counts, report.label_files[split])
        elif spec.source == "cifar10" and not path_problems:
            # the md5s prove the official batches, whose class counts are known without unpickling them;
            # a custom copy (checksums skipped) is counted from its labels, once per directory state
            try:
                counts = CIFAR10_CLASS_COUNTS[split] if verify_checksums else _cifar_class_counts(report, directory)[split]
            except DataFileError as exc:  # a batch that is a pickle but not a CIFAR-10 batch
                return problems + [(PATH_KEY, str(exc) + origin)]
            problems += _count_problem(spec, split, n, counts, _cifar_dir(directory))
    return problems


def _digits_count_problems(spec: DataSpec) -> list[Problem]:
    """scikit-learn's digits are one pool of 1,797 images split into train and test: their sum must fit
    the digits of the kept classes."""
    from ntkpipe.data.dataset import kept_classes
    from ntkpipe.data.digits import digits_pool

    _, labels = digits_pool()
    classes = kept_classes(spec)
    available = int(np.isin(labels, classes).sum()) if classes is not None else len(labels)
    need = spec.n_train + spec.n_test
    if need <= available:
        return []
    return [(("data", "n_train"), f"n_train + n_test = {need} exceeds the {available} digits of classes "
                                  f"{classes or 'all'}; lower them (or use mnist from local files)")]


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------


def _stat_key(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _candidates(directory: Path, source: str) -> list[Path]:
    """Every path whose state decides the outcome of a check of ``directory``."""
    if source == "mnist":
        names = [n for base in _files._MNIST_FILES.values() for n in (base, f"{base}.gz")]
        dirs = [directory, directory / "MNIST" / "raw", directory / "raw"]
    else:
        names = [*_files.CIFAR10_BATCH_MD5, CIFAR10_ARCHIVE]
        dirs = [directory, directory / CIFAR10_DIRNAME]
        if directory.name == CIFAR10_DIRNAME:
            dirs.append(directory.parent)
    return dirs + [d / n for d in dirs for n in names]


def _report(directory: Path, source: str) -> _DirReport:
    directory = Path(os.path.abspath(directory))
    key = (source, str(directory), tuple(_stat_key(p) for p in _candidates(directory, source)))
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    report = _check_mnist(directory) if source == "mnist" else _check_cifar(directory)
    with _lock:
        _cache[key] = report
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return report


def _checksums(report: _DirReport, directory: Path, source: str) -> list[str]:
    if report.checksum_problems is None:
        try:
            report.checksum_problems = _files.verify_checksums(directory, source)
        except DataFileError as exc:  # the directory vanished since the structure check
            return [str(exc)]
    return list(report.checksum_problems)


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------


def _origin_note(spec: DataSpec) -> str:
    if spec.path is not None and str(spec.path) != "":
        return ""
    env = os.environ.get(ENV_VAR, "")
    return (f" (data.path is not set, so the directory is ${ENV_VAR}/{spec.source} with "
            f"{ENV_VAR}={env})")


def _count_problem(spec: DataSpec, split: str, n: int, counts: np.ndarray, labels: Path) -> list[Problem]:
    classes = sorted(set(spec.classes)) if spec.classes is not None else list(range(len(counts)))
    per_class = [int(counts[c]) if 0 <= c < len(counts) else 0 for c in classes]
    available = sum(per_class)
    if n <= available:
        return []
    which = f"classes {spec.classes}" if spec.classes is not None else "all classes"
    detail = ", ".join(f"{c}: {k}" for c, k in zip(classes, per_class))
    fix = f"fix: lower data.n_{split} to at most {available}"
    if spec.classes is not None:
        fix += " or select more classes in data.classes"
    return [(("data", f"n_{split}"),
             f"data.n_{split} = {n} exceeds the {available} {split} images of {spec.source} "
             f"{which} in {labels} (per class {detail}); {fix}")]


# ---------------------------------------------------------------------------------------
# MNIST
# ---------------------------------------------------------------------------------------


def _check_mnist(directory: Path) -> _DirReport:
    report = _DirReport()
    try:
        paths = _mnist_paths(_mnist_dir(_require_dir(directory, "mnist")))
    except DataFileError as exc:
        report.problems.append(str(exc))
        return report
    for split in ("train", "test"):
        ipath, lpath = paths[(split, "images")], paths[(split, "labels")]
        dims = labels = None
        try:
            dims = _read_idx_header(ipath, _files._IDX_IMAGES_MAGIC, "images")
            _check_mnist_image_dims(ipath, dims)
        except DataFileError as exc:
            report.problems.append(str(exc))
        try:
            labels = _read_mnist_labels(lpath)
        except DataFileError as exc:
            report.problems.append(str(exc))
        if dims is None or labels is None:
            continue
        try:
            _check_mnist_counts(ipath, lpath, dims[0], labels.shape[0])
        except DataFileError as exc:
            report.problems.append(str(exc))
            continue
        report.class_counts[split] = np.bincount(labels, minlength=_files._NUM_CLASSES)
        report.label_files[split] = lpath
    return report


# ---------------------------------------------------------------------------------------
# CIFAR-10
# ---------------------------------------------------------------------------------------


def _check_cifar(directory: Path) -> _DirReport:
    report = _DirReport()
    try:
        paths = _cifar_paths(_cifar_dir(_require_dir(directory, "cifar10")))
    except DataFileError as exc:
        report.problems.append(str(exc))
        return report
    for path in paths.values():
        problem = _pickle_problem(path)
        if problem:
            report.problems.append(problem)
    return report


def _cifar_class_counts(report: _DirReport, directory: Path) -> dict[str, np.ndarray]:
    """Images per class of each split of the CIFAR-10 batches in ``directory``, read from their labels
    (kept in the directory's cached report)."""
    if not report.batch_counts:
        paths = _cifar_paths(_cifar_dir(directory))
        for split, names in (("train", _files._CIFAR_TRAIN), ("test", _files._CIFAR_TEST)):
            labels = np.concatenate([_files._load_cifar_batch(paths[name])[1] for name in names])
            report.batch_counts[split] = np.bincount(labels, minlength=_files._NUM_CLASSES)
    return report.batch_counts


def _pickle_problem(path: Path) -> str | None:
    """Cheap structural check of a CIFAR-10 batch: its first two and last bytes."""
    fix = _fix("cifar10", _cifar_root(path.parent))
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(2)
            if size:
                f.seek(-1, os.SEEK_END)
            tail = f.read(1)
    except OSError as exc:
        return f"{path}: expected a readable file, found an error ({exc}). {fix}"
    what = "a CIFAR-10 python batch (a pickle; the official ones start with bytes 0x80 0x02)"
    if size == 0:
        return f"{path}: expected {what}, found an empty file. {fix}"
    if head[:1] == b"\x80":
        protocol = head[1] if len(head) > 1 else None
        if protocol is None or not 2 <= protocol <= pickle.HIGHEST_PROTOCOL:
            return (f"{path}: expected {what}, found pickle protocol {protocol}, which this "
                    f"Python (highest protocol {pickle.HIGHEST_PROTOCOL}) cannot read. {fix}")
    elif head[:1] not in (b"(", b"}"):  # protocol 0 / 1 dict pickles
        hint = ""
        if head == b"\x1f\x8b":
            hint = " (gzip-compressed data: is this the archive? extract it with tar xzf)"
        return f"{path}: expected {what}, found a file starting with {head!r}{hint}. {fix}"
    if tail != b".":
        return (f"{path}: expected {what} ending with the pickle STOP byte '.', found "
                f"{tail!r} at the end of its {size} bytes; the file is truncated "
                f"(incomplete download or extraction?). {fix}")
    return None
