"""How close each theory is to the measurement it predicts, per run of a study dataset.

Every registered theory variable names the measured variable it predicts (``theory_of``). For each
such pair a dataset holds, ``<theory>_residual`` is the signed relative error per run (and per entry
of the theory's own dimensions besides ``time``, e.g. per ``mode``):

* scalar theory: (theory − measured) / |measured|, with a measured series read at its last finite
  value (e.g. ``alignment_theory`` against the final alignment);
* series theory: (theory − measured)(t*) / max_t |measured(t)|, at the time t* of the largest
  |theory − measured|, over the checkpoints where both are finite. Dividing by the curve's scale
  instead of |measured(t*)| keeps it finite where the measurement crosses 0 (r(t), growths);
* matrix theory (two own dims, e.g. a Gram over training points μ, ν): the relative Frobenius distance
  ‖theory − measured‖_F / ‖measured‖_F per run, over the entries both have (a union sub-grid's smaller
  matrices are NaN-padded), one number where entrywise ratios would divide by entries near 0.

It is NaN where the theory is (runs outside its assumptions) or the measurement's scale is 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np
import xarray as xr

from ntkpipe.layout import final_value
from ntkpipe.measure.registry import RESIDUAL_SUFFIX as SUFFIX
from ntkpipe.measure.registry import VARIABLES, residual_name, variable_attrs

MATRIX = 2
"""Own dims of a matrix theory (no ``time``), whose residual is a relative Frobenius distance."""


def residual_attrs(name: str) -> dict[str, str] | None:
    """Attrs of ``<theory>_residual`` (None if ``name`` is not the residual of a registered theory)."""
    theory = name.removesuffix(SUFFIX)
    variable = VARIABLES.get(theory)
    if name == theory or variable is None or not variable.theory_of:
        return None
    measured = variable.theory_of + "".join(f"[{d}={i}]" for d, i in variable.theory_at)
    if "time" in variable.dims:
        how = "(theory − measured)(t*) / max_t |measured| at the time t* of the largest |theory − measured|"
    elif len(variable.dims) == MATRIX:
        how = f"‖theory − measured‖_F / ‖measured‖_F over {', '.join(variable.dims)}"
    else:
        how = "(theory − measured) / |measured|" + (", measured at its last finite time"
                                                    if "time" in VARIABLES[variable.theory_of].dims else "")
    return {"long_name": f"relative residual of {variable.label}",
            "description": f"{theory} against {measured} per run: {how}; NaN where the theory is",
            "theory_of": variable.theory_of, "assumptions": variable_attrs(theory)["assumptions"]}


def theory_residuals(ds: xr.Dataset) -> xr.Dataset:
    """``<theory>_residual`` for every theory variable of ``ds`` whose measured variable it also holds."""
    out = {}
    for name in cast("Iterable[str]", ds.data_vars):  # ntkpipe names its variables by str
        variable = VARIABLES.get(name)
        if variable is None or variable.theory_of not in ds.data_vars:
            continue
        measured = ds[variable.theory_of]
        at = {d: i for d, i in variable.theory_at if d in measured.dims}
        measured = measured.sel(at, drop=True)
        theory = ds[name].astype(np.float64)
        if "time" in theory.dims:
            out[residual_name(name)] = _series_residual(theory, measured.astype(np.float64))
        elif len(variable.dims) == MATRIX:
            out[residual_name(name)] = _matrix_residual(theory, measured.astype(np.float64), variable.dims)
        else:
            reference = final_value(measured).astype(np.float64)
            out[residual_name(name)] = _relative(theory - reference, abs(reference))
    return xr.Dataset(out)


def _matrix_residual(theory: xr.DataArray, measured: xr.DataArray, dims) -> xr.DataArray:
    both = np.isfinite(theory) & np.isfinite(measured)
    distance = (((theory - measured) ** 2).where(both).sum(dims)) ** 0.5
    scale = ((measured**2).where(both).sum(dims)) ** 0.5
    return _relative(distance, scale)


def _relative(difference: xr.DataArray, scale: xr.DataArray) -> xr.DataArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (difference / scale).where(scale > 0)


def _series_residual(theory: xr.DataArray, measured: xr.DataArray) -> xr.DataArray:
    theory, measured = xr.broadcast(theory, measured)
    theory, measured = theory.transpose(..., "time"), measured.transpose(..., "time")
    difference = (theory - measured).values
    both = np.isfinite(difference)
    worst = np.argmax(np.where(both, np.abs(difference), -1.0), axis=-1)[..., None]
    at_worst = np.take_along_axis(difference, worst, axis=-1)[..., 0]
    scale = np.max(np.where(both, np.abs(measured.values), -1.0), axis=-1)
    dims = theory.dims[:-1]
    coords = {d: theory[d] for d in dims}
    residual = _relative(xr.DataArray(at_worst, dims=dims, coords=coords),
                         xr.DataArray(scale, dims=dims, coords=coords))
    return residual.where(xr.DataArray(both.any(-1), dims=dims, coords=coords))
