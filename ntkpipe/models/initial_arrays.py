"""Initial weights and biases made on the host, so that building a network compiles (almost) nothing.

An eager ``jnp.zeros(shape)`` or ``w * scale`` on a JAX array compiles one XLA program per shape; NumPy
makes the same numbers with none (:func:`filled`; callers scale the NumPy draws in the draws' dtype, as
JAX would). Standard normal draws stay JAX's, bit for bit:

JAX's threefry draws are counter-based (``jax_threefry_partitionable``, JAX's default since 0.5): entry i
of ``jax.random.normal(key, shape)`` is a function of the key and of i, the entry's row-major index,
alone. So the first n entries of a longer draw are the draw of n entries, and reshaped they are the
draw of any shape of n entries. :func:`standard_normal` draws 2^⌈log₂ n⌉ entries (at least
:data:`SMALLEST_DRAW`) and keeps n: JAX compiles one program per power of two, where a draw per weight
shape compiled one per shape (0.3–0.4 s of XLA each; 51 programs in the main job, 21 s).
"""

from __future__ import annotations

import math

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

SMALLEST_DRAW = 1024
"""Entries of the smallest draw: smaller weights (biases, readouts, 2-d inputs) share one program."""


def draw_size(size: int) -> int:
    """The entries drawn for ``size`` entries: the next power of two, at least :data:`SMALLEST_DRAW`."""
    return max(SMALLEST_DRAW, 1 << max(size - 1, 0).bit_length())


def standard_normal(key: PRNGKeyArray, shape: tuple[int, ...], dtype) -> np.ndarray | Array:
    """``jax.random.normal(key, shape, dtype)`` as the first entries of a :func:`draw_size` draw (module
    docstring): a NumPy array, or a traced one under tracing (``jax.eval_shape`` of a network); drawn
    directly where threefry is not counter-based."""
    if not jax.config.values["jax_threefry_partitionable"]:
        return jax.random.normal(key, shape, dtype)
    size = math.prod(shape)
    draw = jax.random.normal(key, (draw_size(size),), dtype)
    if isinstance(draw, jax.core.Tracer):
        return draw[:size].reshape(shape)
    return np.asarray(draw)[:size].reshape(shape)


def filled(shape: tuple[int, ...], value: float, dtype) -> Array:
    """``jnp.full(shape, value, dtype)``, made by NumPy and put on the device (no compiled program)."""
    return jnp.asarray(np.full(shape, value, dtype))
