"""First-order Taylor model of a network around its initialization.

    f_lin(x; θ) = f(x; θ₀) + ∇_θ f(x; θ₀) · (θ − θ₀)          (linearized-networks Eq. 1)

computed with one ``jax.jvp``; its tangent kernel is the initial NTK of the network at every θ.
``centered`` drops the first term, f̂(x; θ) = ∇_θ f(x; θ₀) · (θ − θ₀): the unbiased model the
authors train around a pretrained θ₀ = θ_k (linearized-networks Sec. 4.3).
Only ``params`` (θ) is trainable: use :func:`trainable` to split the module before differentiating.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ntkpipe.models.fixed import fixed_mask
from ntkpipe.models.state import split_state, state_mask


class Linearized(eqx.Module):
    """Linearization of ``origin`` (θ₀); ``params`` (θ) starts equal to it."""

    params: eqx.Module
    origin: eqx.Module
    centered: bool = eqx.field(static=True)

    def __init__(self, model: eqx.Module, *, centered: bool = False):
        self.params = model
        self.origin = model
        self.centered = centered

    def __call__(self, x: Float[Array, " D"]) -> Float[Array, " C"]:
        origin_arrays, static = eqx.partition(self.origin, _moving(self.origin))
        origin_arrays = jax.lax.stop_gradient(origin_arrays)
        delta = jax.tree.map(
            jnp.subtract, eqx.filter(self.params, _moving(self.params)), origin_arrays
        )

        def f(arrays):
            return eqx.combine(arrays, static)(x)

        f0, df = jax.jvp(f, (origin_arrays,), (delta,))
        return df if self.centered else f0 + df


def _moving(model: eqx.Module):
    """True at the floating-point arrays of ``model`` except its fixed scalars (:mod:`ntkpipe.models.fixed`)."""
    return jax.tree.map(lambda array, fixed: array and not fixed,
                        jax.tree.map(eqx.is_inexact_array, model), fixed_mask(model))


def trainable(model: eqx.Module) -> tuple[eqx.Module, eqx.Module]:
    """Split ``model`` into ``(trainable arrays, everything else)`` for ``eqx.combine``.

    A :class:`Linearized` model trains only ``params``; its ``origin`` θ₀ is frozen. A network's
    state (:class:`~ntkpipe.models.state.BatchStats`) and its fixed scalars
    (:class:`~ntkpipe.models.fixed.Fixed`) are not trainable.
    """
    spec = jax.tree.map(lambda array, state: array and not state, _moving(model), state_mask(model))
    if isinstance(model, Linearized):
        spec = eqx.tree_at(lambda m: m.origin, spec, replace_fn=lambda o: jax.tree.map(lambda _: False, o))
    return eqx.partition(model, spec)


def stored(model: eqx.Module) -> tuple[eqx.Module, eqx.Module]:
    """Split ``model`` into ``(what a store keeps, everything else)`` for ``eqx.combine``: the trainable
    arrays and a network's state (BatchNorm running statistics, which training moves); for a stateless
    model or a linearization (whose state is its origin's, frozen) the trainable arrays alone."""
    arrays, rest = trainable(model)
    if isinstance(model, Linearized):
        return arrays, rest
    state, rest = split_state(rest)
    return eqx.combine(arrays, state), rest
