r"""Growth of the readout and hidden NTK components of a two-layer ReLU net (kernel-alignment Sec. 6.1,
Eq. 16; App. D.2, Eqs. 62–86), re-derived in ntkpipe's convention.

Network f^μ = Σ_i V_i φ_i^μ, φ_i^μ = ReLU(w_i·x^μ), D_i^μ = φ'(w_i·x^μ), scalar output, no bias,
loss L = (1/2P) Σ_μ (f^μ − y^μ)². ntkpipe's time is t = η·step, so gradient flow in t reads
θ̇ = −∇L = (1/P) Σ_ν r^ν ∇f^ν with residual r = y − f: η does not appear (the paper's η and its
loss's factor 2, partly dropped in Eqs. 62–66, are both absorbed). Then

    V̇_i = (1/P) Σ_ν r^ν φ_i^ν,    ẇ_i = (1/P) Σ_ν r^ν V_i D_i^ν x^ν,
    φ̇_i^μ = D_i^μ x^μ·ẇ_i = (1/P) D_i^μ r^μ V_i          (|x^μ| = 1, x^μ ⊥ x^ν; Eqs. 64–66)

with the signs D static (Sec. 6). K_V = ΦᵀΦ, so α(z) = zᵀK_V z = Σ_i (Σ_μ z^μ φ_i^μ)² (Eq. 68), and
K_W^{μν} = Σ_i V_i² D_i^μ D_i^ν x^μ·x^ν, so β(z) = Σ_μ (z^μ)² Σ_i V_i² D_i^μ (Eq. 71). Both rates
involve S^{μν} = Σ_i D_i^μ V_i φ_i^ν, which is f^μ for ν = μ (φD = φ) and ≈ f^ν/2 otherwise
(the ansatz, Eq. 59). Hence

    α̇(z) = (2/P) Σ_μ r^μ z^μ Σ_ν z^ν S^{μν} ≈ (1/P) [Σ_μ r^μ (z^μ)² f^μ + (rᵀz)(zᵀf)]      (Eq. 76)
    ⟨α̇⟩_z = d/dt tr(K_V)/P = (2/P²) rᵀf                                                 (Eq. 78)
    β̇(z) = (2/P) Σ_μ (z^μ)² Σ_ν r^ν S^{μν} ≈ (1/P) [Σ_μ (z^μ)² r^μ f^μ + |z|² rᵀf]      (Eq. 86)

(⟨α̇⟩ needs no ansatz, only ⊥ inputs; Eq. 86 keeps only the second, leading term of β̇). For
z = y/|y| and ±1 labels (|y|² = P) with r ≈ y early on, α̇(ŷ) ≈ (P + 1) yᵀf/P² against
⟨α̇⟩ ≈ 2 yᵀf/P²: K_V grows ≈ P/2 times faster along y than on average (Eq. 16, 82), while
β̇(ŷ) ≈ (1 + 1/P) rᵀf/P ≈ β̇ of any unit z: K_W grows isotropically.
"""

from __future__ import annotations

import numpy as np


def component_rates(f: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """α̇(ŷ), ⟨α̇⟩ = d(tr K_V/P)/dt and β̇(ŷ) (module docstring) at outputs ``f`` (T, P) for targets y (P,)."""
    p = len(y)
    z = y / np.linalg.norm(y)
    r = y - f
    rf, rz_fz = np.sum(r * f, axis=-1), (r @ z) * (f @ z)
    diagonal = (r * f) @ z**2
    return {"kv_projection": (diagonal + rz_fz) / p,
            "kv_trace": 2.0 * rf / p**2,
            "kw_projection": (diagonal + rf) / p}


def component_trajectories(time: np.ndarray, f: np.ndarray, y: np.ndarray,
                           initial: dict[str, float]) -> dict[str, np.ndarray]:
    """α(ŷ), tr(K_V)/P and β(ŷ) over ``time``: ``initial`` values plus the rates of
    :func:`component_rates` at the measured outputs ``f`` (T, P), integrated by the trapezoid rule
    over the checkpoint times (which may be log-spaced)."""
    from scipy.integrate import cumulative_trapezoid  # on first use: the planner imports this module

    return {name: initial[name] + cumulative_trapezoid(rate, time, initial=0.0)
            for name, rate in component_rates(f, y).items()}
