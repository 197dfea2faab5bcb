"""Loaders for local copies of MNIST and CIFAR-10, in pure numpy.

ntkpipe never downloads anything; point it at files you already have, either with an
explicit ``data.path`` or with the ``NTKPIPE_DATA`` environment variable (which is joined
with the dataset name: ``$NTKPIPE_DATA/mnist``, ``$NTKPIPE_DATA/cifar10``).

MNIST uses LeCun's IDX format (http://yann.lecun.com/exdb/mnist/): a big-endian header
of a 4-byte magic number ``0x0000TTNN`` (``TT`` = element type, ``0x08`` = unsigned byte;
``NN`` = number of dimensions) followed by ``NN`` big-endian uint32 sizes, then the raw
row-major payload.  Images are ``0x00000803`` (n, 28, 28), labels ``0x00000801`` (n,).
Each of the four files may be plain or gzipped (``.gz``, as distributed).

CIFAR-10 uses Krizhevsky's "python version" batches
(https://www.cs.toronto.edu/~kriz/cifar.html): ``cifar-10-batches-py/data_batch_1..5``
and ``test_batch``, each a pickled dict with ``b"data"`` (n, 3072) uint8, channel-major
(1024 red, 1024 green, 1024 blue values, each a row-major 32x32 plane), and
``b"labels"`` (n integers in 0..9).  Images are returned NHWC: (n, 32, 32, 3).  The
batches are unpickled with a restricted unpickler that resolves only numpy's ndarray
reconstruction helpers, so a tampered file cannot run code.

Every problem raises :class:`ntkpipe.errors.DataFileError` naming the file, what was
expected, what was found and how to fix it.
"""

from __future__ import annotations

import gzip
import logging
import os
import pickle
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ntkpipe.data.md5_cache import file_md5
from ntkpipe.errors import DataFileError

__all__ = [
    "CIFAR10_ARCHIVE",
    "CIFAR10_ARCHIVE_MD5",
    "CIFAR10_BATCH_MD5",
    "CIFAR10_DIRNAME",
    "DATASETS",
    "ENV_VAR",
    "MNIST_GZ_MD5",
    "describe_expected_files",
    "load_cifar10",
    "load_mnist",
    "resolve_data_dir",
    "verify_checksums",
]

log = logging.getLogger(__name__)

ENV_VAR = "NTKPIPE_DATA"
DATASETS = ("mnist", "cifar10")

# ---------------------------------------------------------------------------------------
# Official file tables
# ---------------------------------------------------------------------------------------

MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
# torchvision.datasets.MNIST.resources (md5 of the distributed .gz files).
MNIST_GZ_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
# (split, kind) -> base file name (without .gz)
_MNIST_FILES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
_IDX_IMAGES_MAGIC = 0x00000803
_IDX_LABELS_MAGIC = 0x00000801
_MNIST_SHAPE = (28, 28)

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_DIRNAME = "cifar-10-batches-py"
# torchvision.datasets.CIFAR10.tgz_md5 (the official archive).
CIFAR10_ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
# torchvision.datasets.CIFAR10.train_list / test_list (md5 of the extracted batches).
CIFAR10_BATCH_MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}
_CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_TEST = ("test_batch",)
_CIFAR_HW = (32, 32)
_CIFAR_ROW = 3 * 32 * 32
_NUM_CLASSES = 10


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------


def _check_dataset(dataset: str) -> str:
    if dataset not in DATASETS:
        raise DataFileError(
            f"unknown dataset {dataset!r}: expected one of {', '.join(DATASETS)}; "
            "fix the dataset name in the study spec"
        )
    return dataset


def _fix(dataset: str, directory: Path | None = None) -> str:
    where = f"in {directory}" if directory is not None else "in one directory"
    if dataset == "mnist":
        return (
            "fix: download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
            "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from "
            f"{MNIST_MIRRORS[0]} (mirror of {MNIST_MIRRORS[1]}) and place them {where} "
            f"(gzipped or not), or set data.path / {ENV_VAR} (which means "
            f"${ENV_VAR}/mnist) to a directory that holds them"
        )
    return (
        f"fix: download {CIFAR10_ARCHIVE} (python version) from "
        f"https://www.cs.toronto.edu/~kriz/cifar.html ({CIFAR10_URL}), extract it with "
        f"`tar xzf {CIFAR10_ARCHIVE}` {where} so that {CIFAR10_DIRNAME}/data_batch_1 "
        f"exists there, or set data.path / {ENV_VAR} (which means ${ENV_VAR}/cifar10) to "
        f"that directory or to {CIFAR10_DIRNAME} itself"
    )


def describe_expected_files(dataset: str) -> list[str]:
    """One line per file ``dataset`` needs, for error messages and docs."""
    _check_dataset(dataset)
    if dataset == "mnist":
        return [
            "train-images-idx3-ubyte[.gz]  training images, IDX magic 0x00000803, "
            "uint8 (60000, 28, 28)",
            "train-labels-idx1-ubyte[.gz]  training labels, IDX magic 0x00000801, "
            "uint8 (60000,) in 0..9",
            "t10k-images-idx3-ubyte[.gz]   test images, IDX magic 0x00000803, "
            "uint8 (10000, 28, 28)",
            "t10k-labels-idx1-ubyte[.gz]   test labels, IDX magic 0x00000801, "
            "uint8 (10000,) in 0..9",
        ]
    lines = [
        f"{CIFAR10_DIRNAME}/{name}  pickled dict: b'data' uint8 (10000, 3072), "
        "b'labels' 10000 ints in 0..9"
        for name in _CIFAR_TRAIN + _CIFAR_TEST
    ]
    lines.append(
        f"{CIFAR10_ARCHIVE}  optional, next to {CIFAR10_DIRNAME}; only used to verify "
        f"the md5 {CIFAR10_ARCHIVE_MD5}"
    )
    return lines


def _expected_block(dataset: str) -> str:
    return "\n".join(f"  {line}" for line in describe_expected_files(dataset))


# ---------------------------------------------------------------------------------------
# Locating data
# ---------------------------------------------------------------------------------------


def resolve_data_dir(path: str | os.PathLike[str] | None, dataset: str) -> Path:
    """The directory to read ``dataset`` from.

    ``path`` (``~`` expanded) when given, else ``$NTKPIPE_DATA/<dataset>``; the directory
    is not required to exist yet (the loaders check and explain).
    """
    _check_dataset(dataset)
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    env = os.environ.get(ENV_VAR, "")
    if env:
        return Path(env).expanduser() / dataset
    raise DataFileError(
        f"no data directory for {dataset}: expected data.path in the study spec or the "
        f"{ENV_VAR} environment variable, found neither. fix: set data.path to the "
        f"directory holding the {dataset} files, or export {ENV_VAR}=/some/dir and put "
        f"them in /some/dir/{dataset}. Expected files:\n{_expected_block(dataset)}"
    )


def _require_dir(directory: str | os.PathLike[str], dataset: str) -> Path:
    d = Path(directory).expanduser()
    if not d.exists():
        raise DataFileError(
            f"{d}: expected a directory with the {dataset} files, found nothing at that "
            f"path. {_fix(dataset, d)}. Expected files:\n{_expected_block(dataset)}"
        )
    if not d.is_dir():
        raise DataFileError(
            f"{d}: expected a directory with the {dataset} files, found a file. "
            f"{_fix(dataset)}"
        )
    return d


def _mnist_dir(directory: Path) -> Path:
    """``directory`` itself, or torchvision's ``MNIST/raw`` below it if only that has files."""
    def has_any(d: Path) -> bool:
        return any((d / n).exists() or (d / f"{n}.gz").exists() for n in _MNIST_FILES.values())

    if has_any(directory):
        return directory
    for sub in (directory / "MNIST" / "raw", directory / "raw"):
        if sub.is_dir() and has_any(sub):
            return sub
    return directory


def _mnist_paths(directory: Path) -> dict[tuple[str, str], Path]:
    """Path of each MNIST file (the .gz preferred: it is the one with an official md5)."""
    found: dict[tuple[str, str], Path] = {}
    missing: list[str] = []
    for key, name in _MNIST_FILES.items():
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
            f"{_fix('mnist', directory)}"
        )
    return found


def _cifar_dir(directory: Path) -> Path:
    """The ``cifar-10-batches-py`` directory: ``directory`` itself or its child."""
    if directory.name == CIFAR10_DIRNAME or (directory / "data_batch_1").exists():
        return directory
    child = directory / CIFAR10_DIRNAME
    if child.is_dir():
        return child
    if (directory / CIFAR10_ARCHIVE).is_file():
        raise DataFileError(
            f"{directory}: expected the extracted {CIFAR10_DIRNAME}/ directory, found "
            f"only the archive {directory / CIFAR10_ARCHIVE}. fix: run "
            f"`tar xzf {CIFAR10_ARCHIVE}` in {directory}"
        )
    return directory


def _cifar_root(batch_dir: Path) -> Path:
    """Where the archive is (to be) extracted: the parent of ``cifar-10-batches-py``."""
    return batch_dir.parent if batch_dir.name == CIFAR10_DIRNAME else batch_dir


def _cifar_paths(batch_dir: Path) -> dict[str, Path]:
    missing = [n for n in _CIFAR_TRAIN + _CIFAR_TEST if not (batch_dir / n).is_file()]
    if missing:
        present = sorted(p.name for p in batch_dir.iterdir())[:20]
        where = "" if batch_dir.name == CIFAR10_DIRNAME else f" (or a {CIFAR10_DIRNAME}/ directory)"
        raise DataFileError(
            f"{batch_dir}: expected the CIFAR-10 python batches{where}, missing "
            f"{len(missing)}: {', '.join(missing)}; found "
            f"{present or 'an empty directory'}. {_fix('cifar10', _cifar_root(batch_dir))}"
        )
    return {n: batch_dir / n for n in _CIFAR_TRAIN + _CIFAR_TEST}


# ---------------------------------------------------------------------------------------
# Checksums
# ---------------------------------------------------------------------------------------


def verify_checksums(
    directory: str | os.PathLike[str], dataset: str, *, notes: list[str] | None = None
) -> list[str]:
    """Compare the files' md5 with the official table; one line per problem (empty = ok).

    MNIST: the four ``.gz`` files against torchvision's ``MNIST.resources``; a file
    present only uncompressed has no official md5 and is skipped with a note.
    CIFAR-10: the six batches against torchvision's ``CIFAR10.train_list``/``test_list``,
    and ``cifar-10-python.tar.gz`` against the official archive md5 when the archive is
    present (else skipped with a note).  Notes (skipped checks) are appended to ``notes``
    when given and logged at INFO level; they are not problems.
    """
    _check_dataset(dataset)
    d = _require_dir(directory, dataset)
    problems: list[str] = []
    skipped: list[str] = []

    def check(path: Path, want: str, what: str) -> None:
        got = file_md5(path)
        if got != want:
            problems.append(
                f"{path}: expected md5 {want} ({what}), found {got}; the file is corrupt, "
                "incomplete or a different version. fix: delete it and download it again"
            )

    if dataset == "mnist":
        d = _mnist_dir(d)
        for name in _MNIST_FILES.values():
            gz, plain = d / f"{name}.gz", d / name
            if gz.is_file():
                check(gz, MNIST_GZ_MD5[gz.name], "torchvision MNIST.resources")
            elif plain.is_file():
                skipped.append(
                    f"{plain}: not checked, the official md5 covers only {gz.name}"
                )
            else:
                problems.append(f"{gz}: expected the file (or {name}), found nothing. "
                                f"{_fix('mnist', d)}")
    else:
        try:
            batch_dir = _cifar_dir(d)
        except DataFileError as exc:  # only the archive is there: check it, report the rest
            problems.append(str(exc))
            batch_dir = d / CIFAR10_DIRNAME
        for name, want in CIFAR10_BATCH_MD5.items():
            p = batch_dir / name
            if not batch_dir.is_dir():
                break
            if p.is_file():
                check(p, want, "torchvision CIFAR10 batch table")
            else:
                problems.append(f"{p}: expected the batch file, found nothing. "
                                f"{_fix('cifar10', _cifar_root(batch_dir))}")
        archives = [c / CIFAR10_ARCHIVE for c in dict.fromkeys((d, _cifar_root(batch_dir)))]
        archive = next((a for a in archives if a.is_file()), None)
        if archive is not None:
            check(archive, CIFAR10_ARCHIVE_MD5, "official cifar-10-python.tar.gz")
        else:
            skipped.append(
                f"{archives[0]}: archive absent, its md5 {CIFAR10_ARCHIVE_MD5} not checked"
            )
    for note in skipped:
        log.info("checksum skipped: %s", note)
    if notes is not None:
        notes.extend(skipped)
    return problems


def _verify_or_raise(directory: Path, dataset: str) -> None:
    problems = verify_checksums(directory, dataset)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise DataFileError(
            f"{directory}: {len(problems)} checksum problem(s) in the {dataset} files:\n{lines}"
        )


# ---------------------------------------------------------------------------------------
# MNIST (IDX)
# ---------------------------------------------------------------------------------------


def _read_error(path: Path, dataset: str, exc: BaseException) -> DataFileError:
    kind = "a complete gzip stream" if path.suffix == ".gz" else "a readable file"
    return DataFileError(
        f"{path}: expected {kind}, found an error reading it ({exc}); the file is "
        f"probably truncated or corrupt. {_fix(dataset, path.parent)}"
    )


def _read_bytes(path: Path, dataset: str, limit: int = -1) -> bytes:
    """The (decompressed, for ``.gz``) content of ``path``; only its first ``limit`` bytes if >= 0."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read(limit)
        with open(path, "rb") as f:
            return f.read(limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, dataset, exc) from exc


def _gzip_isize(path: Path) -> int:
    """ISIZE of the (last) gzip member: the uncompressed size mod 2**32 (RFC 1952, sec. 2.3.1)."""
    try:
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return struct.unpack("<I", f.read(4))[0]
    except OSError as exc:  # shorter than 4 bytes, or unreadable
        raise _read_error(path, "mnist", exc) from exc


def _gzip_uncompressed_size(path: Path) -> int:
    """Decompress ``path`` in chunks and count the bytes (without keeping them)."""
    n = 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                n += len(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, "mnist", exc) from exc
    return n


def _parse_idx_header(data: bytes, path: Path, magic_want: int, what: str) -> tuple[int, ...]:
    """The dimension sizes declared by the IDX header at the start of ``data``.

    ``data`` may be the whole (decompressed) file or only its first ``4 + 4 * ndim`` bytes.
    """
    fix = _fix("mnist", path.parent)
    want_ndim = magic_want & 0xFF
    if len(data) < 4:
        raise DataFileError(
            f"{path}: expected an IDX {what} file (at least a 4-byte magic number), found "
            f"{len(data)} bytes. {fix}"
        )
    (magic,) = struct.unpack(">I", data[:4])
    if magic != magic_want:
        hint = ""
        if data[:2] == b"\x1f\x8b":
            hint = " (the file is gzip-compressed: give it a .gz suffix)"
        elif magic == _IDX_IMAGES_MAGIC ^ _IDX_LABELS_MAGIC ^ magic_want:
            hint = " (this is the other kind of IDX file: images and labels swapped?)"
        raise DataFileError(
            f"{path}: expected an IDX {what} file with magic number 0x{magic_want:08x} "
            f"(unsigned bytes, {want_ndim} dimension(s)), found 0x{magic:08x}{hint}. {fix}"
        )
    header = _idx_header_size(magic_want)
    if len(data) < header:
        raise DataFileError(
            f"{path}: expected a {header}-byte IDX header ({want_ndim} dimension sizes), "
            f"found only {len(data)} bytes; the file is truncated. {fix}"
        )
    return struct.unpack(f">{want_ndim}I", data[4:header])


def _idx_header_size(magic: int) -> int:
    return 4 + 4 * (magic & 0xFF)


def _idx_count(dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _check_idx_payload(path: Path, dims: tuple[int, ...], payload: int, what: str) -> int:
    """Check that ``payload`` bytes follow the header declaring ``dims``; the element count."""
    fix = _fix("mnist", path.parent)
    count = _idx_count(dims)
    shape = "x".join(map(str, dims))
    if payload < count:
        raise DataFileError(
            f"{path}: header declares {what} of shape {shape} ({count} bytes), found only "
            f"{payload} bytes of data; the file is truncated (incomplete download?). {fix}"
        )
    if payload > count:
        raise DataFileError(
            f"{path}: header declares {what} of shape {shape} ({count} bytes), found "
            f"{payload} bytes of data ({payload - count} extra); the file is corrupt or "
            f"its header is wrong. {fix}"
        )
    if dims[0] == 0:
        raise DataFileError(f"{path}: expected at least one item, found a header declaring 0. {fix}")
    return count


def _read_idx(path: Path, magic_want: int, what: str) -> np.ndarray:
    data = _read_bytes(path, "mnist")
    dims = _parse_idx_header(data, path, magic_want, what)
    header = _idx_header_size(magic_want)
    count = _check_idx_payload(path, dims, len(data) - header, what)
    return np.frombuffer(data, dtype=np.uint8, count=count, offset=header).reshape(dims).copy()


def _read_idx_header(path: Path, magic_want: int, what: str) -> tuple[int, ...]:
    """Check an IDX file's header and size like :func:`_read_idx`, without reading its payload.

    A plain file's size comes from the file system.  A ``.gz`` file has only its header
    bytes decompressed; its size is the gzip trailer's ISIZE (uncompressed size mod 2**32),
    compared with the header's.  Only when they differ is the stream decompressed (and
    discarded) to tell a truncated stream from a short payload, and to accept a
    multi-member gzip whose last ISIZE covers only its last member.
    """
    header = _idx_header_size(magic_want)
    dims = _parse_idx_header(_read_bytes(path, "mnist", header), path, magic_want, what)
    if path.suffix != ".gz":
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise _read_error(path, "mnist", exc) from exc
        _check_idx_payload(path, dims, size - header, what)
        return dims
    declared = header + _idx_count(dims)
    if _gzip_isize(path) != declared % (1 << 32):
        _check_idx_payload(path, dims, _gzip_uncompressed_size(path) - header, what)
    elif dims[0] == 0:
        _check_idx_payload(path, dims, 0, what)
    return dims


def _check_mnist_image_dims(path: Path, dims: tuple[int, ...]) -> None:
    if tuple(dims[1:]) != _MNIST_SHAPE:
        raise DataFileError(
            f"{path}: expected MNIST images of 28x28 pixels, found "
            f"{dims[1]}x{dims[2]}; this is not MNIST. {_fix('mnist', path.parent)}"
        )


def _read_mnist_labels(path: Path) -> np.ndarray:
    """A labels file, read whole (60 kB for MNIST) and checked to hold classes 0..9."""
    y = _read_idx(path, _IDX_LABELS_MAGIC, "labels")
    if y.max() >= _NUM_CLASSES:
        bad = int(np.flatnonzero(y >= _NUM_CLASSES)[0])
        raise DataFileError(
            f"{path}: expected labels in 0..9, found {int(y[bad])} at index {bad} "
            f"(max {int(y.max())}); the file is corrupt or not MNIST. {_fix('mnist', path.parent)}"
        )
    return y


def _check_mnist_counts(ipath: Path, lpath: Path, n_images: int, n_labels: int) -> None:
    if n_images != n_labels:
        raise DataFileError(
            f"{ipath} and {lpath}: expected as many labels as images, found "
            f"{n_images} images and {n_labels} labels; the two files come from "
            f"different downloads or one is damaged. {_fix('mnist', ipath.parent)}"
        )


def _load_mnist_split(paths: dict[tuple[str, str], Path], split: str) -> tuple[np.ndarray, np.ndarray]:
    ipath, lpath = paths[(split, "images")], paths[(split, "labels")]
    x = _read_idx(ipath, _IDX_IMAGES_MAGIC, "images")
    _check_mnist_image_dims(ipath, x.shape)
    y = _read_mnist_labels(lpath)
    _check_mnist_counts(ipath, lpath, x.shape[0], y.shape[0])
    return x, y


def load_mnist(directory: str | os.PathLike[str], *, verify: bool = False) -> dict[str, np.ndarray]:
    """MNIST from the four IDX files (plain or ``.gz``) in ``directory``.

    Returns ``x_train`` (n, 28, 28) uint8, ``y_train`` (n,) uint8, ``x_test``, ``y_test``.
    ``directory`` may also be a torchvision root holding ``MNIST/raw``.  With ``verify``
    the ``.gz`` files' md5 are checked first (see :func:`verify_checksums`).
    """
    d = _mnist_dir(_require_dir(directory, "mnist"))
    paths = _mnist_paths(d)
    if verify:
        _verify_or_raise(d, "mnist")
    x_train, y_train = _load_mnist_split(paths, "train")
    x_test, y_test = _load_mnist_split(paths, "test")
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


# ---------------------------------------------------------------------------------------
# CIFAR-10 (python pickles)
# ---------------------------------------------------------------------------------------


def _latin1_encode(obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` limited to what Python 3 protocol-2 pickles of bytes use."""
    if not isinstance(obj, str) or encoding != "latin1" or errors != "strict":
        raise pickle.UnpicklingError(
            f"_codecs.encode is only allowed as encode(str, 'latin1'), got encoding {encoding!r}"
        )
    return obj.encode("latin1")


def _numpy_helper(module: str, name: str) -> Any:
    import importlib

    return getattr(importlib.import_module(module), name)


def _allowed_globals() -> dict[tuple[str, str], Any]:
    reconstruct = np.ndarray.__reduce__(np.empty(0, dtype=np.uint8))[0]
    try:  # numpy >= 2
        frombuffer = _numpy_helper("numpy._core.numeric", "_frombuffer")
    except (ImportError, AttributeError):  # pragma: no cover - numpy 1.x
        frombuffer = _numpy_helper("numpy.core.numeric", "_frombuffer")
    return {
        # ndarray.__reduce__ (pickle protocols 0-4); numpy 1.x and 2.x spellings.
        ("numpy.core.multiarray", "_reconstruct"): reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): reconstruct,
        # ndarray.__reduce_ex__ for pickle protocol 5.
        ("numpy.core.numeric", "_frombuffer"): frombuffer,
        ("numpy._core.numeric", "_frombuffer"): frombuffer,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        # Python 3 protocol-2 pickles spell bytes as _codecs.encode(str, 'latin1').
        ("_codecs", "encode"): _latin1_encode,
    }


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Unpickler that resolves numpy's ndarray reconstruction helpers and nothing else."""

    _allowed: dict[tuple[str, str], Any] | None = None

    def find_class(self, module: str, name: str) -> Any:
        if _ArrayOnlyUnpickler._allowed is None:
            _ArrayOnlyUnpickler._allowed = _allowed_globals()
        try:
            return _ArrayOnlyUnpickler._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: only numpy array "
                "reconstruction is allowed in a data file"
            ) from None


def _unpickle(path: Path) -> Any:
    fix = _fix("cifar10", _cifar_root(path.parent))
    try:
        with open(path, "rb") as f:
            # encoding="bytes": the official batches are Python 2 pickles whose str
            # keys (and numpy's raw buffers) must stay bytes.
            return _ArrayOnlyUnpickler(f, encoding="bytes").load()
    except pickle.UnpicklingError as exc:
        if "refusing to load global" in str(exc):
            raise DataFileError(
                f"{path}: expected a CIFAR-10 batch (a pickled dict of numpy arrays and "
                f"lists), found a pickle that {exc}; the file may be malicious and was not "
                f"loaded. {fix}"
            ) from exc
        raise DataFileError(
            f"{path}: expected a CIFAR-10 python batch (pickle), found data that does not "
            f"unpickle ({exc}); the file is corrupt or not a CIFAR-10 batch. {fix}"
        ) from exc
    except OSError as exc:
        raise DataFileError(f"{path}: expected a readable file, found an error ({exc}). {fix}") from exc
    except Exception as exc:  # truncated/garbled pickles raise many types
        raise DataFileError(
            f"{path}: expected a CIFAR-10 python batch (pickle), found data that does not "
            f"unpickle ({type(exc).__name__}: {exc}); the file is truncated or corrupt. {fix}"
        ) from exc


def _get(batch: dict, key: str) -> Any:
    for k in (key.encode(), key):
        if k in batch:
            return batch[k]
    raise KeyError(key)


def _load_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    fix = _fix("cifar10", _cifar_root(path.parent))
    batch = _unpickle(path)
    if not isinstance(batch, dict):
        raise DataFileError(
            f"{path}: expected a pickled dict with b'data' and b'labels', found "
            f"{type(batch).__name__}. {fix}"
        )
    try:
        data, labels = _get(batch, "data"), _get(batch, "labels")
    except KeyError as exc:
        raise DataFileError(
            f"{path}: expected keys b'data' and b'labels', found keys "
            f"{sorted(map(repr, batch))}; missing {exc.args[0]!r} (a CIFAR-100 batch uses "
            f"b'fine_labels'). {fix}"
        ) from None
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != _CIFAR_ROW or data.shape[0] == 0:
        found = (f"{type(data).__name__} {data.dtype} {data.shape}" if isinstance(data, np.ndarray)
                 else type(data).__name__)
        raise DataFileError(
            f"{path}: expected b'data' to be a uint8 array of shape (n, {_CIFAR_ROW}) with "
            f"n > 0, found {found}. {fix}"
        )
    try:
        y = np.asarray(labels)
    except Exception:  # noqa: BLE001 - ragged or exotic objects
        y = np.asarray([None])
    if y.ndim != 1 or y.shape[0] != data.shape[0] or not np.issubdtype(y.dtype, np.integer):
        raise DataFileError(
            f"{path}: expected b'labels' to be {data.shape[0]} integers (one per image row), "
            f"found {type(labels).__name__} with dtype {y.dtype} and shape {y.shape}. {fix}"
        )
    y = y.astype(np.int64)
    bad = np.flatnonzero((y < 0) | (y >= _NUM_CLASSES))
    if bad.size:
        raise DataFileError(
            f"{path}: expected labels in 0..9, found {int(y[bad[0]])} at index "
            f"{int(bad[0])}; the file is corrupt or not CIFAR-10. {fix}"
        )
    x = data.reshape(-1, 3, *_CIFAR_HW).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), y.astype(np.uint8)


def load_cifar10(directory: str | os.PathLike[str], *, verify: bool = False) -> dict[str, np.ndarray]:
    """CIFAR-10 from the python batches.

    ``directory`` is ``cifar-10-batches-py`` itself or its parent.  Returns ``x_train``
    (n, 32, 32, 3) uint8 NHWC, ``y_train`` (n,) uint8, ``x_test``, ``y_test``.  With
    ``verify`` the batches' (and archive's, if present) md5 are checked first.
    """
    d = _require_dir(directory, "cifar10")
    batch_dir = _cifar_dir(d)
    paths = _cifar_paths(batch_dir)
    if verify:
        _verify_or_raise(d, "cifar10")
    out: dict[str, np.ndarray] = {}
    for split, names in (("train", _CIFAR_TRAIN), ("test", _CIFAR_TEST)):
        parts = [_load_cifar_batch(paths[n]) for n in names]
        out[f"x_{split}"] = np.concatenate([p[0] for p in parts])
        out[f"y_{split}"] = np.concatenate([p[1] for p in parts])
    return {k: out[k] for k in ("x_train", "y_train", "x_test", "y_test")}
