"""Kernel rotation during training (linearized-networks Sec. 4): how the NTK turns towards the task.

* Energy concentration (Sec. 4.2, Table 1): E_K(y) = ‖Φ_Kᵀ y‖ / ‖y‖, with Φ_K the top-K unit
  eigenvectors of the current Gram Θ_t; 1 when y lies in the span of the top K eigenvectors.
* Single-axis rotation (Sec. 4.3, Fig. 7): α_T(φ_i) / α_0(φ_i) with α_t(φ) = φᵀ Θ_t φ = ‖J_tᵀ φ‖²
  for the init eigenvectors φ_i; it peaks at the trained index when training on sign φ_j.
* Distances in weight space (Figs. 3, 13, 14): ‖θ_T − θ_0‖₂ and 1 − cos(θ_T, θ_0).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ntkpipe.ntk.eigen import top_eigenpairs


def energy_concentration(gram: np.ndarray, y: np.ndarray, top_k: int) -> float:
    """‖Φ_Kᵀ vec(y)‖ / ‖vec(y)‖ for the top ``top_k`` eigenvectors Φ_K of the (n·C, n·C) ``gram``;
    NaN for a Gram with a non-finite entry (e.g. an ``ofe_fit`` run that no γ̂ ≥ 0 fits), which has
    no eigenvectors."""
    if not np.all(np.isfinite(gram)):
        return float("nan")
    v = np.asarray(y, np.float64).reshape(-1)
    _, vectors = top_eigenpairs(gram, top_k)
    return float(np.linalg.norm(vectors.T @ v) / np.linalg.norm(v))


def parameter_distances(theta_final: ArrayLike, theta_init: ArrayLike) -> tuple[float, float]:
    """(‖θ_T − θ_0‖₂, 1 − θ_Tᵀθ_0 / (‖θ_T‖‖θ_0‖)) of two flat parameter vectors."""
    a, b = np.asarray(theta_final, np.float64), np.asarray(theta_init, np.float64)
    cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.linalg.norm(a - b)), float(1.0 - cosine)
