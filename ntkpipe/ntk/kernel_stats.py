"""Scalar summaries of an NTK Gram matrix."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import jax


def kernel_norm(gram: np.ndarray) -> float:
    """‖K‖_F of a flattened (P·C, P·C) Gram."""
    return float(np.linalg.norm(gram))


def kernel_alignment(gram: np.ndarray | jax.Array, y: np.ndarray, xp=np) -> float:
    """A = yᵀKy / (‖K‖_F ‖y‖²) (Cortes et al. 2012; kernel-alignment-theory Eq. 2).

    ``gram`` is (P·C, P·C) in (example, output) order and ``y`` the targets (P, C), flattened
    the same way. A ∈ [-1, 1]; A = 1 iff K ∝ yyᵀ. ``xp`` is the array library that computes it
    (``numpy``, or ``jax.numpy`` for a Gram on the device).
    """
    v = xp.asarray(y, dtype=xp.float64).reshape(-1)
    return float(v @ gram @ v / (xp.linalg.norm(gram) * (v @ v)))
