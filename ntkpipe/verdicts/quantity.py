"""A claim's quantity read from a study dataset (either layout, :mod:`ntkpipe.layout`): ``where`` selected,
then every dim but ``keep`` reduced, time first (each run's series to one number): by ``reduce``, else time
→ its last finite value and others → the mean of their finite values."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ntkpipe.claims.record import QuantitySpec
from ntkpipe.layout import final_value, run_axes, sub_grid

REDUCERS = {"mean": lambda v, d: v.mean(d), "median": lambda v, d: v.median(d), "min": lambda v, d: v.min(d),
            "max": lambda v, d: v.max(d), "initial": lambda v, d: v.isel({d: 0}, drop=True),
            "final": lambda v, d: final_value(v)}
"""Reduction name → f(variable, dim): NaN skipped (final: the last finite time)."""


def read_quantity(ds: xr.Dataset, q: QuantitySpec | float, keep: str | None = None) -> xr.DataArray:
    """``q`` in ``ds``: one number, or numbers along ``keep`` (a number is itself)."""
    if not isinstance(q, QuantitySpec):
        return xr.DataArray(float(q))
    axes = set(ds.dims) | set(run_axes(ds))
    grid = sub_grid(ds, {k: v for k, v in q.where.items() if k in axes and k not in ds[q.variable].dims})
    values = grid[q.variable]
    own = {k: v for k, v in q.where.items() if k in values.dims}
    if own:
        values = values.sel(own)
    if not np.issubdtype(values.dtype, np.number):
        raise ValueError(f"{q.variable!r} holds {values.dtype} values, not numbers")
    values = values.astype(float)
    for dim in sorted((d for d in values.dims if d != keep), key=lambda d: d != "time"):  # time first, per run
        how = q.reduce.get(str(dim), "final" if dim == "time" else "mean")
        values = REDUCERS[how](values, dim)
    return values.drop_vars([c for c in values.coords if c not in values.dims])
