"""Multi-output kernel structure: subkernels, traced kernel, kernel specialization (kernel-alignment Sec. 4.3).

All functions take a kernel K of shape (P, P, C, C) (as :func:`ntkpipe.ntk.empirical_ntk` returns it)
and targets y of shape (P, C), column y_d the target of output d: one-hot 0/1 class indicators or
±1 labels alike. A target column with y_d = 0 (a class absent from the points) gives NaN where it
divides.
"""

from __future__ import annotations

import numpy as np


def subkernel(kernel: np.ndarray, c: int, d: int) -> np.ndarray:
    """K^{c,d} = K[:, :, c, d], (K^{c,d})_{μν} = ∇_θ f_c^μ · ∇_θ f_d^ν (Eq. 8)."""
    return kernel[:, :, c, d]


def traced_kernel(kernel: np.ndarray) -> np.ndarray:
    """K_tr = C⁻¹ Σ_c K^{c,c}, (P, P) (Sec. 4.3)."""
    return np.einsum("ijcc->ij", kernel) / kernel.shape[-1]


def traced_alignment(kernel: np.ndarray, y: np.ndarray) -> float:
    """A(K_tr, YYᵀ) = ⟨K_tr, YYᵀ⟩_F / (‖K_tr‖_F ‖YYᵀ‖_F) with YYᵀ = Σ_d y_d y_dᵀ (Baratin et al. 2021)."""
    k_tr, yy = traced_kernel(kernel), y @ y.T
    return float(np.sum(k_tr * yy) / (np.linalg.norm(k_tr) * np.linalg.norm(yy)))


def _diagonal_subkernels(kernel: np.ndarray) -> np.ndarray:
    """(C, P, P): K^{c,c} for c = 1 … C."""
    return np.moveaxis(np.diagonal(kernel, axis1=2, axis2=3), -1, 0)


def target_projections(kernel: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(C, C): entry (c, d) = y_dᵀ K^{c,c} y_d / |y_d|², the Rayleigh quotient of output c's
    subkernel along target d (the bilinear form B^c(y_d) of Sec. 6.2, normalized)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.einsum("md,cmn,nd->cd", y, _diagonal_subkernels(kernel), y, optimize=True) \
            / np.sum(y**2, axis=0)


def trace_per_point(kernel: np.ndarray) -> np.ndarray:
    """(C,): tr(K^{c,c}) / P = ⟨zᵀK^{c,c}z⟩ over unit z uniform on the sphere (Sec. 6.1)."""
    return np.einsum("iicc->c", kernel) / kernel.shape[0]


def subkernel_alignments(kernel: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(C, C): entry (c, d) = A(K^{c,c}, y_d y_dᵀ) = y_dᵀ K^{c,c} y_d / (‖K^{c,c}‖_F |y_d|²) (Eq. 3)."""
    norms = np.linalg.norm(_diagonal_subkernels(kernel), axis=(1, 2))
    return target_projections(kernel, y) / norms[:, None]


def kernel_specialization_matrix(kernel: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(C, C) KSM(c, d) = A(K^{c,c}, y_d y_dᵀ) / (C⁻¹ Σ_{d'} A(K^{d',d'}, y_d y_dᵀ)) (Eq. 9).

    Each column d is output c's alignment with target d relative to the mean over outputs, so a
    column averages to 1; KSM ≡ 1 when all K^{c,c} are equal (the infinite-width limit), and a
    diagonal above 1 means each output's subkernel aligned with its own target (specialization).
    """
    alignments = subkernel_alignments(kernel, y)
    return alignments / alignments.mean(axis=0, keepdims=True)


def diagonal_ratio(matrix: np.ndarray) -> float:
    """Mean of the diagonal over mean of the off-diagonal entries of a (C, C) matrix, C ≥ 2."""
    off = ~np.eye(len(matrix), dtype=bool)
    return float(np.mean(np.diagonal(matrix)) / np.mean(matrix[off]))


def own_and_other(growth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means over c of growth[:, c, c] and over c ≠ d of growth[:, c, d] (NaN for one output)."""
    c = growth.shape[-1]
    own = np.einsum("tcc->t", growth) / c
    other = (growth.sum(axis=(1, 2)) - c * own) / (c * (c - 1)) if c > 1 else np.full(len(growth), np.nan)
    return own, other


def growth_ratio(growth: np.ndarray | float, reference: np.ndarray | float) -> np.ndarray:
    """growth / reference, NaN where the reference did not grow (0: the ratio is undefined)."""
    growth, reference = np.asarray(growth, np.float64), np.asarray(reference, np.float64)
    safe = np.where(reference == 0, 1.0, reference)
    return np.where(reference == 0, np.nan, growth / safe)


def finite_mean(values, axis: int) -> np.ndarray:
    """The mean of the finite values along ``axis``; NaN where there is none (a component measured at no
    checkpoint, or NaN for the model), without the warning of ``np.nanmean`` on an empty slice."""
    values = np.asarray(values, np.float64)
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def component_growth(series: dict[str, np.ndarray]) -> dict[str, np.ndarray | float]:
    """Growth (value − initial value) of the readout (K_V) and hidden (K_W) components along the
    targets, from the series ``kv_projection``, ``kw_projection`` (time, C, C), ``kv_trace``,
    ``kw_trace`` (time, C) and ``subset_outputs`` (time, P, C) (Sec. 6, Figs. 6–7).

    Own growth averages y_cᵀK_X^{c,c}y_c/|y_c|² over c, other growth y_dᵀK_X^{c,c}y_d/|y_d|² over
    c ≠ d. The end-of-training ratios and their theory values:
    ``kv_growth_ratio`` = mean_c [Δ(ŷ_cᵀK_V^{c,c}ŷ_c) / Δ(tr K_V^{c,c}/P)] / (P/2) ≈ 1 (K_V grows ≈ P/2
    times faster along y than on average; Eq. 16, Eqs. 78–82, :mod:`ntkpipe.theory.relu_components`);
    ``kw_isotropy_ratio``, the same for K_W without the P/2, ≈ 1 (isotropic growth, Eq. 86);
    ``kw_specialization_ratio`` = own / other growth of K_W ≈ 2 (Eq. 21) and
    ``kv_specialization_ratio`` ≈ 1 (K_V^{c,c} is the same for all c); ``kv_target_growth``, the
    end-of-training growth of K_V along each target d, mean over c (Fig. 7A: alike for every d).
    """
    p = series["subset_outputs"].shape[1]
    out, along_over_trace = {}, {}
    for key in ("kv", "kw"):
        projection = series[f"{key}_projection"] - series[f"{key}_projection"][0]
        trace = series[f"{key}_trace"] - series[f"{key}_trace"][0]
        own, other = own_and_other(projection)
        out |= {f"{key}_own_growth": own, f"{key}_other_growth": other,
                f"{key}_specialization_ratio": float(growth_ratio(own[-1], other[-1]))}
        along_over_trace[key] = float(np.mean(growth_ratio(np.diagonal(projection[-1]), trace[-1])))
    kv_growth = series["kv_projection"][-1] - series["kv_projection"][0]  # (output c, target d)
    return out | {"kv_target_growth": finite_mean(kv_growth, axis=0),
                  "kv_growth_ratio": along_over_trace["kv"] / (p / 2.0),
                  "kw_isotropy_ratio": along_over_trace["kw"],
                  "kw_other_growth_theory": 0.5 * out["kw_own_growth"]}
