r"""Which output pairs (c, d) of an NTK are computed: all, the diagonal c = d, or its trace.

    full:      K_{ijcd}                     (n1, n2, C, C)
    diagonal:  K_{ijcc}                     (n1, n2, C)    neural-tangents ``diagonal_axes=(-1,), trace_axes=()``
    trace:     Σ_c K_{ijcc}                 (n1, n2)       neural-tangents ``trace_axes=(-1,)``

For per-example factors A_i, B_j of shape (C, p) with K_{ijcd} = ⟨A_i^c, B_j^d⟩ (Jacobians, or an
MLP layer's output gradients), the diagonal needs C products of length p per pair instead of C²,
and the trace is a single product of the flattened factors, Σ_c ⟨A_i^c, B_j^c⟩ = ⟨vec A_i, vec B_j⟩:
one GEMM over C·p, never the C × C block.
"""

from __future__ import annotations

from typing import Literal

import jax.numpy as jnp
from jaxtyping import Array, Float

Outputs = Literal["full", "diagonal", "trace"]

OUTPUT_AXES: dict[str, int] = {"full": 2, "diagonal": 1, "trace": 0}
"""Trailing output axes of each kind of kernel."""


def check_outputs(outputs: str) -> str:
    """``outputs`` if it names a kind of kernel, else a ValueError listing the kinds."""
    if outputs not in OUTPUT_AXES:
        raise ValueError(f"outputs must be one of {', '.join(map(repr, OUTPUT_AXES))}, got {outputs!r}")
    return outputs


def output_shape(outputs: str, num_outputs: int) -> tuple[int, ...]:
    """Trailing shape of the kernel: ``(C, C)``, ``(C,)`` or ``()``."""
    return (num_outputs,) * OUTPUT_AXES[outputs]


def factor_products(a: Float[Array, "a C p"], b: Float[Array, "b C p"], outputs: str) -> Float[Array, "a b *O"]:
    """⟨a_i^c, b_j^d⟩ for the output pairs ``outputs`` keeps (module docstring), in the factors' dtype."""
    if outputs == "full":
        return jnp.einsum("acp,bdp->abcd", a, b)
    if outputs == "diagonal":
        return jnp.einsum("acp,bcp->abc", a, b)
    return a.reshape(len(a), -1) @ b.reshape(len(b), -1).T


def times_pair_scale(kernel: Float[Array, "a b *O"], scale: Float[Array, "a b"]) -> Float[Array, "a b *O"]:
    """``kernel`` times a per-example-pair factor, broadcast over its output axes."""
    return kernel * scale.reshape(*scale.shape, *(1,) * (kernel.ndim - 2))
