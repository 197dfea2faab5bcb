"""Targets derived from other stages' outputs."""

from __future__ import annotations

import numpy as np


def eigenvector_sign_targets(eigenvectors: np.ndarray, index: int) -> np.ndarray:
    """y = sign φ_j (linearized-networks Sec. 3.1) as an (n, 1) column of ±1 (sign 0 → +1).

    ``eigenvectors`` holds φ_1, φ_2, … as columns (descending eigenvalue); ``index`` is j ≥ 1.
    """
    phi = np.asarray(eigenvectors)[:, index - 1]
    return np.where(phi >= 0, 1.0, -1.0)[:, None]
