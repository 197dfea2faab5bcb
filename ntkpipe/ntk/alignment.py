r"""Jacobian alignment α(v) = ‖J(X)ᵀ v‖², the Gram quadratic form vᵀΘv without the Gram."""

from __future__ import annotations

from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, ArrayLike, Float

from ntkpipe.compile_options import measurement_jit
from ntkpipe.models import trainable
from ntkpipe.ntk.precision import to_float64, with_x64


@measurement_jit
def _alignments(arrays, rest, x_blocks: Float[Array, "B b ..."], v_blocks: Float[Array, "B k b C"]):
    def add_block(total, block):
        x, v = block
        _, pullback = jax.vjp(lambda leaves: jax.vmap(eqx.combine(leaves, rest))(x), arrays)
        (grads,) = jax.vmap(pullback)(v)
        return jax.tree.map(jnp.add, total, grads), None

    num_vectors = v_blocks.shape[1]
    zeros = jax.tree.map(lambda a: jnp.zeros((num_vectors, *a.shape), a.dtype), arrays)
    totals, _ = lax.scan(add_block, zeros, (x_blocks, v_blocks))
    total = sum(jnp.sum(g.reshape(num_vectors, -1) ** 2, axis=1) for g in jax.tree.leaves(totals))
    return cast(Array, total)  # a sum over the trainable leaves, never empty (so never the start value 0)


@with_x64
def jacobian_alignments(
    model: eqx.Module,
    x: Float[ArrayLike, "n D"],
    vs: Float[ArrayLike, "k n *C"],
    *,
    block_size: int = 256,
) -> Float[Array, " k"]:
    r"""Batched :func:`jacobian_alignment`: α(v_m) for each of ``k`` cotangents at once.

    .. math::
        α(v_m) = \Big\| \sum_i \sum_c v_{m,ic} ∇_θ f_c(x_i) \Big\|^2 = v_m^⊤ Θ v_m

    One forward pass and one ``jax.vjp`` per block of ``block_size`` examples; the pullback is
    vmapped over the ``k`` cotangents and the per-block gradients are summed before squaring.

    Args:
        model: equinox module mapping ``(D,)`` to ``(C,)``; θ = its trainable parameters.
        x: ``(n, D)`` inputs.
        vs: ``(k, n, C)`` cotangents, or ``(k, n)`` when C = 1.
        block_size: examples per vjp; memory ∝ k · #params (running sum and one block's
            gradients) plus one block's forward and k backward passes.

    Returns:
        ``(k,)`` float64.

    Raises:
        ValueError: ``vs`` does not match ``(k, n, C)``, or ``block_size < 1``.

    Example:
        >>> eigenvalues, eigenvectors = jnp.linalg.eigh(flatten_gram(empirical_ntk(model, x)))
        >>> jacobian_alignments(model, x, eigenvectors.T)       # == eigenvalues (C = 1)
    """
    if block_size < 1:
        raise ValueError(f"block_size must be a positive number of examples, got {block_size}")
    model = to_float64(model)
    x = jnp.asarray(x, jnp.float64)
    vs = jnp.asarray(vs, jnp.float64)
    (num_outputs,) = jax.eval_shape(model, x[0]).shape  # pyright: ignore[reportArgumentType]  # eqx.Module: no __call__
    if vs.ndim == 2 and num_outputs == 1:
        vs = vs[..., None]
    n = len(x)
    if vs.shape[1:] != (n, num_outputs):
        raise ValueError(
            f"cotangents must have shape (k, {n}, {num_outputs})"
            + (f" or (k, {n})" if num_outputs == 1 else "")
            + f" for {n} examples and {num_outputs} outputs, got {vs.shape}"
        )
    size = min(block_size, n)
    num_blocks = -(-n // size)
    padding = num_blocks * size - n
    # Padded examples repeat the last one and get zero cotangents, so they add exactly nothing.
    x_blocks = jnp.pad(x, [(0, padding)] + [(0, 0)] * (x.ndim - 1), mode="edge")
    x_blocks = x_blocks.reshape(num_blocks, size, *x.shape[1:])
    v_blocks = jnp.pad(vs, [(0, 0), (0, padding), (0, 0)])
    v_blocks = v_blocks.reshape(len(vs), num_blocks, size, num_outputs).swapaxes(0, 1)
    return _alignments(*trainable(model), x_blocks, v_blocks)


@with_x64
def jacobian_alignment(
    model: eqx.Module,
    x: Float[ArrayLike, "n D"],
    v: Float[ArrayLike, " n *C"],
    *,
    block_size: int = 256,
) -> Float[Array, ""]:
    r"""Alignment of the cotangent ``v`` with the model Jacobian (linearized-networks Lemma 1).

    .. math::
        α(v) = \Big\| \sum_i \sum_c v_{ic} ∇_θ f_c(x_i) \Big\|^2 = \mathrm{vec}(v)^⊤ Θ\, \mathrm{vec}(v)

    with Θ = ``flatten_gram(empirical_ntk(model, x))``; for a unit eigenvector φ_j of Θ, α(φ_j) = λ_j.
    Computed with one ``jax.vjp`` per block of examples (cotangent ``v``), summing the block
    gradients; the Gram is never formed.

    Args:
        model: equinox module mapping ``(D,)`` to ``(C,)``; θ = its trainable parameters.
        x: ``(n, D)`` inputs.
        v: ``(n, C)`` cotangent, or ``(n,)`` when C = 1 (``vec(v) = v.reshape(-1)``).
        block_size: examples per vjp.

    Returns:
        float64 scalar array.

    Example:
        >>> residual = jax.vmap(model)(x) - y                  # (n, C)
        >>> jacobian_alignment(model, x, residual)             # -dL/dt, L = ½‖residual‖², gradient flow
    """
    return jacobian_alignments(model, x, jnp.asarray(v)[None], block_size=block_size)[0]
