"""What the training and final jobs share: a run's final measurements, and measured values as a dataset.

Both jobs compute a final measurement through :func:`final_values` from the same inputs (the final
job rebuilds the trajectory from the run store, :mod:`ntkpipe.train.final_state`), so its values do
not depend on which job computed it. A diverged run's final measurements are NaN, with their
declared dims: sizes from the run's other variables (``time``, ``mode``, …) or its data (``output``,
``target``, ``test_point``), else 1; the aggregation's outer join merges them with other runs'.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ntkpipe.lang.schema import RunSpec
from ntkpipe.measure.context import RunContext
from ntkpipe.measure.registry import REGISTRY, VARIABLES, Measurement
from ntkpipe.train.driver import Trajectory


def checkpoint_variables(spec: RunSpec) -> set[str]:
    """The series a run stores: the variables of its checkpoint measurements."""
    return {v.name for m in spec.measure if REGISTRY[m.name].when == "checkpoint" for v in REGISTRY[m.name].variables}


def final_values(run: RunContext, traj: Trajectory, items) -> dict:
    """Values of the final measurements ``items`` of a run."""
    sizes = measured_sizes(traj.series, len(traj.steps)) if traj.diverged else {}
    values = {}
    for item in items:
        m = REGISTRY[item.name]
        values.update(_nan_values(m, run, sizes) if traj.diverged else m.compute(run, traj, item))
    return values


def _nan_values(m: Measurement, run: RunContext, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    outputs = run.data.y_train.shape[1]
    known = {"output": outputs, "target": outputs, "test_point": len(run.data.x_test), **sizes}
    return {v.name: np.full(tuple(known.get(d, 1) for d in v.dims), np.nan) for v in m.variables}


def measured_sizes(series: dict, n_time: int) -> dict[str, int]:
    """The size of every dimension of the checkpoint ``series`` (``time``: the checkpoints)."""
    sizes = {"time": n_time}
    for name, value in series.items():
        sizes.update(zip(VARIABLES[name].dims, np.shape(value)))
    return sizes


def _variable(name: str, value, n_time: int) -> tuple[tuple[str, ...], np.ndarray]:
    """(dims, values) of a measured variable, checked against the dims the registry declares."""
    dims = VARIABLES[name].dims
    value = np.asarray(value)
    if value.ndim != len(dims) or ("time" in dims and value.shape[0] != n_time):
        raise ValueError(f"measurement variable {name!r} has shape {value.shape}, expected dims {dims}")
    return dims, value


def measured_dataset(values: dict, traj: Trajectory) -> xr.Dataset:
    """``values`` over the checkpoints of ``traj``; dimensions other than ``time`` (``test_point``,
    ``mode``, …) are indexed from 1."""
    ds = xr.Dataset({name: _variable(name, value, len(traj.steps)) for name, value in values.items()},
                    coords={"time": traj.time, "step": ("time", traj.steps), "epoch": ("time", traj.epoch)})
    return ds.assign_coords({d: np.arange(1, ds.sizes[d] + 1) for d in ds.dims if d not in ds.coords})
