"""MNIST in LeCun's IDX format: the four files (plain or gzipped, as distributed), read, checked and
md5-verified against torchvision's table.

Images are ``0x00000803`` (n, 28, 28), labels ``0x00000801`` (n,) in 0..9. A directory may hold the
files itself or, as torchvision lays them out, in ``MNIST/raw`` below it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ntkpipe.data.files import idx
from ntkpipe.data.files.local import (
    ENV_VAR,
    DirReport,
    LocalFiles,
    md5_problem,
    require_dir,
    verify_or_raise,
)
from ntkpipe.errors import DataFileError

MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
GZ_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
"""torchvision.datasets.MNIST.resources (md5 of the distributed .gz files)."""
FILES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
"""(split, kind) → base file name (without .gz)."""
IMAGE = (28, 28, 1)
CLASSES = 10
EXPECTED = (
    "train-images-idx3-ubyte[.gz]  training images, IDX magic 0x00000803, uint8 (60000, 28, 28)",
    "train-labels-idx1-ubyte[.gz]  training labels, IDX magic 0x00000801, uint8 (60000,) in 0..9",
    "t10k-images-idx3-ubyte[.gz]   test images, IDX magic 0x00000803, uint8 (10000, 28, 28)",
    "t10k-labels-idx1-ubyte[.gz]   test labels, IDX magic 0x00000801, uint8 (10000,) in 0..9",
)


def fix(directory: Path | None = None) -> str:
    where = f"in {directory}" if directory is not None else "in one directory"
    return (
        "fix: download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from "
        f"{MIRRORS[0]} (mirror of {MIRRORS[1]}) and place them {where} "
        f"(gzipped or not), or set data.path / {ENV_VAR} (which means "
        f"${ENV_VAR}/mnist) to a directory that holds them"
    )


def find_dir(directory: Path) -> Path:
    """``directory`` itself, or torchvision's ``MNIST/raw`` below it if only that has files."""
    def has_any(d: Path) -> bool:
        return any((d / n).exists() or (d / f"{n}.gz").exists() for n in FILES.values())

    if has_any(directory):
        return directory
    for sub in (directory / "MNIST" / "raw", directory / "raw"):
        if sub.is_dir() and has_any(sub):
            return sub
    return directory


def paths(directory: Path) -> dict[tuple[str, str], Path]:
    """Path of each MNIST file (the .gz preferred: it is the one with an official md5)."""
    found: dict[tuple[str, str], Path] = {}
    missing: list[str] = []
    for key, name in FILES.items():
        gz, plain = directory / f"{name}.gz", directory / name
        if gz.is_file():
            found[key] = gz
        elif plain.is_file():
            found[key] = plain
        else:
            missing.append(f"{name}.gz (or {name})")
    if missing:
        present = sorted(p.name for p in directory.iterdir())[:20]
        raise DataFileError(
            f"{directory}: expected the four MNIST IDX files, missing "
            f"{len(missing)}: {', '.join(missing)}; found {present or 'an empty directory'}. "
            f"{fix(directory)}"
        )
    return found


def check_image_dims(path: Path, dims: tuple[int, ...]) -> None:
    if tuple(dims[1:]) != IMAGE[:2]:
        raise DataFileError(
            f"{path}: expected MNIST images of 28x28 pixels, found "
            f"{dims[1]}x{dims[2]}; this is not MNIST. {fix(path.parent)}"
        )


def read_labels(path: Path) -> np.ndarray:
    """A labels file, read whole (60 kB for MNIST) and checked to hold classes 0..9."""
    y = idx.read_idx(path, idx.LABELS_MAGIC, "labels", fix(path.parent))
    if y.max() >= CLASSES:
        bad = int(np.flatnonzero(y >= CLASSES)[0])
        raise DataFileError(
            f"{path}: expected labels in 0..9, found {int(y[bad])} at index {bad} "
            f"(max {int(y.max())}); the file is corrupt or not MNIST. {fix(path.parent)}"
        )
    return y


def check_counts(ipath: Path, lpath: Path, n_images: int, n_labels: int) -> None:
    if n_images != n_labels:
        raise DataFileError(
            f"{ipath} and {lpath}: expected as many labels as images, found "
            f"{n_images} images and {n_labels} labels; the two files come from "
            f"different downloads or one is damaged. {fix(ipath.parent)}"
        )


def _load_split(found: dict[tuple[str, str], Path], split: str) -> tuple[np.ndarray, np.ndarray]:
    ipath, lpath = found[(split, "images")], found[(split, "labels")]
    x = idx.read_idx(ipath, idx.IMAGES_MAGIC, "images", fix(ipath.parent))
    check_image_dims(ipath, x.shape)
    y = read_labels(lpath)
    check_counts(ipath, lpath, x.shape[0], y.shape[0])
    return x, y


def load_mnist(directory: str | os.PathLike[str], *, verify: bool = False) -> dict[str, np.ndarray]:
    """MNIST from the four IDX files (plain or ``.gz``) in ``directory``.

    Returns ``x_train`` (n, 28, 28) uint8, ``y_train`` (n,) uint8, ``x_test``, ``y_test``.
    ``directory`` may also be a torchvision root holding ``MNIST/raw``.  With ``verify``
    the ``.gz`` files' md5 are checked first (see :func:`checksums`).
    """
    d = find_dir(require_dir(directory, FORMAT))
    found = paths(d)
    if verify:
        verify_or_raise(d, FORMAT)
    x_train, y_train = _load_split(found, "train")
    x_test, y_test = _load_split(found, "test")
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def checksums(directory: Path) -> tuple[list[str], list[str]]:
    """The four ``.gz`` files against torchvision's ``MNIST.resources``; a file present only
    uncompressed has no official md5 and is skipped with a note."""
    d = find_dir(directory)
    problems: list[str] = []
    skipped: list[str] = []
    for name in FILES.values():
        gz, plain = d / f"{name}.gz", d / name
        if gz.is_file():
            problems += filter(None, [md5_problem(gz, GZ_MD5[gz.name], "torchvision MNIST.resources")])
        elif plain.is_file():
            skipped.append(f"{plain}: not checked, the official md5 covers only {gz.name}")
        else:
            problems.append(f"{gz}: expected the file (or {name}), found nothing. {fix(d)}")
    return problems, skipped


def inspect(directory: Path) -> DirReport:
    """Each IDX file's header (magic number, dimension sizes) against its size: the file size of a
    plain file, the gzip trailer's ISIZE of a ``.gz`` (only the header bytes are decompressed). The
    label files (60 kB + 10 kB) are read whole, to check that labels and images agree in number and to
    count the images of each class."""
    report = DirReport()
    try:
        found = paths(find_dir(require_dir(directory, FORMAT)))
    except DataFileError as exc:
        report.problems.append(str(exc))
        return report
    for split in ("train", "test"):
        ipath, lpath = found[(split, "images")], found[(split, "labels")]
        dims = labels = None
        try:
            dims = idx.read_idx_header(ipath, idx.IMAGES_MAGIC, "images", fix(ipath.parent))
            check_image_dims(ipath, dims)
        except DataFileError as exc:
            report.problems.append(str(exc))
        try:
            labels = read_labels(lpath)
        except DataFileError as exc:
            report.problems.append(str(exc))
        if dims is None or labels is None:
            continue
        try:
            check_counts(ipath, lpath, dims[0], labels.shape[0])
        except DataFileError as exc:
            report.problems.append(str(exc))
            continue
        report.class_counts[split] = np.bincount(labels, minlength=CLASSES)
        report.label_files[split] = lpath
    return report


def candidates(directory: Path) -> list[Path]:
    """Every path whose state decides :func:`inspect` of ``directory``."""
    names = [n for base in FILES.values() for n in (base, f"{base}.gz")]
    dirs = [directory, directory / "MNIST" / "raw", directory / "raw"]
    return dirs + [d / n for d in dirs for n in names]


FORMAT = LocalFiles("mnist", IMAGE, CLASSES, EXPECTED, fix, load_mnist, inspect, checksums, candidates)
