"""A dataset as the files of a zarr v2 store with consolidated metadata ((relative path, bytes) pairs),
made in this thread: the bytes ``Dataset.to_zarr(zarr_format=2, consolidated=True)`` writes, without
zarr-python's I/O; and such a store's files decoded back (:func:`dataset_from_files`).

zarr-python 3 runs every metadata and chunk write as a coroutine on its own event-loop thread and
waits for it: about 55 round trips for a run store, each a handoff of the GIL, which in the main job
(two jobs as threads of one process) waits for the other job's thread. A run store took 0.26 s to
write there. :func:`dataset_files` encodes the common case itself — numpy-backed boolean, integer
and float variables with no encoding of their own (what the jobs compute) — with xarray's own CF
encoding (``encode_zarr_variable``, ``encode_dataset_coordinates``), zarr's chunk guess, and the
Blosc codec zarr uses for format 2; anything else (strings, dates, variables read from a store with
their encoding; study datasets, whose coordinates hold strings) goes through xarray and zarr into
memory (the compressed files beside the dataset, which is in memory already). Both give the same
bytes (``tests/test_store.py`` compares them file by file), so readers see one format.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
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


def dataset_files(ds: xr.Dataset) -> Iterator[tuple[str, bytes]]:
    """The files (relative path, bytes) of ``ds`` written as a zarr v2 store with consolidated metadata,
    each array's chunks compressed as they are taken (so that a large array's compressed copy is never
    held whole)."""
    files = _encoded_files(ds)
    return files if files is not None else iter(zarr_files(ds).items())


def zarr_files(ds: xr.Dataset) -> dict[str, bytes]:
    """The same through xarray and zarr-python, into memory (the general path, and the reference)."""
    from zarr.storage import MemoryStore

    store: dict = {}
    ds.to_zarr(MemoryStore(store), mode="w-", zarr_format=2, consolidated=True)
    return {key: buffer.to_bytes() for key, buffer in store.items()}


def _dumps(value) -> bytes:
    return json.dumps(value, indent=2, allow_nan=True).encode()


def _chunk_files(name: str, data: np.ndarray, chunks: tuple[int, ...], fill, compressor) -> Iterator[tuple[str, bytes]]:
    """The chunk files of one array: C order, edge chunks padded with the fill value, and (zarr's
    ``write_empty_chunks=False``) none for a chunk that equals the fill value everywhere."""
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
        yield f"{name}/{key}", bytes(compressor.encode(np.ascontiguousarray(block)))


def _encoded_files(ds: xr.Dataset) -> Iterator[tuple[str, bytes]] | None:
    """:func:`dataset_files` for the common case (see the module docstring), or None outside it
    (decided before any file is made)."""
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
    arrays = []
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
        arrays.append((str(name), data, chunks, fill))
    consolidated = {".zgroup": {"zarr_format": 2}, ".zattrs": root_attrs}
    for name in sorted(meta):
        consolidated[f"{name}/.zattrs"] = meta[name][".zattrs"]
        consolidated[f"{name}/.zarray"] = meta[name][".zarray"]

    def files() -> Iterator[tuple[str, bytes]]:
        for name, data, chunks, fill in arrays:
            yield f"{name}/.zarray", _dumps(meta[name][".zarray"])
            yield f"{name}/.zattrs", _dumps(meta[name][".zattrs"])
            yield from _chunk_files(name, data, chunks, fill, compressor)
        yield ".zgroup", _dumps({"zarr_format": 2})
        yield ".zattrs", _dumps(root_attrs)
        yield ".zmetadata", json.dumps({"metadata": consolidated, "zarr_consolidated_format": 1}, allow_nan=True).encode()

    return files()


def _decoded(meta: dict, read, name: str) -> np.ndarray | None:
    """The array ``name`` of a zarr v2 store from its ``.zarray`` ``meta`` and ``read(key) -> bytes | None``
    (None: the chunk was not written, so it is the fill value); None where this is not the format
    :func:`dataset_files` writes (then zarr reads it)."""
    import numcodecs

    dtype = np.dtype(meta["dtype"])
    if (dtype.kind not in KINDS or meta.get("filters") or meta.get("order") != "C" or meta.get("zarr_format") != 2
            or meta.get("dimension_separator", ".") != "." or meta.get("compressor") is None):
        return None
    if meta["fill_value"] not in (None, "NaN") or (meta["fill_value"] == "NaN" and dtype.kind != "f"):
        return None
    fill = None if meta["fill_value"] is None else np.nan
    shape, chunks = tuple(meta["shape"]), tuple(meta["chunks"])
    codec = numcodecs.get_codec(dict(meta["compressor"]))
    out = np.full(shape, 0 if fill is None else fill, dtype)
    grid = product(*(range(math.ceil(s / c)) for s, c in zip(shape, chunks, strict=True))) if shape else [()]
    for index in grid:
        data = read(f"{name}/{'.'.join(map(str, index)) if index else '0'}")
        if data is None:
            continue
        block = np.frombuffer(codec.decode(data), dtype).reshape(chunks)  # pyright: ignore[reportCallIssue, reportArgumentType]  # numcodecs returns a buffer, unannotated
        where = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, chunks, shape, strict=True))
        out[where] = block[tuple(slice(0, w.stop - w.start) for w in where)]
    return out


def dataset_from_files(consolidated: dict, read) -> xr.Dataset | None:
    """The dataset ``xr.open_zarr(store, consolidated=True).load()`` gives, decoded in this thread from
    the store's consolidated metadata (``.zmetadata``'s ``metadata``) and ``read(key) -> bytes | None``;
    None where an array is not in the format :func:`dataset_files` writes. The variables carry the
    encoding zarr's reader gives them (chunks, compressors, CF ``dtype``, ``_FillValue``), so a dataset
    written back is written as before."""
    import numcodecs
    import xarray as xr
    from xarray.backends.store import StoreBackendEntrypoint

    _Arrays = _arrays_store()
    from xarray.backends.zarr import DIMENSION_KEY

    variables = {}
    for key, meta in consolidated.items():
        if not key.endswith("/.zarray"):
            continue
        name = key.removesuffix("/.zarray")
        data = _decoded(meta, read, name)
        if data is None or "/" in name:
            return None
        attrs = {k: v for k, v in consolidated.get(f"{name}/.zattrs", {}).items() if not k.lower().startswith("_nc")}
        dims = tuple(attrs.pop(DIMENSION_KEY))
        if meta["fill_value"] is not None:  # NaN (:func:`_decoded`), as zarr gives it: a scalar of the dtype
            attrs["_FillValue"] = data.dtype.type(np.nan)
        chunks = tuple(meta["chunks"])
        encoding = {"chunks": chunks, "preferred_chunks": dict(zip(dims, chunks, strict=True)),
                    "compressors": (numcodecs.get_codec(dict(meta["compressor"])),), "filters": (), "shards": None}
        variables[name] = xr.Variable(dims, data, attrs, encoding)
    attrs = {k: v for k, v in consolidated.get(".zattrs", {}).items() if not k.lower().startswith("_nc")}
    ds = StoreBackendEntrypoint().open_dataset(_Arrays(variables, attrs)).load()
    to_index = {name: coord.variable for name, coord in ds.coords.items() if coord.dims == (name,)}
    return ds.assign_coords(xr.Coordinates(to_index))  # the default indexes, as xr.open_dataset adds them


def _arrays_store():
    """An xarray data store that holds decoded arrays and attrs, for xarray's own CF decoding."""
    from xarray.backends.common import AbstractDataStore

    class Arrays(AbstractDataStore):
        def __init__(self, variables: dict, attrs: dict):
            self.variables, self.attrs = variables, attrs

        def load(self):  # pyright: ignore[reportIncompatibleMethodOverride]  # xarray annotates no return
            return self.variables, self.attrs

    return Arrays
