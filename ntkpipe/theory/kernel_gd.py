"""Kernel gradient descent with a frozen kernel (KGD; kernel-alignment-theory Sec. 3, Fig. 1, Eq. 4).

Full-batch gradient descent on ntkpipe's loss (1/2P) Σ_μ |f(x_μ) − y_μ|² with the kernel K held fixed
moves the train residual Δ = f − y and the test outputs by (rate r = η/P; Eq. 4 with η → r)

    Δ_{k+1} = (I − rK) Δ_k,        f_test,k+1 = f_test,k − r K_te,tr Δ_k,

so with K = VΛVᵀ

    Δ_k = V (1 − rλ)^k VᵀΔ₀,        f_test,k = f_test,0 − K_te,tr V S_k(λ) VᵀΔ₀,
    S_k(λ) = r Σ_{j<k} (1 − rλ)^j = (1 − (1 − rλ)^k)/λ   (→ kr as λ → 0).

A linearized network trained by full-batch GD is exactly KGD with its initial NTK; KGD with the initial
NTK rescaled to the final network NTK's norm is the paper's aKGD.
"""

from __future__ import annotations

import numpy as np


def _decay_and_sum(x: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(1 − x)^k and Σ_{j<k} (1 − x)^j = (1 − (1 − x)^k)/x for x = rλ, as (T, n) arrays.

    Powers go through k·log|1 − x| (log1p for x < 1), so large k costs nothing and small x loses
    no digits; x = 0 gives the limit k.
    """
    k = steps.astype(np.float64)[:, None]
    below = x < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_base = np.where(below, np.log1p(-np.where(below, x, 0.0)), np.log(np.abs(1.0 - x)))
        exponent = np.where(k == 0.0, 0.0, k * log_base)
        sign = np.where(below | (np.mod(k, 2.0) == 0.0), 1.0, -1.0)
        power = sign * np.exp(exponent)
        one_minus_power = np.where(below, -np.expm1(exponent), 1.0 - power)
        total = np.where(x == 0.0, k, one_minus_power / np.where(x == 0.0, 1.0, x))
    return power, total


def kernel_gd(k_train, k_test_train, delta0, f0_test, rate: float,
              steps) -> tuple[np.ndarray, np.ndarray]:
    """Exact KGD at checkpoint ``steps``: train residuals Δ_k (T, n) and test outputs f_test,k (T, m).

    ``k_train`` is the (n, n) train kernel, ``k_test_train`` the (m, n) test–train block (m may be 0),
    ``delta0`` = f₀ − y and ``f0_test`` the (m,) initial test outputs, all flattened over
    (example, output); ``rate`` = η/P; ``steps`` any non-negative integers (e.g. up to 10⁵ and more).
    """
    k_train = np.asarray(k_train, dtype=np.float64)
    k_test_train = np.asarray(k_test_train, dtype=np.float64).reshape(-1, k_train.shape[0])
    steps = np.asarray(steps, dtype=np.int64).reshape(-1)
    lam, v = np.linalg.eigh(0.5 * (k_train + k_train.T))
    coeffs = v.T @ np.asarray(delta0, dtype=np.float64)
    power, total = _decay_and_sum(rate * lam, steps)
    delta = (power * coeffs) @ v.T
    f_test = np.asarray(f0_test, dtype=np.float64) - (rate * total * coeffs) @ (k_test_train @ v).T
    return delta, f_test
