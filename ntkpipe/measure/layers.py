"""Array math on weight matrices: alignments between layers and with the teacher, sums of layer norms."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def first_layer_alignment(w1, beta: np.ndarray) -> float:
    """cos(W₁ᵀW₁, ββᵀ) = βᵀW₁ᵀW₁β / (‖W₁ᵀW₁‖_F |β|²) of a first layer W₁ (hidden, inputs), in float64.

    Reaches 1 when the first layer has become rank one along the teacher direction β. Computed as
    |W₁β|² / (‖W₁ᵀW₁‖_F |β|²), the norm from the smaller of W₁ᵀW₁ and W₁W₁ᵀ (equal Frobenius norms).
    """
    w, beta = np.asarray(w1, np.float64), np.asarray(beta, np.float64).reshape(-1)
    gram = w @ w.T if w.shape[0] < w.shape[1] else w.T @ w
    return float(np.sum((w @ beta) ** 2) / (np.linalg.norm(gram) * (beta @ beta)))


def layer_alignment(w: np.ndarray, u: np.ndarray, n: np.ndarray) -> tuple[float, float, float]:
    """(cos θ, |u|, |w|) of a two-layer net's readout u and first layer W along the input direction n:
    cos θ = u·w / (|u||w|) with w = W n."""
    w = np.asarray(w, np.float64) @ n
    u = np.asarray(u, np.float64)
    u_norm, w_norm = float(np.linalg.norm(u)), float(np.linalg.norm(w))
    return float(u @ w) / (u_norm * w_norm), u_norm, w_norm


def gram_alignment(upper: np.ndarray, lower: np.ndarray) -> float:
    """cos(AᵀA, BBᵀ) = tr(AᵀA BBᵀ) / (‖AᵀA‖_F ‖BBᵀ‖_F) = ‖AB‖_F² / (‖AᵀA‖_F ‖BBᵀ‖_F) of a layer A =
    ``upper`` (n_out, n) reading the n units that B = ``lower`` (n, n_in) writes, in float64.

    The layer alignment of solvable-model Sec. 2.2 for any two adjacent layers: with A = uᵀ and B = w
    (a two-layer net with one input dimension, W = w) it is (u·w)²/(|u|²|w|²) = cos²θ. It is 1 iff AᵀA ∝ BBᵀ (the
    directions A reads are those B writes, as for balanced aligned layers) and near its random-matrix
    value for independent Gaussian layers; it does not change when either layer is rescaled.
    """
    a, b = np.asarray(upper, np.float64), np.asarray(lower, np.float64)
    ata, bbt = a.T @ a, b @ b.T
    return float(np.sum(ata * bbt) / (np.linalg.norm(ata) * np.linalg.norm(bbt)))


def layer_norm_sum(leaves: list, layers: Sequence[int], count: int) -> float:
    """Σ_ℓ ‖θ_ℓ‖₂ over ``count`` layers, ‖θ_ℓ‖₂² summing the squares of the arrays ``leaves`` whose
    layer index (``layers``) is ℓ; indices ≥ ``count`` add up in one more group."""
    squares = np.zeros(count + 1)
    for c, leaf in zip(layers, leaves):
        squares[min(c, count)] += float(np.sum(np.asarray(leaf, np.float64) ** 2))
    return float(np.sum(np.sqrt(squares)))
