"""Float precision: kernels, eigendecompositions, kernel regression and theory run in double
precision whatever the training dtype (float32, passed explicitly).

JAX makes float64 arrays only with its 64-bit types enabled. Importing ntkpipe leaves that setting
alone; a function that needs float64 is wrapped in :func:`with_x64`, which enables them for the call
(``jax.enable_x64``, scoped to the call and its thread), so it returns float64 in any session. A job
of the workflow enables them for its whole process (:func:`ntkpipe.jobs.log.start_job`).

:func:`with_x64` also computes the call's matrix products at full precision
(``jax.default_matmul_precision("highest")``): GPUs otherwise multiply float32 in TF32, whose 10-bit
mantissa left a float32 Gram ≈ 10⁻² off its float64 value on an H200 (float32 rounding: ≈ 10⁻⁷).
XLA:CPU computes the same numbers either way."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from ntkpipe.models.fixed import is_fixed


def with_x64(fn):
    """``fn`` called with JAX's 64-bit types enabled (so its ``jnp.float64`` arrays are float64) and
    its matrix products at full precision (module docstring), the settings restored on return. Wrap
    the outside of a jitted function, not its inside."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True), jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return wrapper


def cast_floats(tree, dtype):
    """Return ``tree`` with every floating-point array cast to ``dtype`` (other leaves, and a network's
    fixed scalars, :mod:`ntkpipe.models.fixed`, untouched)."""
    return jax.tree.map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, tree, is_leaf=is_fixed)


@with_x64
def to_float64(tree):
    """Return ``tree`` with every floating-point array cast to float64 (other leaves untouched)."""
    return cast_floats(tree, jnp.float64)
