"""The shapes a minibatch training program is compiled for, without JAX (the planner's memory estimate,
:mod:`ntkpipe.resources`, reads them too).

A minibatch program reads n as a number, not from a shape: its training set's rows are padded to
:func:`padded_rows` and its table of epoch orders (:mod:`ntkpipe.train.batches`) to :func:`padded_epochs`,
so that runs that differ in n or in their number of epochs (a sample-size sweep) share one compiled
training program.
"""

from __future__ import annotations

MIN_ROWS = 1024
"""A minibatch training set's rows are padded to at least this many, and above it to the next power of
two: at most 1,024 rows or twice the data more, for one training program per architecture across sizes."""


def padded_rows(n_examples: int) -> int:
    """The rows of a minibatch training set of n examples: max(:data:`MIN_ROWS`, the power of two ≥ n)."""
    return max(MIN_ROWS, 1 << (n_examples - 1).bit_length())


def padded_epochs(epochs: int) -> int:
    """The rows of a table of ``epochs`` epoch orders: the power of two ≥ epochs."""
    return 1 << (epochs - 1).bit_length()


def epochs_to_cover(total_steps: int, n_examples: int, batch_size: int) -> int:
    """Epochs that ``total_steps`` minibatch steps start (at least 1): ⌈total / ⌈n / B⌉⌉."""
    per_epoch = -(-n_examples // batch_size)
    return max(1, -(-total_steps // per_epoch))
