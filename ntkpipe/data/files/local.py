"""Local copies of a dataset in its official format: the format's record, and finding the directory.

ntkpipe never downloads anything; point it at files you already have, either with an explicit
``data.path`` or with the ``NTKPIPE_DATA`` environment variable (which is joined with the dataset
name: ``$NTKPIPE_DATA/mnist``, ``$NTKPIPE_DATA/cifar10``). Every problem raises
:class:`ntkpipe.errors.DataFileError` naming the file, what was expected, what was found and the fix.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ntkpipe.data.md5_cache import file_md5
from ntkpipe.errors import DataFileError

log = logging.getLogger(__name__)

ENV_VAR = "NTKPIPE_DATA"


@dataclass
class DirReport:
    """What a structural check of one directory found (cached by :mod:`ntkpipe.data.file_checks`):
    ``problems`` (messages), the images per class of each split when the check read the labels
    (``class_counts``), where each split's labels are (``label_files``: a file or a directory), and
    the md5 problems once they were checked (``checksum_problems``)."""

    problems: list[str] = field(default_factory=list)
    class_counts: dict[str, np.ndarray] = field(default_factory=dict)
    label_files: dict[str, Path] = field(default_factory=dict)
    checksum_problems: list[str] | None = None


@dataclass(frozen=True)
class LocalFiles:
    """A dataset's official file format.

    ``name``: the directory name under ``$NTKPIPE_DATA``. ``image``: the (H, W, channels) of its images;
    ``classes``: its labels are 0 … classes−1. ``expected``: one line per file it needs (messages and
    docs); ``fix(directory)``: how to get the files there. ``load(directory)``: ``x_train`` (n, H, W[, C])
    uint8, ``y_train`` (n,), ``x_test``, ``y_test``. ``inspect(directory)``: a structural check that reads
    no image payload (run at every validation). ``checksums(directory)``: (problems, skipped checks) of
    the md5s against the official table. ``candidates(directory)``: every path whose state decides
    ``inspect`` (the cache key). Where ``inspect`` does not count the images of each class:
    ``official_counts``, those of the official files (valid once their md5s match), and
    ``count_classes(directory)``, which counts them from the labels (slow: for a custom copy).
    """

    name: str
    image: tuple[int, int, int]
    classes: int
    expected: tuple[str, ...]
    fix: Callable[[Path | None], str]
    load: Callable[[Path], dict[str, np.ndarray]]
    inspect: Callable[[Path], DirReport]
    checksums: Callable[[Path], tuple[list[str], list[str]]]
    candidates: Callable[[Path], list[Path]]
    official_counts: dict[str, np.ndarray] | None = None
    count_classes: Callable[[Path], dict[str, np.ndarray]] | None = None

    def expected_block(self) -> str:
        return "\n".join(f"  {line}" for line in self.expected)


def resolve_data_dir(path: str | os.PathLike[str] | None, files: LocalFiles) -> Path:
    """The directory to read ``files`` from.

    ``path`` (``~`` expanded) when given, else ``$NTKPIPE_DATA/<name>``; the directory is not required
    to exist yet (the loaders check and explain).
    """
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    env = os.environ.get(ENV_VAR, "")
    if env:
        return Path(env).expanduser() / files.name
    raise DataFileError(
        f"no data directory for {files.name}: expected data.path in the study spec or the "
        f"{ENV_VAR} environment variable, found neither. fix: set data.path to the "
        f"directory holding the {files.name} files, or export {ENV_VAR}=/some/dir and put "
        f"them in /some/dir/{files.name}. Expected files:\n{files.expected_block()}"
    )


def require_dir(directory: str | os.PathLike[str], files: LocalFiles) -> Path:
    """``directory`` (``~`` expanded), which must exist and be a directory."""
    d = Path(directory).expanduser()
    if not d.exists():
        raise DataFileError(
            f"{d}: expected a directory with the {files.name} files, found nothing at that "
            f"path. {files.fix(d)}. Expected files:\n{files.expected_block()}"
        )
    if not d.is_dir():
        raise DataFileError(
            f"{d}: expected a directory with the {files.name} files, found a file. "
            f"{files.fix(None)}"
        )
    return d


def verify_checksums(directory: str | os.PathLike[str], files: LocalFiles, *,
                     notes: list[str] | None = None) -> list[str]:
    """Compare the files' md5 with the official table; one line per problem (empty = ok).

    Notes (checks skipped, e.g. a file present only uncompressed has no official md5) are appended to
    ``notes`` when given and logged at INFO level; they are not problems.
    """
    problems, skipped = files.checksums(require_dir(directory, files))
    for note in skipped:
        log.info("checksum skipped: %s", note)
    if notes is not None:
        notes.extend(skipped)
    return problems


def verify_or_raise(directory: Path, files: LocalFiles) -> None:
    problems = verify_checksums(directory, files)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise DataFileError(
            f"{directory}: {len(problems)} checksum problem(s) in the {files.name} files:\n{lines}"
        )


def md5_problem(path: Path, want: str, what: str) -> str | None:
    """The message for a file whose md5 is not ``want`` (the official ``what``), else None."""
    got = file_md5(path)
    if got == want:
        return None
    return (f"{path}: expected md5 {want} ({what}), found {got}; the file is corrupt, "
            "incomplete or a different version. fix: delete it and download it again")
