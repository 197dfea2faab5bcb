r"""Linearly separable data along one direction u: the NAD tasks of linearized-networks App. C.1.

    x = m · y · u + w,    y ∈ {−1, +1},    w ~ N(0, σ²(I − uuᵀ)),    m = ε/2 or ε

The paper (Eq. 5) writes the margin as ε and the noise covariance as σ(I − uuᵀ); the authors' code
uses m = ε/2 (``half_margin=True``, the default) and draws w as σ·N(0, I) projected orthogonally to
u, i.e. covariance σ²(I − uuᵀ). With ε = σ = 1 (the paper's values) only the margin differs.
"""

from __future__ import annotations

import numpy as np


def nad_samples(
    direction: np.ndarray,
    n: int,
    rng: np.random.Generator,
    *,
    epsilon: float = 1.0,
    sigma: float = 1.0,
    half_margin: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` examples x = m·y·u + w of the task x ↦ sign(uᵀx) (App. C.1), u = direction / |direction|.

    Labels are balanced: n // 2 of each sign (the odd one out, if any, a fair coin), then shuffled.
    The noise is σ·N(0, I) with its component along u removed, so uᵀx = m·y exactly.

    Args:
        direction: u up to scale, of any example shape (e.g. a NAD of shape ``(H, W, C)``).
        n: number of examples.
        rng: source of the labels and the noise.
        epsilon: ε; the margin m is ε/2 with ``half_margin`` (authors' code), else ε (paper).
        sigma: σ, noise standard deviation in every direction orthogonal to u.
        half_margin: use m = ε/2.

    Returns:
        ``(x (n, *direction.shape) float64, y (n,) float64 in {−1, +1})``.

    Raises:
        ValueError: ``direction`` is zero.

    Example:
        >>> sigma_sq, nads = neural_anisotropy_directions(model, (32, 32, 1), top_k=10)
        >>> x_train, y_train = nad_samples(nads[4], 10_000, np.random.default_rng(0))
    """
    direction = np.asarray(direction, dtype=np.float64)
    norm = np.linalg.norm(direction)
    if norm == 0:
        raise ValueError("direction must be nonzero: it is the normal u of the separating hyperplane")
    u = direction.reshape(-1) / norm
    half = n // 2
    labels = np.concatenate([np.ones(half), -np.ones(half), rng.choice([-1.0, 1.0], size=n - 2 * half)])
    y = rng.permutation(labels)
    w = sigma * rng.standard_normal((n, u.size))
    w -= np.outer(w @ u, u)
    margin = epsilon / 2 if half_margin else epsilon
    x = margin * y[:, None] * u + w
    return x.reshape(n, *direction.shape), y
