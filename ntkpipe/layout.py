"""The two layouts of a study dataset, and how to select from either.

* **grid**: the sweep's points are the full product of its axes' values; every axis is a dimension.
* **runs**: the points are not a full product (a ``union`` of sub-grids that differ in an axis' values,
  e.g. a σ range per depth); the dataset has one entry per run along the dimension ``run``, and every
  axis is a coordinate along ``run``, so no variable has holes. Zarr cannot store a pandas MultiIndex:
  the store holds the plain coordinates and :func:`open_dataset` rebuilds the index ``run`` = (axis, …),
  with which ``ds.sel(depth=3)`` selects that sub-grid's runs and drops the level, and
  ``ds.sel(depth=3).unstack("run")`` is its dense grid (dense when the sub-grid is a full product).

:func:`select` and :func:`sub_grid` take either layout (indexed or not) and are what plots and
summaries use: ``sub_grid(ds, {"depth": 3})`` is the grid of the remaining axes for either.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import xarray as xr

from ntkpipe.errors import ResultError
from ntkpipe.store import read_store

RUN = "run"
RUN_ATTRS = {"long_name": "run", "description": "one entry per run of a union sweep: the index of its sweep axes' "
             "values (levels), so ds.sel(<axis>=<value>) selects a sub-grid's runs and .unstack('run') makes "
             "it a dense grid"}


def axis_order(values) -> list:
    """Distinct values in order of first appearance, numbers sorted ascending (a dimension's order)."""
    values = list(dict.fromkeys(np.asarray(values).tolist()))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        values = sorted(values)
    return values


def is_full_grid(axes: list[str], points: list[dict]) -> bool:
    """Whether ``points`` (distinct) are the full product of their axes' values."""
    return len(points) == int(np.prod([len(axis_order([p[a] for p in points])) for a in axes]))


def run_axes(ds: xr.Dataset) -> list[str]:
    """The axes of a runs-layout dataset: its coordinates along ``run`` (none for the grid layout)."""
    axes = [name for name, c in ds.coords.items() if c.dims == (RUN,) and name != RUN]
    return cast("list[str]", axes)  # ntkpipe names its coordinates by str


def _plain(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` without the ``run`` MultiIndex (its levels as plain coordinates)."""
    if RUN not in ds.indexes:
        return ds
    ds = ds.reset_index(RUN)
    return ds.assign_coords({a: (RUN, np.asarray(ds[a].values), ds[a].attrs) for a in run_axes(ds)})


def index_runs(ds: xr.Dataset, source: str | Path = "dataset") -> xr.Dataset:
    """Set the MultiIndex ``run`` = (axis, …) of a runs-layout dataset (others are returned as they are);
    ``source`` names the dataset in the error raised when two runs share every axis value."""
    if RUN not in ds.dims or isinstance(ds.indexes.get(RUN), pd.MultiIndex):
        return ds
    ds = ds.drop_vars(RUN, errors="ignore")  # a plain numbering of the runs says nothing
    axes = run_axes(ds)
    if len(axes) < 2:
        raise ResultError(f"{source}: a runs-layout dataset needs two or more axis coordinates along 'run', "
                          f"found {axes}; delete it and rerun the aggregation")
    ds = ds.set_xindex(axes)
    index = ds.indexes[RUN]
    if index.has_duplicates:
        raise ResultError(f"{source}: two runs share the axis values {dict(zip(axes, index[index.duplicated()][0]))}; "
                          "delete it and rerun the aggregation")
    ds[RUN].attrs.update(RUN_ATTRS)
    return ds


def open_dataset(path: str | Path) -> xr.Dataset:
    """A study dataset, checked like every store (:func:`ntkpipe.store.read_store`), with the ``run``
    MultiIndex set when it has the runs layout."""
    return index_runs(read_store(path), path)


def axis_values(ds: xr.Dataset, name: str) -> list:
    """The values of axis or dimension ``name`` in ``ds`` (either layout), in dimension order."""
    if name in ds.dims and name != RUN:
        return list(ds[name].values)
    return axis_order(ds[name].values)


def select(ds: xr.Dataset, where: dict) -> xr.Dataset:
    """Restrict to ``where``: axis: value keeps the runs at that value and drops the axis (a scalar
    coordinate remains), axis: [values] keeps the runs at any of them. Either layout."""
    if not where:
        return ds
    if RUN not in ds.dims:
        return ds.sel(where)
    ds = _plain(ds)
    axes = run_axes(ds)
    keep = np.ones(ds.sizes[RUN], bool)
    for axis, value in where.items():
        if axis in axes:
            keep &= np.isin(ds[axis].values, value if isinstance(value, list) else [value])
    ds = ds.isel({RUN: np.flatnonzero(keep)})
    scalars = {a: v for a, v in where.items() if a in axes and not isinstance(v, list)}
    ds = ds.drop_vars(list(scalars)).assign_coords({a: xr.Variable((), v, ds[a].attrs) for a, v in scalars.items()})
    others = {a: v for a, v in where.items() if a not in axes}
    return ds.sel(others) if others else ds


def sub_grid(ds: xr.Dataset, where: dict | None = None) -> xr.Dataset:
    """:func:`select` ``where``, then the remaining runs as a grid over the remaining axes (axes first,
    numbers ascending, labels in order of appearance). A grid-layout dataset is only selected; a
    runs-layout selection that is not a full product leaves NaN holes (``run_id`` "") like the grid."""
    ds = select(ds, where or {})
    if RUN not in ds.dims:
        return ds
    ds = _plain(ds)
    axes = run_axes(ds)
    order = {a: axis_order(ds[a].values) for a in axes}
    attrs = {a: ds[a].attrs for a in axes}
    if not axes:
        return ds.squeeze(RUN, drop=True)
    ds = ds.swap_dims({RUN: axes[0]}) if len(axes) == 1 else ds.set_index({RUN: axes}).unstack(RUN)
    ds = ds.reindex(order).transpose(*axes, ...)
    for a in axes:
        ds[a].attrs.update(attrs[a])
    if "run_id" in ds and ds["run_id"].dtype == object:
        ds["run_id"] = ds["run_id"].fillna("").astype(str)
    return ds


def final_value(var: xr.DataArray) -> xr.DataArray:
    """The last finite value along ``time`` (for series), else the variable itself."""
    if "time" not in var.dims:
        return var
    var = var.transpose(..., "time")
    values = var.values
    finite = np.isfinite(values)
    last = values.shape[-1] - 1 - np.argmax(finite[..., ::-1], axis=-1)
    picked = np.take_along_axis(values, last[..., None], axis=-1)[..., 0]
    return var.isel(time=-1, drop=True).copy(data=np.where(finite.any(-1), picked, np.nan))
