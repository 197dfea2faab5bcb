"""A pytree of arrays as one flat host vector and back, in the layout of ``jax.flatten_util.ravel_pytree``.

``ravel_pytree`` runs eagerly on the device: a reshape per leaf and a concatenation, each compiled
once per shape (a run store's ``final_params`` compiled two small XLA programs per network shape).
These do the same on the host with NumPy: the same order (the tree's leaves), the same dtype (their
common one, as ``jnp.result_type`` promotes), the same numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def flat_vector(tree) -> np.ndarray:
    """The array leaves of ``tree`` raveled and concatenated in tree order, in their common dtype."""
    leaves = jax.tree.leaves(tree)
    dtype = jnp.result_type(*(leaf.dtype for leaf in leaves)) if leaves else np.float32
    return np.concatenate([np.ravel(np.asarray(leaf)).astype(dtype, copy=False) for leaf in leaves] or
                          [np.zeros(0, dtype)])


def from_flat_vector(template, vector: np.ndarray):
    """``template`` (a pytree of arrays) with its leaves taken, in order, from the flat ``vector``
    (:func:`flat_vector`'s layout), each in its leaf's shape and dtype, as JAX arrays."""
    leaves, treedef = jax.tree.flatten(template)
    ends = np.cumsum([np.size(leaf) for leaf in leaves])
    chunks = np.split(np.asarray(vector), ends[:-1]) if leaves else []
    return treedef.unflatten([jnp.asarray(chunk.reshape(np.shape(leaf)), leaf.dtype)
                              for chunk, leaf in zip(chunks, leaves)])
