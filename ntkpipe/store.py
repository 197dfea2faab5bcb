"""Result stores: xarray Datasets in zarr, written to a temporary path and renamed into place.

The zarr format is pinned to 2 with consolidated metadata: with zarr-python 3 the v3 format has no
specified string dtype (coordinates such as ``model_kind`` warn as unstable) and v3 consolidated
metadata is outside its spec. Every store's attrs hold ``config`` (the resolved JSON it was made
from), ``id`` and ``ntkpipe_version``; :func:`read_store` checks them.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import xarray as xr

from ntkpipe.errors import ResultError

ZARR_FORMAT = 2


def write_store(ds: xr.Dataset, path: str | Path, *, config: dict, store_id: str) -> Path:
    """Write ``ds`` to ``path`` atomically, with provenance attrs; returns the path."""
    from ntkpipe import __version__

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.assign_attrs(config=json.dumps(config, sort_keys=True), id=store_id, ntkpipe_version=__version__)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        ds.to_zarr(tmp, mode="w-", zarr_format=ZARR_FORMAT, consolidated=True)
        if path.exists():
            old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return path


def read_store(path: str | Path, *, expect_id: str | None = None) -> xr.Dataset:
    """Open a store lazily, checking it is complete and (optionally) that its id matches."""
    path = Path(path)
    if not path.exists():
        raise ResultError(f"{path}: no such result store; run the workflow to make it")
    try:
        ds = xr.open_zarr(path, zarr_format=ZARR_FORMAT, consolidated=True)
    except Exception as err:  # a truncated store surfaces as any of zarr's errors
        raise ResultError(f"{path}: not a readable zarr store ({err}); delete it and rerun") from err
    if "id" not in ds.attrs or "config" not in ds.attrs:
        raise ResultError(f"{path}: store lacks provenance attrs (id, config); delete it and rerun")
    if expect_id is not None and ds.attrs["id"] != expect_id:
        raise ResultError(f"{path}: holds id {ds.attrs['id']}, expected {expect_id}; delete it and rerun")
    return ds

