"""Per-example losses; a batch loss is their (masked) mean."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def squared_error(f: jax.Array | np.ndarray, y: jax.Array | np.ndarray) -> jax.Array:
    """½ Σ_c (f_c − y_c)² per example, so the mean is L = (1/2P) Σ_μ |f(x_μ) − y_μ|²
    (silent-alignment Sec. 3)."""
    return 0.5 * jnp.sum((f - y) ** 2, axis=-1)


def logistic(f: jax.Array | np.ndarray, y: jax.Array | np.ndarray) -> jax.Array:
    """Binary cross-entropy on one logit with y ∈ {−1, +1}: log(1 + e^{−y f}) (linearized-networks App. B)."""
    return jax.nn.softplus(-y[..., 0] * f[..., 0])


LOSSES = {"mse": squared_error, "bce": logistic}
