"""scikit-learn's bundled 8×8 digits (1,797 images, values 0–16): the built-in real data."""

from __future__ import annotations

import numpy as np


def digits_pool() -> tuple[np.ndarray, np.ndarray]:
    """All digits as ``(x (1797, 8, 8, 1) float64 in [0, 1], labels (1797,) int)``."""
    from sklearn.datasets import load_digits  # imported here: scikit-learn takes a second to import

    bunch = load_digits()
    return bunch.images[..., None].astype(np.float64) / 16.0, bunch.target.astype(np.int64)
