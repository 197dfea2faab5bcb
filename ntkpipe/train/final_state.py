"""A run's final state as its store keeps it, and the trajectory rebuilt from that store.

A network run stores its final trainable parameters (and its state, BatchNorm running statistics,
:func:`ntkpipe.models.stored`) as one flat vector ``final_params`` over
``parameter`` (in the training dtype, the order of ``ravel_pytree``); a kernel kind, which has no
parameters, stores the numbers its dynamics yields as ``dynamics_<name>`` (e.g. the OFE's γ). With
the store's checkpoint series and times this is all a final measurement reads of a trajectory, so a
final measurement added later is computed from the store, without retraining, to the same values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import equinox as eqx
import numpy as np
import xarray as xr

from ntkpipe.models import stored
from ntkpipe.models.flat import flat_vector, from_flat_vector
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.train.driver import Trajectory

PARAMS = "final_params"
DYNAMICS_PREFIX = "dynamics_"


def is_state_variable(name: str) -> bool:
    """Whether ``name`` is a variable of the saved final state (not a measurement)."""
    return name == PARAMS or name.startswith(DYNAMICS_PREFIX)


def state_variables(traj: Trajectory) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """(dims, values) of what a run store keeps of ``traj``'s final state."""
    out: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
        f"{DYNAMICS_PREFIX}{k}": ((), np.asarray(v, np.float64)) for k, v in traj.finals.items()}
    if traj.model is not None:
        out[PARAMS] = (("parameter",), flat_vector(stored(traj.model)[0]))
    return out


def restored_model(model0: eqx.Module, params: np.ndarray, dtype) -> eqx.Module:
    """The trained model: ``model0`` cast to the training ``dtype`` as training casts it, with the
    stored arrays (trainable ones and state) of the flat vector ``params``."""
    diff, static = stored(cast_floats(model0, dtype))
    return eqx.combine(from_flat_vector(diff, params), static)


def stored_trajectory(store: xr.Dataset, series: set[str], model0: eqx.Module, dtype) -> Trajectory:
    """The trajectory a run store records: checkpoints, the ``series`` it holds of those named,
    divergence, the final model rebuilt onto ``model0`` from ``final_params`` (None if the store has
    none: kernel kinds) and the dynamics' numbers."""
    names = cast("Iterable[str]", store.data_vars)  # ntkpipe names its variables by str
    held = {name: store[name].values for name in names if name in series}
    model = restored_model(model0, store[PARAMS].values, dtype) if PARAMS in store else None
    finals = {name.removeprefix(DYNAMICS_PREFIX): float(store[name]) for name in names
              if name.startswith(DYNAMICS_PREFIX)}
    return Trajectory(steps=store["step"].values, time=store["time"].values, epoch=store["epoch"].values,
                      series=held, diverged=bool(int(store["diverged"])), model=model, finals=finals)
