"""scikit-learn's bundled 8×8 digits (1,797 images, values 0–16): the built-in real data."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    from sklearn.utils import Bunch


def digits_pool() -> tuple[np.ndarray, np.ndarray]:
    """All digits as ``(x (1797, 8, 8, 1) float64 in [0, 1], labels (1797,) int)``."""
    from sklearn.datasets import load_digits  # imported here: scikit-learn takes a second to import

    bunch = cast("Bunch", load_digits())  # a Bunch unless return_X_y=True (scikit-learn has no annotations)
    return bunch.images[..., None].astype(np.float64) / 16.0, bunch.target.astype(np.int64)
