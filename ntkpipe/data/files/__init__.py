"""Local copies of MNIST and CIFAR-10 in their official formats, read in pure numpy; ntkpipe never
downloads anything.

One module per job: :mod:`~ntkpipe.data.files.local` (a format's record, finding the directory from
``data.path`` or ``$NTKPIPE_DATA``, md5 verification), :mod:`~ntkpipe.data.files.idx` (LeCun's IDX
format), :mod:`~ntkpipe.data.files.safe_pickle` (unpickling without running code), and one per
dataset: :mod:`~ntkpipe.data.files.mnist`, :mod:`~ntkpipe.data.files.cifar10`. Below, the same by
dataset name. Every problem raises :class:`ntkpipe.errors.DataFileError` naming the file, what was
expected, what was found and how to fix it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ntkpipe.data.files import cifar10, local, mnist
from ntkpipe.data.files.cifar10 import load_cifar10
from ntkpipe.data.files.local import ENV_VAR, LocalFiles
from ntkpipe.data.files.mnist import load_mnist
from ntkpipe.errors import DataFileError

FORMATS = {files.name: files for files in (mnist.FORMAT, cifar10.FORMAT)}
DATASETS = tuple(FORMATS)
MNIST_GZ_MD5 = mnist.GZ_MD5
CIFAR10_ARCHIVE = cifar10.ARCHIVE
CIFAR10_ARCHIVE_MD5 = cifar10.ARCHIVE_MD5
CIFAR10_BATCH_MD5 = cifar10.BATCH_MD5
CIFAR10_DIRNAME = cifar10.DIRNAME

__all__ = [
    "CIFAR10_ARCHIVE",
    "CIFAR10_ARCHIVE_MD5",
    "CIFAR10_BATCH_MD5",
    "CIFAR10_DIRNAME",
    "DATASETS",
    "ENV_VAR",
    "FORMATS",
    "MNIST_GZ_MD5",
    "describe_expected_files",
    "load_cifar10",
    "load_mnist",
    "resolve_data_dir",
    "verify_checksums",
]


def file_format(dataset: str) -> LocalFiles:
    """The file format of ``dataset`` (mnist, cifar10)."""
    if dataset not in FORMATS:
        raise DataFileError(
            f"unknown dataset {dataset!r}: expected one of {', '.join(DATASETS)}; "
            "fix the dataset name in the study spec"
        )
    return FORMATS[dataset]


def describe_expected_files(dataset: str) -> list[str]:
    """One line per file ``dataset`` needs, for error messages and docs."""
    return list(file_format(dataset).expected)


def resolve_data_dir(path: str | os.PathLike[str] | None, dataset: str) -> Path:
    """The directory to read ``dataset`` from: ``path`` (``~`` expanded) when given, else
    ``$NTKPIPE_DATA/<dataset>`` (see :func:`ntkpipe.data.files.local.resolve_data_dir`)."""
    return local.resolve_data_dir(path, file_format(dataset))


def verify_checksums(directory: str | os.PathLike[str], dataset: str, *, notes: list[str] | None = None) -> list[str]:
    """Compare the files' md5 with the official table; one line per problem (empty = ok). MNIST: the four
    ``.gz`` files (:func:`ntkpipe.data.files.mnist.checksums`); CIFAR-10: the six batches and the archive
    when present (:func:`ntkpipe.data.files.cifar10.checksums`). Skipped checks go to ``notes``."""
    return local.verify_checksums(directory, file_format(dataset), notes=notes)
