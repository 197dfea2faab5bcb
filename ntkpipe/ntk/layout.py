"""Index layout of the (example, output) Gram."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
from jaxtyping import Array, Float

AnyArray = TypeVar("AnyArray", np.ndarray, Array)
"""A NumPy or a JAX array: the layout gives back the kind it is given."""


def flatten_gram(kernel: Float[AnyArray, "*batch n1 n2 C C"]) -> Float[AnyArray, "*batch n1C n2C"]:
    r"""Flatten an NTK ``K[..., i, j, c, d]`` to the matrix ``Θ[..., i·C + c, j·C + d]``.

    Rows and columns run over (example, output) pairs with the output index fastest, so a cotangent
    ``v`` of shape ``(n, C)`` pairs with ``v.reshape(-1)``: ``vᵀΘv = Σ_{ijcd} v_ic K_ijcd v_jd``.
    Leading (e.g. per-layer) axes are kept.

    Args:
        kernel: ``(..., n1, n2, C, C)``, as returned by :func:`empirical_ntk`.

    Returns:
        ``(..., n1·C, n2·C)``.

    Example:
        >>> K = empirical_ntk(model, x)                  # (n, n, C, C)
        >>> theta = flatten_gram(K)                      # (n·C, n·C), symmetric PSD
        >>> eigenvalues = jnp.linalg.eigvalsh(theta)
    """
    *batch, n1, n2, c1, c2 = kernel.shape
    return kernel.swapaxes(-3, -2).reshape(*batch, n1 * c1, n2 * c2)
