"""Per-example losses; a batch loss is their (masked) mean."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def squared_error(f: jax.Array | np.ndarray, y: jax.Array | np.ndarray) -> jax.Array | np.ndarray:
    """½ Σ_c (f_c − y_c)² per example, so the mean is L = (1/2P) Σ_μ |f(x_μ) − y_μ|²
    (silent-alignment Sec. 3). NumPy arrays in, NumPy out (a checkpoint's loss); JAX arrays or tracers in,
    JAX out (a training step)."""
    return 0.5 * ((f - y) ** 2).sum(axis=-1)


def logistic(f: jax.Array | np.ndarray, y: jax.Array | np.ndarray) -> jax.Array | np.ndarray:
    """Binary cross-entropy on one logit with y ∈ {−1, +1}: log(1 + e^{−y f}) = softplus(−y f), computed as
    logaddexp(−y f, 0) (linearized-networks App. B); NumPy or JAX as :func:`squared_error`."""
    xp = np if isinstance(f, np.ndarray) and isinstance(y, np.ndarray) else jnp
    return xp.logaddexp(-y[..., 0] * f[..., 0], 0)


LOSSES = {"mse": squared_error, "bce": logistic}
