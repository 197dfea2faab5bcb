"""Eigendecomposition of a Gram matrix (float64), with a reproducible sign for each eigenvector."""

from __future__ import annotations

import numpy as np
import scipy.linalg


def top_eigenpairs(gram: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues λ₁ ≥ λ₂ ≥ … and unit eigenvectors φ_j (columns) of a symmetric Gram.

    Returns ``(eigenvalues (k,), eigenvectors (n, k))`` in float64. Each φ_j's sign is fixed so its
    largest-magnitude entry is positive, making the labels sign φ_j reproducible across LAPACKs.
    """
    gram = np.asarray(gram, dtype=np.float64)
    n = gram.shape[0]
    k = n if k is None else min(int(k), n)
    values, vectors = scipy.linalg.eigh(0.5 * (gram + gram.T), subset_by_index=[n - k, n - 1])
    values, vectors = values[::-1], vectors[:, ::-1]
    pivots = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(k)]
    return values, vectors * np.sign(pivots)
