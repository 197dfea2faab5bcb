"""``jax.jit`` of a function of pytrees (equinox modules, optax states): array leaves traced, every
other leaf static, as ``eqx.filter_jit`` compiles it, with one flatten per call.

A checkpoint of a run calls a few compiled programs (its training segment, outputs, Gram), each small,
and the jobs of a Snakemake process are its threads, so the Python around each call holds the GIL
that the other job threads wait for. A depth-3 MLP's outputs on 50 points take ≈ 130 µs per call
through ``eqx.filter_jit`` (binding the signature, partitioning and recombining the trees), ≈ 20 µs
through :func:`filter_jit` and ≈ 15 µs through ``jax.jit`` of the arrays alone (``benchmarks/dispatch.py``).
The programs are the same: the same function traced on the same array leaves, so the numbers are the
same bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import jax
import numpy as np
from jax.tree_util import register_pytree_node

P = ParamSpec("P")
T = TypeVar("T")

ARRAY_TYPES = (jax.Array, np.ndarray, np.generic)
"""The leaves traced (``eqx.is_array``'s: JAX arrays and tracers, NumPy arrays and scalars)."""


class Static:
    """The non-array part of a pytree — its structure, its other leaves, where the arrays go — as a
    program's static argument or output: hashed once, compared by value. A pytree node without
    children, so a compiled program returns it in its output structure."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple):
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Static) and self._hash == other._hash and self.value == other.value)


register_pytree_node(Static, lambda static: ((), static), lambda static, _: static)


def split(tree) -> tuple[list, Static]:
    """(array leaves in tree order, :class:`Static` of the rest)."""
    leaves, treedef = jax.tree.flatten(tree)
    arrays, others, is_array = [], [], []
    for leaf in leaves:
        array = isinstance(leaf, ARRAY_TYPES)
        (arrays if array else others).append(leaf)
        is_array.append(array)
    return arrays, Static((treedef, tuple(others), tuple(is_array)))


def merge(arrays, static: Static):
    """The pytree :func:`split` took apart, with ``arrays`` (traced or computed) in its array leaves."""
    treedef, others, is_array = static.value
    arrays, others = iter(arrays), iter(others)
    return jax.tree.unflatten(treedef, [next(arrays) if array else next(others) for array in is_array])


def filter_jit(fn: Callable[P, T], **jit_options) -> Callable[P, T]:
    """``fn`` compiled by ``jax.jit`` (with ``jit_options``, e.g. ``compiler_options``) on the array
    leaves of its arguments; a call with other non-array leaves (compared with ``==``) traces again.
    Its output may hold non-array leaves too. Called on tracers (inside ``jax.jit`` or ``jax.vmap``)
    it is part of the enclosing program. Unlike ``eqx.filter_jit``, ``fn`` itself is not an argument:
    arrays it holds (a bound method's module, a partial's arguments) are constants of the program, so
    wrap a module-level function and pass the arrays."""

    untyped: Callable[..., T] = fn  # called on the arguments merge rebuilds

    def traced(arrays, static: Static):
        args, kwargs = merge(arrays, static)
        return split(untyped(*args, **kwargs))

    traced.__name__ = traced.__qualname__ = getattr(fn, "__name__", "filter_jit")  # the program's name
    compiled = jax.jit(traced, static_argnums=1, **jit_options)

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        out_arrays, out_static = compiled(*split((args, kwargs)))
        return merge(out_arrays, out_static)

    return call
