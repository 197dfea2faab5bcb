"""Synthetic regression data: Gaussian inputs and a linear teacher (silent-alignment Sec. 3)."""

from __future__ import annotations

import numpy as np


def gaussian_inputs(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """x ~ N(0, I_D), shape (n, D), float64."""
    return rng.standard_normal((n, dim))


def unit_teacher(dim: int, rng: np.random.Generator) -> np.ndarray:
    """β uniform on the unit sphere in R^D (|β| = 1)."""
    beta = rng.standard_normal(dim)
    return beta / np.linalg.norm(beta)
