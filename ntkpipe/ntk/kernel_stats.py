"""Scalar summaries of an NTK Gram matrix."""

from __future__ import annotations

import numpy as np


def kernel_norm(gram: np.ndarray) -> float:
    """‖K‖_F of a flattened (P·C, P·C) Gram."""
    return float(np.linalg.norm(gram))


def kernel_alignment(gram: np.ndarray, y: np.ndarray) -> float:
    """A = yᵀKy / (‖K‖_F ‖y‖²) (Cortes et al. 2012; kernel-alignment-theory Eq. 2).

    ``gram`` is (P·C, P·C) in (example, output) order and ``y`` the targets (P, C), flattened
    the same way. A ∈ [-1, 1]; A = 1 iff K ∝ yyᵀ.
    """
    v = np.asarray(y, dtype=np.float64).reshape(-1)
    return float(v @ gram @ v / (np.linalg.norm(gram) * (v @ v)))
