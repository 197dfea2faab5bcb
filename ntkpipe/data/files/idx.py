"""LeCun's IDX format (http://yann.lecun.com/exdb/mnist/), plain or gzipped, in pure numpy.

A big-endian header of a 4-byte magic number ``0x0000TTNN`` (``TT`` = element type, ``0x08`` =
unsigned byte; ``NN`` = number of dimensions) followed by ``NN`` big-endian uint32 sizes, then the raw
row-major payload. Every reader takes ``fix``, the advice appended to its errors.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from ntkpipe.errors import DataFileError

IMAGES_MAGIC = 0x00000803
"""uint8 images (n, H, W)."""
LABELS_MAGIC = 0x00000801
"""uint8 labels (n,)."""


def read_error(path: Path, fix: str, exc: BaseException) -> DataFileError:
    kind = "a complete gzip stream" if path.suffix == ".gz" else "a readable file"
    return DataFileError(
        f"{path}: expected {kind}, found an error reading it ({exc}); the file is "
        f"probably truncated or corrupt. {fix}"
    )


def read_bytes(path: Path, fix: str, limit: int = -1) -> bytes:
    """The (decompressed, for ``.gz``) content of ``path``; only its first ``limit`` bytes if >= 0."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read(limit)
        with open(path, "rb") as f:
            return f.read(limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise read_error(path, fix, exc) from exc


def gzip_isize(path: Path, fix: str) -> int:
    """ISIZE of the (last) gzip member: the uncompressed size mod 2**32 (RFC 1952, sec. 2.3.1)."""
    try:
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return struct.unpack("<I", f.read(4))[0]
    except OSError as exc:  # shorter than 4 bytes, or unreadable
        raise read_error(path, fix, exc) from exc


def gzip_uncompressed_size(path: Path, fix: str) -> int:
    """Decompress ``path`` in chunks and count the bytes (without keeping them)."""
    n = 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                n += len(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise read_error(path, fix, exc) from exc
    return n


def header_size(magic: int) -> int:
    return 4 + 4 * (magic & 0xFF)


def parse_header(data: bytes, path: Path, magic_want: int, what: str, fix: str) -> tuple[int, ...]:
    """The dimension sizes declared by the IDX header at the start of ``data``.

    ``data`` may be the whole (decompressed) file or only its first ``4 + 4 * ndim`` bytes.
    """
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
        elif magic == IMAGES_MAGIC ^ LABELS_MAGIC ^ magic_want:
            hint = " (this is the other kind of IDX file: images and labels swapped?)"
        raise DataFileError(
            f"{path}: expected an IDX {what} file with magic number 0x{magic_want:08x} "
            f"(unsigned bytes, {want_ndim} dimension(s)), found 0x{magic:08x}{hint}. {fix}"
        )
    header = header_size(magic_want)
    if len(data) < header:
        raise DataFileError(
            f"{path}: expected a {header}-byte IDX header ({want_ndim} dimension sizes), "
            f"found only {len(data)} bytes; the file is truncated. {fix}"
        )
    return struct.unpack(f">{want_ndim}I", data[4:header])


def _count(dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64))


def check_payload(path: Path, dims: tuple[int, ...], payload: int, what: str, fix: str) -> int:
    """Check that ``payload`` bytes follow the header declaring ``dims``; the element count."""
    count = _count(dims)
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


def read_idx(path: Path, magic_want: int, what: str, fix: str) -> np.ndarray:
    """The whole array of an IDX file, checked against its header."""
    data = read_bytes(path, fix)
    dims = parse_header(data, path, magic_want, what, fix)
    header = header_size(magic_want)
    count = check_payload(path, dims, len(data) - header, what, fix)
    return np.frombuffer(data, dtype=np.uint8, count=count, offset=header).reshape(dims).copy()


def read_idx_header(path: Path, magic_want: int, what: str, fix: str) -> tuple[int, ...]:
    """Check an IDX file's header and size like :func:`read_idx`, without reading its payload.

    A plain file's size comes from the file system.  A ``.gz`` file has only its header
    bytes decompressed; its size is the gzip trailer's ISIZE (uncompressed size mod 2**32),
    compared with the header's.  Only when they differ is the stream decompressed (and
    discarded) to tell a truncated stream from a short payload, and to accept a
    multi-member gzip whose last ISIZE covers only its last member.
    """
    header = header_size(magic_want)
    dims = parse_header(read_bytes(path, fix, header), path, magic_want, what, fix)
    if path.suffix != ".gz":
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise read_error(path, fix, exc) from exc
        check_payload(path, dims, size - header, what, fix)
        return dims
    declared = header + _count(dims)
    if gzip_isize(path, fix) != declared % (1 << 32):
        check_payload(path, dims, gzip_uncompressed_size(path, fix) - header, what, fix)
    elif dims[0] == 0:
        check_payload(path, dims, 0, what, fix)
    return dims
