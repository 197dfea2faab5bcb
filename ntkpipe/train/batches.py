"""Minibatch order: each epoch's permutation of the training set, drawn once per run outside the steps.

Epoch e of a run with batch-order key k visits the n examples in the order π_e = permutation(fold_in(k, e), n),
B at a time: its ⌈n / B⌉ batches read slots 0 … B − 1, B … 2B − 1, … of π_e, and the slots past n of the
last one wrap to the epoch's start (π_e[0], π_e[1], …), masked out of the loss. The orders are tables of
int32, a window of W epochs each, made by a small program per (n, W) as training reaches them, so that the
training program (:func:`ntkpipe.train.loop.advance_steps`) gathers its batches from one and holds no
random permutation: the permutation's hashes and sort doubled the compile time of a minibatch training
program (``benchmarks/README.md``), and the tables give the same orders bit for bit. A window holds every
epoch of the run where that fits in :data:`ORDERS_BYTES` (the default studies: always), else as many as
fit, and a segment of steps that crosses windows is advanced window by window (the same numbers:
:attr:`ntkpipe.train.driver.Stepper.splits`). The training set's rows past n (zeros, which no batch reads)
and a window's epochs pad them to the shapes of :mod:`ntkpipe.train.minibatch_shapes`, shared across sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from ntkpipe.compile_options import jit_with_options, loop_emitter_options
from ntkpipe.train.minibatch_shapes import epochs_to_cover, padded_epochs, padded_rows

ORDERS_BYTES = 64 * 2**20
"""The most one window of epoch orders holds (int32 entries: 16,384 epochs of up to 1,024 rows)."""


class TrainingSet(NamedTuple):
    """What a training program reads: inputs ``x`` and targets ``y`` (rows past ``n`` are zeros that no
    batch reads), a window of epoch orders (epochs, rows) from epoch ``first_epoch`` on (empty for
    full-batch steps, which read every row) and the number of examples ``n`` (weakly typed integers, as
    step counts are)."""

    x: Array
    y: Array
    orders: Int[Array, "epochs rows"]
    first_epoch: Int[Array, ""]
    n: Int[Array, ""]


class TrainingData:
    """The training set of a run of ``total_steps`` steps in ``dtype``, batched per ``batch_size`` (None:
    full batches) in the epoch orders of batch-order ``key``, as the training program reads it."""

    def __init__(self, x: np.ndarray, y: np.ndarray, dtype, key: Array, batch_size: int | None, total_steps: int):
        n = len(x)
        self.key, self.n, self.batch_size, self._n = key, n, batch_size, jnp.asarray(n)
        if batch_size is None:
            self.x, self.y, self.window, self.per_epoch = jnp.asarray(x, dtype), jnp.asarray(y, dtype), 0, 1
            self._full = TrainingSet(self.x, self.y, jnp.zeros((0, n), jnp.int32), jnp.asarray(0), self._n)
            return
        rows = padded_rows(n)
        self.x, self.y = jnp.asarray(_padded(x, rows), dtype), jnp.asarray(_padded(y, rows), dtype)
        self.per_epoch = -(-n // batch_size)
        fits = max(1, ORDERS_BYTES // (4 * rows))
        self.window = min(padded_epochs(epochs_to_cover(total_steps, n, batch_size)), 1 << (fits.bit_length() - 1))
        self._current_window: tuple[int, TrainingSet] | None = None

    def pieces(self, done: int, target: int) -> Iterator[tuple[int, int, TrainingSet]]:
        """(start, end, training set) covering steps ``done`` … ``target`` − 1, each within one window."""
        if self.batch_size is None:
            yield done, target, self._full
            return
        while done < target:
            first = (done // self.per_epoch) // self.window * self.window
            end = min(target, (first + self.window) * self.per_epoch)
            yield done, end, self._window_from(first)
            done = end

    def _window_from(self, first: int) -> TrainingSet:
        """The training set with the orders of epochs ``first`` … ``first`` + W − 1, padded to its rows
        (kept until another window is asked for)."""
        if self._current_window is None or self._current_window[0] != first:
            table = np.zeros((self.window, len(self.x)), np.int32)
            table[:, : self.n] = np.asarray(epoch_orders(self.key, self.n, self.window, first))
            self._current_window = first, TrainingSet(self.x, self.y, jnp.asarray(table), jnp.asarray(first), self._n)
        return self._current_window[1]


def _padded(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``rows``."""
    a = np.asarray(a)
    return np.concatenate([a, np.zeros((rows - len(a), *a.shape[1:]), a.dtype)])


def epoch_orders(key: Array, n_examples: int, epochs: int, first_epoch=0) -> Int[Array, "epochs n"]:
    """π_e = ``jax.random.permutation(fold_in(key, e), n)`` for e = first_epoch … first_epoch + epochs − 1,
    as int32 (one epoch at a time, each as a single permutation draws it). One program per (n, epochs),
    compiled with the loop emitters on XLA:CPU (:func:`~ntkpipe.compile_options.loop_emitter_options`): it
    runs once per window of epochs, and its integers are the same under either emitter."""
    program = jit_with_options(_orders, loop_emitter_options())  # n and epochs static, the first epoch traced
    return program(key, n_examples, epochs, jnp.asarray(first_epoch))


def _orders(key: Array, n_examples: int, epochs: int, first_epoch) -> Int[Array, "epochs n"]:
    def order(epoch):
        return jax.random.permutation(jax.random.fold_in(key, epoch), n_examples).astype(jnp.int32)

    index = jnp.arange(epochs)
    return jax.lax.map(order, first_epoch.astype(index.dtype) + index)


def batch_slots(data: TrainingSet, step: Int[Array, ""], batch_size: int) -> tuple[Int[Array, " B"], Bool[Array, " B"]]:
    """The examples of step ``step``'s batch and which of them count: slots k·B … k·B + B − 1 of its epoch's
    order (k = step mod ⌈n / B⌉), those past n wrapped to the epoch's start and masked."""
    n = data.n
    per_epoch = (n + batch_size - 1) // batch_size
    slots = (step % per_epoch) * batch_size + jnp.arange(batch_size)
    inside = slots < n
    return data.orders[step // per_epoch - data.first_epoch, jnp.where(inside, slots, slots - n)], inside
