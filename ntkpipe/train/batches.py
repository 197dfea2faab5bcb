"""Minibatch order: each epoch's permutation of the training set, drawn once per run outside the steps.

Epoch e of a run with batch-order key k visits the n examples in the order π_e = permutation(fold_in(k, e), n);
its b = ⌈n / B⌉ batches take slots e·… of that order, B at a time, and the last partial batch is filled
from the epoch's own start (slots n … b·B − 1 read π_e[0 … b·B − n − 1]) with those entries masked out of
the loss. The orders are a table (epochs, n) made by one small program per (n, epochs), so that the
training program (:func:`ntkpipe.train.loop.advance_steps`) gathers batches from it and holds no random
permutation: the permutation's hashes and sort doubled the compile time of a minibatch training program
(``benchmarks/README.md``), and the table gives the same orders bit for bit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int


def epochs_to_cover(total_steps: int, n_examples: int, batch_size: int) -> int:
    """Epochs that ``total_steps`` minibatch steps start (at least 1): ⌈total / ⌈n / B⌉⌉."""
    per_epoch = -(-n_examples // batch_size)
    return max(1, -(-total_steps // per_epoch))


@functools.partial(jax.jit, static_argnums=(1, 2))
def epoch_orders(key: Array, n_examples: int, epochs: int) -> Int[Array, "epochs n"]:
    """π_e = ``jax.random.permutation(fold_in(key, e), n)`` for e = 0 … epochs − 1, as int32 (one epoch at a
    time, each as a single permutation draws it)."""
    def order(epoch):
        return jax.random.permutation(jax.random.fold_in(key, epoch), n_examples).astype(jnp.int32)

    return jax.lax.map(order, jnp.arange(epochs))


def batch_slots(orders: Int[Array, "epochs n"], step: Int[Array, ""], batch_size: int) -> tuple[
        Int[Array, " B"], Bool[Array, " B"]]:
    """The examples of step ``step``'s batch and which of them count: slots k·B … k·B + B − 1 of its epoch's
    order (k = step mod ⌈n / B⌉), those past n wrapped to the epoch's start and masked."""
    n = orders.shape[1]
    per_epoch = -(-n // batch_size)
    slots = (step % per_epoch) * batch_size + jnp.arange(batch_size)
    inside = slots < n
    return orders[step // per_epoch, jnp.where(inside, slots, slots - n)], inside


def run_orders(key: Array, n_examples: int, batch_size: int | None, total_steps: int) -> Int[Array, "epochs n"]:
    """The epoch orders of a run's ``total_steps`` minibatch steps (an empty table for full-batch steps)."""
    if batch_size is None:
        return jnp.zeros((0, n_examples), jnp.int32)
    return epoch_orders(key, n_examples, epochs_to_cover(total_steps, n_examples, batch_size))
