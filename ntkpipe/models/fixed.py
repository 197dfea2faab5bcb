"""Fixed scalars of a network: the layer multipliers c_ℓ and the output scale κ of z = c W h, f = κ z.

They are array leaves, not static fields, so that a compiled function (a training step, a Gram) takes
them as arguments: one program serves every σ (c_ℓ = σ/√n of the NTK parameterization) and every κ of
a shape, where a static field compiled a program per value. They are never trained, differentiated or
stored (:func:`ntkpipe.models.trainable` leaves them out), nor cast to a training dtype: they stay
float64, so float64 theory reads them exactly, and meet an array in its dtype (:meth:`Fixed.like`:
c·h keeps h's dtype, c rounded as a Python float literal would be).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class Fixed(eqx.Module):
    """One fixed scalar (``value``: a 0-d array, float64 under JAX's 64-bit types)."""

    value: Float[Array, ""]

    def __init__(self, value: float):
        self.value = jnp.asarray(float(value))

    def __float__(self) -> float:
        return float(self.value)

    def like(self, x) -> Float[Array, ""]:
        """The scalar in ``x``'s dtype, rounded as a Python float (or a weak-typed scalar) is where it
        meets ``x``: the same program and numbers also where the value was read back from NumPy (a
        resume snapshot, a stored state, a pack's host copy) as a strongly typed float64."""
        return jnp.asarray(self.value).astype(x.dtype)


def is_fixed(node) -> bool:
    return isinstance(node, Fixed)


def fixed_mask(tree, is_array=eqx.is_array):
    """``tree`` with True at every array leaf (``is_array``: e.g. shapes in place of arrays) inside a
    :class:`Fixed`, False elsewhere."""
    return jax.tree.map(lambda node: jax.tree.map(is_array, node) if is_fixed(node) else False,
                        tree, is_leaf=is_fixed)
