"""Measurements on the weights themselves."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ntkpipe.models import MLP, Linearized
from ntkpipe.ntk.kernel_stats import kernel_alignment


def moving_network(model) -> MLP:
    """The network whose weights move: ``params`` of a linearized model, else the model."""
    return model.params if isinstance(model, Linearized) else model


def first_layer_alignment(model, beta: np.ndarray) -> float:
    """cos(W₁ᵀW₁, ββᵀ) = βᵀW₁ᵀW₁β / (‖W₁ᵀW₁‖_F |β|²) (silent-alignment Fig. 3b, E.1c).

    Reaches 1 when the first layer has become rank one along the teacher direction β.
    """
    w = moving_network(model).weights[0].astype(jnp.float64)
    return kernel_alignment(w.T @ w, beta, xp=jnp)
