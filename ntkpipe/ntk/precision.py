"""Float64 casting: kernels are computed in double precision whatever the training dtype."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp


def to_float64(tree):
    """Return ``tree`` with every floating-point array cast to float64 (other leaves untouched)."""
    return jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, tree)
