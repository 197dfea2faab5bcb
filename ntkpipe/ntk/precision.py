"""Float casting: kernels are computed in double precision (or, when asked, single) whatever the
training dtype."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp


def cast_floats(tree, dtype):
    """Return ``tree`` with every floating-point array cast to ``dtype`` (other leaves untouched)."""
    return jax.tree.map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, tree)


def to_float64(tree):
    """Return ``tree`` with every floating-point array cast to float64 (other leaves untouched)."""
    return cast_floats(tree, jnp.float64)
