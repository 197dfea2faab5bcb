"""A dataset as the files of a zarr v2 store with consolidated metadata (name -> bytes), made in this
thread: the bytes ``Dataset.to_zarr(zarr_format=2, consolidated=True)`` writes, without zarr-python's
I/O.

zarr-python 3 runs every metadata and chunk write as a coroutine on its own event-loop thread and
waits for it: about 55 round trips for a run store, each a handoff of the GIL, which in the main job
(two jobs as threads of one process) waits for the other job's thread. A run store took 0.26 s to
write there. :func:`dataset_files` encodes the common case itself — numpy-backed boolean, integer
and float variables with no encoding of their own (what the jobs compute) — with xarray's own CF
encoding (``encode_zarr_variable``, ``encode_dataset_coordinates``), zarr's chunk guess, and the
Blosc codec zarr uses for format 2; anything else (strings, dates, variables read from a store with
their encoding) goes through xarray and zarr into memory. Both give the same bytes
(``tests/test_store.py`` compares them file by file), so readers see one format.
"""

from __future__ import annotations

import json
import math
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import xarray as xr

BLOSC = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
"""The compressor zarr-python gives a format-2 array by default (``{"id": "blosc"}``, numcodecs' defaults)."""
KINDS = "biuf"
"""The dtype kinds encoded here: boolean, signed and unsigned integer, float."""
DROPPED_ENCODING = {"source", "original_shape", "preferred_chunks"}
"""Encoding keys xarray drops when writing: a variable with any other is written through zarr."""


def dataset_files(ds: xr.Dataset) -> dict[str, bytes]:
    """The files (relative path -> bytes) of ``ds`` written as a zarr v2 store with consolidated metadata."""
    files = _encoded_files(ds)
    return files if files is not None else zarr_files(ds)


def zarr_files(ds: xr.Dataset) -> dict[str, bytes]:
    """The same through xarray and zarr-python, into memory (the general path, and the reference)."""
    from zarr.storage import MemoryStore

    store: dict = {}
    ds.to_zarr(MemoryStore(store), mode="w-", zarr_format=2, consolidated=True)
    return {key: buffer.to_bytes() for key, buffer in store.items()}


def _dumps(value) -> bytes:
    return json.dumps(value, indent=2, allow_nan=True).encode()


def _chunk_files(name: str, data: np.ndarray, chunks: tuple[int, ...], fill, compressor) -> dict[str, bytes]:
    """The chunk files of one array: C order, edge chunks padded with the fill value, and (zarr's
    ``write_empty_chunks=False``) none for a chunk that equals the fill value everywhere."""
    out = {}
    if data.ndim == 0:
        grid: list[tuple[int, ...]] = [()]
    else:
        grid = list(product(*(range(math.ceil(s / c)) for s, c in zip(data.shape, chunks, strict=True))))
    empty = np.zeros((), data.dtype) if fill is None else np.asarray(fill, data.dtype)
    for index in grid:
        block = data[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks, strict=True))]
        if block.shape != chunks:
            padded = np.full(chunks, empty, data.dtype)
            padded[tuple(slice(0, n) for n in block.shape)] = block
            block = padded
        if np.array_equal(block, np.broadcast_to(empty, block.shape), equal_nan=data.dtype.kind == "f"):
            continue
        key = ".".join(map(str, index)) if index else "0"
        out[f"{name}/{key}"] = bytes(compressor.encode(np.ascontiguousarray(block)))
    return out


def _encoded_files(ds: xr.Dataset) -> dict[str, bytes] | None:
    """:func:`dataset_files` for the common case (see the module docstring), or None outside it."""
    from numcodecs import Blosc
    from xarray import conventions
    from xarray.backends.zarr import DIMENSION_KEY, encode_zarr_attr_value, encode_zarr_variable
    from zarr.core.chunk_grids import _guess_chunks  # zarr's "auto" chunks for format 2 (the test holds it to zarr)

    if any(set(v.encoding) - DROPPED_ENCODING for v in ds.variables.values()):
        return None
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    compressor = Blosc(cname=BLOSC["cname"], clevel=BLOSC["clevel"], shuffle=BLOSC["shuffle"],
                       blocksize=BLOSC["blocksize"])
    root_attrs = {k: encode_zarr_attr_value(v) for k, v in attrs.items()}
    meta: dict[str, dict] = {}
    files: dict[str, bytes] = {}
    for name, variable in variables.items():
        if not isinstance(variable.data, np.ndarray) or variable.dtype.kind not in KINDS or "/" in str(name):
            return None
        encoded = encode_zarr_variable(variable, name=name, zarr_format=2)
        data = encoded.data
        if not isinstance(data, np.ndarray) or data.dtype.kind not in KINDS or 0 in data.shape:
            return None
        var_attrs = dict(encoded.attrs)
        fill = var_attrs.pop("_FillValue", None)
        if fill is None and data.dtype.kind == "f":
            fill = np.nan
        if fill is not None and not (data.dtype.kind == "f" and np.isnan(fill)):
            return None
        chunks = tuple(int(c) for c in _guess_chunks(data.shape, data.dtype.itemsize)) if data.ndim else ()
        zattrs = {k: encode_zarr_attr_value(v) for k, v in var_attrs.items()} | {DIMENSION_KEY: list(encoded.dims)}
        zarray = {"shape": list(data.shape), "chunks": list(chunks), "dtype": data.dtype.str,
                  "fill_value": None if fill is None else "NaN", "order": "C", "filters": None,
                  "dimension_separator": ".", "compressor": BLOSC, "zarr_format": 2}
        meta[str(name)] = {".zattrs": zattrs, ".zarray": zarray}
        files[f"{name}/.zarray"] = _dumps(zarray)
        files[f"{name}/.zattrs"] = _dumps(zattrs)
        files.update(_chunk_files(str(name), data, chunks, fill, compressor))
    consolidated = {".zgroup": {"zarr_format": 2}, ".zattrs": root_attrs}
    for name in sorted(meta):
        consolidated[f"{name}/.zattrs"] = meta[name][".zattrs"]
        consolidated[f"{name}/.zarray"] = meta[name][".zarray"]
    files[".zgroup"] = _dumps({"zarr_format": 2})
    files[".zattrs"] = _dumps(root_attrs)
    files[".zmetadata"] = json.dumps({"metadata": consolidated, "zarr_consolidated_format": 1}, allow_nan=True).encode()
    return files
