"""Teacher overlaps of a two-layer linear network f = aᵀWx (silent-alignment App. C.1, C.4, C.5).

Whitened inputs (XᵀX/P = I), teacher y = s βᵀx with |β| = 1, loss (1/2P)Σ(f − y)², gradient flow
ȧ = W(sβ − Wᵀa), Ẇ = a(sβ − Wᵀa)ᵀ (Eq. 4). The NTK is xᵀMx' with M = WᵀW + |a|²I (Eq. 5), and two
overlaps summarize the dynamics:

    q = ½[|a|² + βᵀWᵀWβ] = ½ βᵀMβ,        r = aᵀWβ = f's component along the teacher.

Early on (output ≈ 0) they obey the linear system d/dt[q; r] = 2s[[0, 1], [1, 0]][q; r] (Eq. 33).
With a and w = Wβ carrying the growing mode, the full flow is ȧ = (s − r)w, ẇ = (s − r)a up to the
O(σ²) part of W orthogonal to β, so (q + r)/2 = |a + w|²/4 follows the logistic ċ = 2c(s − c) of C.4
from c₀ = (q₀ + r₀)/2, while q − r decays as e^{−2st}; matching the two phases gives Eq. 50–51.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ntkpipe.models import MLP
from ntkpipe.theory.final_kernel import target_modes


def early_overlaps(t, q0: float, r0: float, s: float) -> tuple[np.ndarray, np.ndarray]:
    """q(t), r(t) of the linearized early dynamics, Eq. 33 (valid while q ≪ s):

        q = ½(q₀ + r₀)e^{2st} + ½(q₀ − r₀)e^{−2st},    r = ½(q₀ + r₀)e^{2st} − ½(q₀ − r₀)e^{−2st}.
    """
    e = np.exp(2.0 * s * np.asarray(t, dtype=np.float64))
    grow, decay = 0.5 * (q0 + r0) * e, 0.5 * (q0 - r0) / e
    return grow + decay, grow - decay


def overlaps(t, q0: float, s: float, r0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """q(t), r(t) over the whole trajectory, Eq. 50–51, exact up to O(σ²):

        q = 2s cosh(2st) / ((e^{2st} − 1) + 2s/q₀),    r = 2s sinh(2st) / ((e^{2st} − 1) + 2s/q₀)

    for r₀ = 0 (the large-D limit, Eq. 34). For r₀ ≠ 0 this is Eq. 33 divided by
    1 + (q₀ + r₀)(e^{2st} − 1)/(2s), so that (q + r)/2 is the C.4 logistic from c₀ = (q₀ + r₀)/2;
    at finite D, r₀ = O(q₀/√D) shifts the transition by ln(1 + r₀/q₀)/(2s), so pass the measured r₀.
    q(0) = q₀, r(0) = r₀; q, r → s as t → ∞; early on q → q₀ cosh 2st, r → q₀ sinh 2st.
    """
    q, r = early_overlaps(t, q0, r0, s)
    e = np.exp(2.0 * s * np.asarray(t, dtype=np.float64))
    saturation = 1.0 + (q0 + r0) * (e - 1.0) / (2.0 * s)
    return q / saturation, r / saturation


def readout_norm_sq(t, q0: float, s: float, r0: float, u0_sq: float) -> np.ndarray:
    """u(t)² = |a(t)|² from the measured initial state (q₀, r₀, u₀² = |a₀|²), derived here
    (docs/papers.md §3.3): with w = Wβ, d(|a|² − |w|²)/dt = −2|Wᵀa − (aᵀWβ)β|², which is O(σ⁴), so
    |a|² − q = ½(|a|² − |w|²) keeps its initial value u₀² − q₀ and

        u(t)² = q(t) + u₀² − q₀ = c(t) + ½(q₀ − r₀)e^{−2st}/S(t) + u₀² − q₀,

    q(t) of :func:`overlaps`, c(t) the Eq. C.4 logistic from c₀ = (q₀ + r₀)/2 and S(t) its saturation.
    For a balanced, aligned init (|a₀| = |W₀β|, r₀ = q₀) this is Eq. C.4 with u₀² = q₀."""
    return overlaps(t, q0, s, r0)[0] + (u0_sq - q0)


def max_log_error(measured: ArrayLike, theory: ArrayLike) -> float:
    """max_t |ln(measured(t)/theory(t))| over the times where both are finite and positive: an error
    relative to the value at each time, for quantities spanning decades (q, u² grow from σ² to s)."""
    measured, theory = np.asarray(measured, dtype=np.float64), np.asarray(theory, dtype=np.float64)
    both = np.isfinite(measured) & np.isfinite(theory) & (measured > 0) & (theory > 0)
    return float(np.max(np.abs(np.log(measured[both] / theory[both])))) if both.any() else float("nan")


def max_scaled_error(measured: ArrayLike, theory: ArrayLike, scale: ArrayLike) -> float:
    """max_t |measured(t) − theory(t)| / scale(t) over the times where all three are finite and the scale
    is positive: for r(t), which crosses 0, scaled by q(t) ≥ |r(t)| (q = ½(|a|² + |Wβ|²) ≥ |a||Wβ|)."""
    measured, theory, scale = (np.asarray(v, dtype=np.float64) for v in (measured, theory, scale))
    both = np.isfinite(measured) & np.isfinite(theory) & np.isfinite(scale) & (scale > 0)
    return float(np.max(np.abs(measured[both] - theory[both]) / scale[both])) if both.any() else float("nan")


def teacher_overlaps(w: ArrayLike, a: ArrayLike, beta) -> tuple[float, float]:
    """(q, r) = (½[|a|² + βᵀWᵀWβ], aᵀWβ) of a first layer W (hidden, inputs) and a readout a (hidden,)."""
    w, a = np.asarray(w, dtype=np.float64), np.asarray(a, dtype=np.float64)
    wb = w @ np.asarray(beta, dtype=np.float64)
    return float(0.5 * (a @ a + wb @ wb)), float(a @ wb)


def initial_overlaps(model: MLP, beta) -> tuple[float, float]:
    """(q₀, r₀) of a depth-2, single-output ``MLP`` (a = W₂[0], W = W₁): :func:`teacher_overlaps`."""
    if model.depth != 2 or model.weights[1].shape[0] != 1:
        raise ValueError(f"need a two-layer single-output network, got depth {model.depth} "
                         f"with {model.weights[-1].shape[0]} outputs")
    return teacher_overlaps(model.weights[0], np.asarray(model.weights[1])[0], beta)


def initial_mode_gains(model: MLP, x, targets) -> np.ndarray:
    """Effective initial strengths c₀ of the target modes of a two-layer linear ``MLP`` (any number of
    outputs) on whitened inputs, for ``final_kernel.mode_strength_trajectories`` with L = 2.

    Derived here from Eq. 33 applied per mode (not in the paper): with Σ_yx = Σ_k s_k u_k v_kᵀ
    (``target_modes``), a_k = W₂ᵀu_k and w_k = W₁v_k obey ȧ_k = s_k w_k, ẇ_k = s_k a_k early on, so
    mode k grows along g_k = (a_k + w_k)/2 from |g_k|² = (q₀ + r₀)/2 of that mode. A mode learned later
    (smaller s_k) loses the part of g_k along the hidden directions the stronger modes already hold,
    so c₀_k is the squared norm of g_k minus its projection on span(g_1 … g_{k−1}): R_kk² of the QR
    of [g_1 … g_K] in order of decreasing s_k. Needs distinct s_k and small σ, so that the modes'
    transitions are well separated. For one output c₀ = (q₀ + r₀)/2, as in ``overlaps``.
    """
    if model.depth != 2:
        raise ValueError(f"need a two-layer network, got depth {model.depth}")
    v, _, u = target_modes(x, targets)
    w1, w2 = (np.asarray(w, dtype=np.float64) for w in model.weights)
    growing = 0.5 * (w2.T @ u + w1 @ v)
    return np.diag(np.linalg.qr(growing, mode="r")) ** 2
