"""Synthetic data: Gaussian, sphere or line inputs with linear teachers (silent-alignment Sec. 3,
kernel-alignment Sec. 5.2, solvable-model Sec. 2), random ±1 labels on the sphere (kernel-alignment Sec. 6.1, App. E.4)
and a mixture of Gaussians around orthonormal centres (kernel-alignment Sec. 6.2, App. E.5)."""

from __future__ import annotations

import numpy as np


def gaussian_inputs(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """x ~ N(0, I_D), shape (n, D), float64."""
    return rng.standard_normal((n, dim))


def sphere_inputs(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """x = g/|g| with g ~ N(0, I_D): uniform on the unit sphere S^{D−1}, shape (n, D)."""
    g = rng.standard_normal((n, dim))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def line_direction(dim: int, seed: int) -> np.ndarray:
    """n, the unit direction of data on a line x = a·n (solvable-model Sec. 2), drawn from the data
    seed alone so that inputs and teacher share it."""
    g = np.random.default_rng([seed, 1]).standard_normal(dim)
    return g / np.linalg.norm(g)


def line_inputs(n: int, dim: int, seed: int, rng: np.random.Generator) -> np.ndarray:
    """x_μ = a_μ n with a_μ ~ N(0, 1), shape (n, D); a single point is the unit input x = n."""
    a = np.ones(1) if n == 1 else rng.standard_normal(n)
    return np.outer(a, line_direction(dim, seed))


def unit_teacher(dim: int, rng: np.random.Generator) -> np.ndarray:
    """β uniform on the unit sphere in R^D (|β| = 1)."""
    beta = rng.standard_normal(dim)
    return beta / np.linalg.norm(beta)


def random_signs(n: int, rng: np.random.Generator) -> np.ndarray:
    """y ∈ {−1, +1} i.i.d. with probability ½ each, shape (n,)."""
    return rng.choice([-1.0, 1.0], size=n)


def orthonormal_centres(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """μ_1 … μ_C as rows (C, D): the first C columns of a Haar-random orthogonal matrix of R^D
    (Q of the QR of a D × C Gaussian matrix, column signs fixed by diag R > 0), so μ_c·μ_d = δ_cd."""
    q, r = np.linalg.qr(rng.standard_normal((dim, count)))
    return (q * np.sign(np.diag(r))).T


def mixture_samples(centres: np.ndarray, n: int, sigma: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n/C points of each class c, x = μ_c + σξ with ξ ~ N(0, I_D), in random order.

    Returns ``(x (n, D), class index (n,) int)``; n must be a multiple of C.
    """
    count = len(centres)
    labels = rng.permutation(np.repeat(np.arange(count), n // count))
    return centres[labels] + sigma * rng.standard_normal((n, centres.shape[1])), labels
