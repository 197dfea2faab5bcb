"""Partial whitening X_γ = U S^γ Vᵀ (silent-alignment Sec. 5, Fig. 4)."""

from __future__ import annotations

import numpy as np


def partial_whitening_map(x_train: np.ndarray, gamma: float, rtol: float = 1e-10) -> np.ndarray:
    """The D×D map M with X M = X_γ = U S^γ Vᵀ for the thin SVD X = U S Vᵀ of the (P, D) inputs.

    M = V S^{γ−1} Vᵀ c, with c chosen so the nonzero eigenvalues of X_γᵀX_γ / P average 1:
    γ = 0 gives exact whitening on the span (X_0ᵀX_0 / P = V Vᵀ), γ = 1 only rescales. Directions
    with singular value below ``rtol``·S_max are dropped (the map is zero there). Apply M to test
    inputs too. float64.
    """
    x = np.asarray(x_train, dtype=np.float64)
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    keep = s > rtol * s.max()
    s, v = s[keep], vt[keep].T
    eig = s ** (2 * gamma) / x.shape[0]
    c = 1.0 / np.sqrt(eig.mean())
    return (v * (s ** (gamma - 1.0) * c)) @ v.T
