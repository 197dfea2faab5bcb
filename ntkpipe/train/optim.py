"""Optimizers as an optax update direction u_t plus a learning-rate schedule: θ ← θ − η_t u_t.

The direction is built once per setting (memoized) so that every run with the same optimizer
reuses one compiled training function; η_t enters the compiled step as a traced scalar.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax

from ntkpipe.lang.schema import OptimizerSpec


def _standard_promotion(direction: optax.GradientTransformation) -> optax.GradientTransformation:
    """``direction`` with its update under JAX's standard dtype promotion, whatever the session's: optax
    promotes implicitly (Adam's bias correction 1 − β^t mixes a float and an int32 step count)."""

    def update(updates, state, params=None):
        with jax.numpy_dtype_promotion("standard"):
            return direction.update(updates, state, params)

    return optax.GradientTransformation(direction.init, update)


@functools.cache
def _direction(name: str, momentum: float, b1: float, b2: float, eps: float) -> optax.GradientTransformation:
    if name == "adam":
        return _standard_promotion(optax.scale_by_adam(b1=b1, b2=b2, eps=eps))  # Kingma & Ba: m̂_t / (√v̂_t + ε)
    if momentum > 0.0:
        return _standard_promotion(optax.trace(decay=momentum))  # heavy ball: u_t = g_t + μ u_{t−1} (PyTorch SGD)
    return optax.identity()  # u_t = g_t


def update_direction(spec: OptimizerSpec) -> optax.GradientTransformation:
    """u_t for ``spec`` (gd and sgd differ only in batching, chosen by ``train.batch_size``)."""
    return _direction(spec.name, spec.momentum, spec.b1, spec.b2, spec.eps)


def learning_rate(kind: str, lr, step, total_steps, dtype):
    """η_t = η_0 (constant) or η_0 (1 − t/T) (linear decay to 0 at step T), computed in float64."""
    lr = jnp.asarray(lr, jnp.float64)
    if kind == "linear_decay":
        lr = lr * (1.0 - step.astype(jnp.float64) / total_steps.astype(jnp.float64))
    return lr.astype(dtype)
