"""Mutable state of a network (BatchNorm statistics) and the train-mode forward pass over a batch.

A network keeps its state inside the module, as :class:`BatchStats` leaves, so that ``model(x)`` on
one example is a pure function of that example (inference mode: BatchNorm uses its running
statistics). Every per-example computation — NTK Jacobians and Grams, measurements, the
linearization f(θ₀) + ∇f(θ₀)·(θ − θ₀) — uses this inference mode, as neural-tangents does, so
per-example kernels stay per-example. Only a training step runs the train mode
(:func:`forward_batch`), where BatchNorm normalizes with the statistics of the batch and updates
the running ones. The state is not trainable (:func:`ntkpipe.models.trainable` leaves it out).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import equinox as eqx
import jax
from jaxtyping import Array, Float


class BatchStats(eqx.Module):
    """Running mean and variance of one BatchNorm layer, per channel (the state, not trained)."""

    mean: Float[Array, " C"]
    var: Float[Array, " C"]


def is_state(node) -> bool:
    return isinstance(node, BatchStats)


def state_mask(tree):
    """``tree`` with True at every array leaf inside a :class:`BatchStats`, False elsewhere."""
    return jax.tree.map(lambda node: jax.tree.map(eqx.is_array, node) if is_state(node) else False,
                        tree, is_leaf=is_state)


def split_state(tree) -> tuple:
    """``(state, rest)`` of a model (or a part of one) for ``eqx.combine``; a stateless model has an empty state."""
    return eqx.partition(tree, state_mask(tree))


@runtime_checkable
class TrainMode(Protocol):
    """A network with state: ``train_forward(x, mask)`` maps a batch ``x`` (with weights ``mask``,
    1 for a real example and 0 for padding) to ``(f(x), network with updated state)``."""

    def train_forward(self, x: Float[Array, "B ..."], mask: Float[Array, " B"]) -> tuple[Array, eqx.Module]: ...


def forward_batch(model: eqx.Module, x: Float[Array, "B ..."], mask: Float[Array, " B"]) -> tuple[Array, eqx.Module]:
    """``(f(x), model')``: the train-mode outputs of a batch and the model with its state updated; for a
    stateless model (or a linearization, whose origin is frozen) ``vmap(model)(x)`` and ``model``."""
    if isinstance(model, TrainMode):
        return model.train_forward(x, mask)
    return jax.vmap(model)(x), model  # pyright: ignore[reportArgumentType]  # eqx.Module: no __call__
