"""Readout / hidden split of the NTK (kernel-alignment Eqs. 14–15, 94–95).

    K = K_V + K_W,   (K_V)^{cd}_{μν} = ∇_V f_c^μ · ∇_V f_d^ν,   (K_W)^{cd}_{μν} = ∇_W f_c^μ · ∇_W f_d^ν

with V the readout layer (its weight matrix and bias) and W every other trainable parameter.
"""

from __future__ import annotations

import equinox as eqx
import numpy as np
from jaxtyping import ArrayLike, Float

from ntkpipe.models import ARCHITECTURES, Linearized
from ntkpipe.ntk.dispatch import empirical_ntk
from ntkpipe.ntk.precision import with_x64


@with_x64
def component_grams(model: eqx.Module, x: Float[ArrayLike, "n ..."]) -> dict[str, np.ndarray]:
    """``{"readout": K_V, "hidden": K_W}``, each (n, n, C, C) float64, with K_V + K_W = ``empirical_ntk(model, x)``.

    The readout is the last weight layer (an MLP's ``weights[-1]`` and ``biases[-1]``, the last ``Dense``
    of a CNN or a ResNet; for a :class:`Linearized` network, that of its trained ``params``),
    i.e. the last per-layer component of :func:`empirical_ntk`. A depth-1 MLP has K_W = 0.

    Raises:
        TypeError: ``model`` is not a network whose architecture has a readout, or a linearization of one.
    """
    network = model.params if isinstance(model, Linearized) else model
    if not isinstance(network, tuple(record.network for record in ARCHITECTURES.values() if record.readout)):
        raise TypeError(f"component_grams needs a network with a readout layer (or a Linearized one), "
                        f"got {type(network).__name__}")
    layers = np.asarray(empirical_ntk(model, x, per_layer=True))
    return {"readout": layers[-1], "hidden": layers[:-1].sum(0)}
