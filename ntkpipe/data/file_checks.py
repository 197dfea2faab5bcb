"""Validation-time checks of the data a study reads: its source's local files and, for sources that
draw from a fixed pool, whether there are enough examples (:attr:`Source.data_checks`).

:func:`data_file_problems` runs while a study is validated, i.e. every time Snakemake parses the
workflow, so it never reads image payloads: each file format's ``inspect`` checks the files'
structure (:class:`~ntkpipe.data.files.local.LocalFiles`; e.g. MNIST's IDX headers against the file
sizes, CIFAR-10's pickle start and STOP bytes) and may count the images of each class from the labels.
``n_train`` / ``n_test`` are checked against those counts, or against the official class counts when
the md5s show the official files (a custom copy, NTKPIPE_SKIP_CHECKSUMS=1, is counted from its
labels). With ``verify_checksums`` the md5 of the official files are compared -- about 0.02 s for
MNIST and 0.55 s for CIFAR-10 with its archive, from the page cache -- only when the structure is sound.

Results are cached per process, keyed by the resolved directory and the size, mtime and inode of
every file that could be read (and of the directories holding them), so several data specs on the
same directory cost one check.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ntkpipe.data.files.local import ENV_VAR, DirReport, LocalFiles, resolve_data_dir, verify_checksums
from ntkpipe.data.sources import SOURCES
from ntkpipe.errors import DataFileError

if TYPE_CHECKING:
    from ntkpipe.data.sources.base import DataOptions

__all__ = ["PATH_KEY", "clear_data_file_cache", "data_file_problems"]

Problem = tuple[tuple, str]
PATH_KEY = ("data", "path")
_CACHE_SIZE = 32

_cache: OrderedDict[tuple, DirReport] = OrderedDict()
_counts: dict[tuple, dict[str, np.ndarray]] = {}
_lock = threading.Lock()


def clear_data_file_cache() -> None:
    """Forget every cached directory check (tests; or after replacing files in place)."""
    with _lock:
        _cache.clear()
        _counts.clear()


def data_file_problems(spec: DataOptions, *, verify_checksums: bool) -> list[Problem]:
    """``(key path, message)`` pairs for the data of ``spec`` (empty = usable).

    A source without local files has only its ``data_checks`` (none: ``[]``). The directory is
    ``data.path``, else ``$NTKPIPE_DATA/<source>``. Missing or malformed files are reported at
    ``("data", "path")``; an ``n_train`` / ``n_test`` larger than the images of ``spec.classes`` at
    ``("data", "n_train")`` / ``("data", "n_test")``; with ``verify_checksums``, md5 mismatches at
    ``("data", "path")``. Each message names the file, what was expected, what was found and the fix.
    """
    source = SOURCES[spec.source]
    problems = source.data_checks(spec) if source.data_checks is not None else []
    if source.files is not None:
        problems += local_file_problems(spec, source.files, verify_checksums=verify_checksums)
    return problems


def local_file_problems(spec: DataOptions, files: LocalFiles, *, verify_checksums: bool) -> list[Problem]:
    """The problems of the local ``files`` that ``spec`` reads (see :func:`data_file_problems`)."""
    try:
        directory = resolve_data_dir(spec.path, files)
    except DataFileError as exc:
        return [(PATH_KEY, str(exc))]
    origin = _origin_note(spec)
    key, report = _report(directory, files)
    path_problems = list(report.problems)
    if verify_checksums and not report.problems:
        path_problems += _checksums(report, directory, files)
    problems: list[Problem] = [(PATH_KEY, msg + origin) for msg in path_problems]
    for split, n in (("train", spec.n_train), ("test", spec.n_test)):
        counts = report.class_counts.get(split)
        if counts is not None:
            problems += _count_problem(spec, split, n, counts, report.label_files[split])
        elif not path_problems and files.count_classes is not None:
            # the md5s prove the official files, whose class counts are known without reading them;
            # a custom copy (checksums skipped) is counted from its labels, once per directory state
            try:
                counts = (files.official_counts[split] if verify_checksums and files.official_counts is not None
                          else _counted(key, directory, files)[split])
            except DataFileError as exc:  # e.g. a batch that is a pickle but not a CIFAR-10 batch
                return problems + [(PATH_KEY, str(exc) + origin)]
            problems += _count_problem(spec, split, n, counts, report.label_files.get(split, directory))
    return problems


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------


def _stat_key(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _report(directory: Path, files: LocalFiles) -> tuple[tuple, DirReport]:
    directory = Path(os.path.abspath(directory))
    key = (files.name, str(directory), tuple(_stat_key(p) for p in files.candidates(directory)))
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return key, _cache[key]
    report = files.inspect(directory)
    with _lock:
        _cache[key] = report
        while len(_cache) > _CACHE_SIZE:
            dropped, _ = _cache.popitem(last=False)
            _counts.pop(dropped, None)
    return key, report


def _counted(key: tuple, directory: Path, files: LocalFiles) -> dict[str, np.ndarray]:
    """Images per class of each split, counted from the labels once per directory state."""
    if key not in _counts and files.count_classes is not None:
        _counts[key] = files.count_classes(directory)
    return _counts[key]


def _checksums(report: DirReport, directory: Path, files: LocalFiles) -> list[str]:
    if report.checksum_problems is None:
        try:
            report.checksum_problems = verify_checksums(directory, files)
        except DataFileError as exc:  # the directory vanished since the structure check
            return [str(exc)]
    return list(report.checksum_problems)


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------


def _origin_note(spec: DataOptions) -> str:
    if spec.path is not None and str(spec.path) != "":
        return ""
    env = os.environ.get(ENV_VAR, "")
    return (f" (data.path is not set, so the directory is ${ENV_VAR}/{spec.source} with "
            f"{ENV_VAR}={env})")


def _count_problem(spec: DataOptions, split: str, n: int, counts: np.ndarray, labels: Path) -> list[Problem]:
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
