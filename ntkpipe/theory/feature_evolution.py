"""Optimal feature evolution (OFE), the toy model of kernel alignment (kernel-alignment-theory Sec. 4.1,
App. B).

Kernel gradient descent whose features Ψ (K = ΨᵀΨ) also descend the next-step loss (Eq. 5) becomes in
continuous time (Eq. 6/30, with rate r = η/P for ntkpipe's loss (1/2P) Σ|f − y|²; the paper writes η)

    Δ̇ = −r K Δ,    Ψ̇ = γ r Ψ Δ Δᵀ   ⇒   K̇ = γ r (ΔΔᵀK + KΔΔᵀ),         Δ = f − y.              (1)

C = γΔΔᵀ + K is conserved (Eq. 35), so K → K∞ = C = γΔ₀Δ₀ᵀ + K₀ as Δ → 0 (Eq. 7; γyyᵀ + K₀ for
f₀ = 0). With γΔΔᵀ = C − K, K obeys the Riccati equation K̇ = r(CK + KC − 2K²), so M = K⁻¹ obeys the
linear Ṁ = −r(MC + CM) + 2rI, solved by M(t) = C⁻¹ + e^{−rCt}(K₀⁻¹ − C⁻¹)e^{−rCt}. As
K₀⁻¹ − C⁻¹ = γK₀⁻¹Δ₀Δ₀ᵀC⁻¹ has rank one, Sherman–Morrison gives (derived here, not in the paper)

    Δ(t) = e^{−rCt}Δ₀ / √(1 − γ Δ₀ᵀC⁻¹(I − e^{−2rCt})Δ₀),        K(t) = C − γΔ(t)Δ(t)ᵀ,        (2)

and differentiating (2) confirms Δ̇ = −r(C − γΔΔᵀ)Δ directly. Eq. (2) needs no K₀⁻¹ (C⁻¹(I − e^{−2rCt})
is taken through C's eigenvalues, → 2rt at c = 0); it loses ~ε·γΔ₀ᵀK₀⁻¹Δ₀ to cancellation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.ntk.precision import with_x64


@dataclass(frozen=True)
class OfeSolution:
    """Eq. (1) at ``times``: residuals ``delta`` (T, n), kernels ``kernel`` (T, n, n), the conserved
    C = γΔ₀Δ₀ᵀ + K₀ and the largest relative drift ‖γΔΔᵀ + K − C‖_F / ‖C‖_F over ``times``."""

    times: np.ndarray
    delta: np.ndarray
    kernel: np.ndarray
    conserved: np.ndarray
    conservation_error: float


def _vector_field(t, state, args):
    """Eq. (1) in O(n²): ΔΔᵀK + KΔΔᵀ = Δ(KΔ)ᵀ + (KΔ)Δᵀ."""
    delta, k = state
    gamma, rate = args
    kd = k @ delta
    return -rate * kd, gamma * rate * (jnp.outer(delta, kd) + jnp.outer(kd, delta))


def _max_norm(tree) -> jax.Array:
    return jnp.max(jnp.stack([jnp.max(jnp.abs(leaf)) for leaf in jax.tree.leaves(tree)]))


@functools.partial(jax.jit, static_argnames="max_steps")
def _integrate(k0, delta0, gamma, rate, times, rtol, atol, *, max_steps: int):
    """Dormand–Prince 8(7) with every component of (Δ, K) held to atol + rtol·|value|."""
    import diffrax  # imported where an ODE is solved, not with ntkpipe

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_vector_field), diffrax.Dopri8(), t0=0.0, t1=times[-1], dt0=None,
        y0=(delta0, k0), args=(gamma, rate), saveat=diffrax.SaveAt(ts=times),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol, norm=_max_norm),
        max_steps=max_steps)
    return sol.ys


@with_x64
def ofe_solve(k0, delta0, gamma: float, rate: float, times, *, rtol: float = 1e-10, atol: float = 1e-12,
              max_steps: int = 100_000) -> OfeSolution:
    """Integrate Eq. (1) from K(0) = ``k0`` (n, n), Δ(0) = ``delta0`` (n,) and save at the sorted,
    non-negative ``times`` (float64, adaptive Dopri8). The full K is integrated (its right-hand side is
    symmetric, so K stays symmetric to rounding) and the saved kernels are symmetrized. Explicit steps
    are limited to ~1/(r λ_max(C)): long horizons on ill-conditioned kernels need many of them, and
    :func:`ofe_closed_form` gives the same trajectory exactly.
    """
    k0 = np.asarray(k0, dtype=np.float64)
    delta0 = np.asarray(delta0, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64).reshape(-1)
    if times.size == 0 or times[0] < 0.0 or np.any(np.diff(times) < 0.0) or times[-1] == 0.0:
        raise ValueError(f"times must be sorted, non-negative and end after 0, got {times}")
    delta, kernel = (np.asarray(a) for a in _integrate(
        jnp.asarray(k0), jnp.asarray(delta0), jnp.float64(gamma), jnp.float64(rate), jnp.asarray(times),
        jnp.float64(rtol), jnp.float64(atol), max_steps=max_steps))
    kernel = 0.5 * (kernel + kernel.swapaxes(1, 2))
    conserved = ofe_final_kernel(k0, delta0, gamma)
    drift = gamma * delta[:, :, None] * delta[:, None, :] + kernel - conserved
    error = float(np.max(np.linalg.norm(drift, axis=(1, 2))) / np.linalg.norm(conserved))
    return OfeSolution(times, delta, kernel, conserved, error)


def ofe_final_kernel(k0, delta0, gamma: float) -> np.ndarray:
    """K∞ = C = γΔ₀Δ₀ᵀ + K₀ (Eq. 7; = γyyᵀ + K₀ when f₀ = 0, Δ₀ = −y)."""
    delta0 = np.asarray(delta0, dtype=np.float64)
    return np.asarray(k0, dtype=np.float64) + gamma * np.outer(delta0, delta0)


def ofe_scalar(delta0: float, psi0: float, gamma: float, rate: float, t):
    """(Δ(t), ψ(t)) of the scalar OFE Δ̇ = −rψ²Δ, ψ̇ = γrψΔ² (Eq. 31), with C = γΔ₀² + ψ₀² (Eq. 32).

    Eq. 33, γΔ̇² = −2r(C − γΔ²)γΔ² and ψ̇² = 2r(C − ψ²)ψ², gives the logistics of Eq. 34 for γΔ² and
    ψ² (the paper's u, v up to constant factors; its v = ½γ² is a typo):

        γΔ² = C a / (a + e^{2rCt}),    ψ² = C / (1 + a e^{−2rCt}),    a = γΔ₀²/ψ₀²,

    i.e. Δ = Δ₀ e^{−rCt} √(C / (ψ₀² + γΔ₀²e^{−2rCt})), ψ = ψ₀ √(C / (ψ₀² + γΔ₀²e^{−2rCt})), signs kept.
    """
    t = np.asarray(t, dtype=np.float64)
    c = gamma * delta0**2 + psi0**2
    decay = np.exp(-2.0 * rate * c * t)
    scale = np.sqrt(c / (psi0**2 + gamma * delta0**2 * decay))
    return delta0 * np.sqrt(decay) * scale, psi0 * scale


def ofe_closed_form(k0, delta0, gamma: float, rate: float, t) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Δ(t), K(t)) of Eq. (1) from Eq. (2): shapes (n,), (n, n) for scalar ``t``, else
    (T, n), (T, n, n). Needs K₀ positive semi-definite (so that 0 ≼ γΔΔᵀ ≼ C)."""
    conserved = ofe_final_kernel(k0, delta0, gamma)
    c, v = np.linalg.eigh(conserved)
    coeffs = v.T @ np.asarray(delta0, dtype=np.float64)
    x = 2.0 * rate * np.asarray(t, dtype=np.float64)[..., None] * c
    with np.errstate(divide="ignore", invalid="ignore"):
        spent = np.where(c == 0.0, 2.0 * rate * np.asarray(t)[..., None], -np.expm1(-x) / c)
    norm = 1.0 - gamma * np.sum(coeffs**2 * spent, axis=-1, keepdims=True)
    delta = (np.exp(-0.5 * x) * coeffs / np.sqrt(norm)) @ v.T
    return delta, conserved - gamma * delta[..., :, None] * delta[..., None, :]


def ofe_kernel_closed_form(k0, delta0, gamma: float, rate: float, t) -> np.ndarray:
    """K(t) of Eq. (1) in closed form: [e^{−rCt}(K₀⁻¹ − C⁻¹)e^{−rCt} + C⁻¹]⁻¹ for K₀ ≻ 0, evaluated
    without inverses as C − γΔ(t)Δ(t)ᵀ of Eq. (2) (see :func:`ofe_closed_form`)."""
    return ofe_closed_form(k0, delta0, gamma, rate, t)[1]


def fit_feature_rate(k0, delta0, y, alignment: float) -> float:
    """γ̂ ≥ 0 with A(K₀ + γ̂Δ₀Δ₀ᵀ, y) = ``alignment``, A = yᵀKy/(‖K‖_F|y|²): the OFE feature learning
    rate whose final kernel (Eq. 7) reaches a measured final alignment (Fig. 2C–D).

    With a = |y|², b = yᵀK₀y, k = ‖K₀‖²_F, m = Δ₀ᵀK₀Δ₀, d = |Δ₀|², p = (yᵀΔ₀)²,

        A(γ) = (b + γp) / (a √(k + 2γm + γ²d²)),    dA/dγ ∝ (pk − bm) + γ(pm − bd²),

    so A is monotone or has one turning point; squaring A(γ) = A gives the quadratic
    (p² − A²a²d²)γ² + 2(bp − A²a²m)γ + b² − A²a²k = 0, solved stably; the smallest root γ ≥ 0 with
    b + γp of the sign of A is returned (a root in −10⁻¹²‖K₀‖_F/|Δ₀|² ≤ γ < 0, i.e. the target equals
    A(K₀) up to rounding, counts as 0), NaN if there is none. For Δ₀ = ±y (f₀ = 0) A rises from
    A(K₀) towards its γ → ∞ limit 1 (in general the limit is cos²∠(y, Δ₀)), so γ̂ is NaN exactly when
    the target is below A(K₀) (the kernel would have to lose alignment) or ≥ 1 (never reached), and
    γ̂ = (A√((a²k − b²)/(1 − A²)) − b)/a².
    """
    k0 = np.asarray(k0, dtype=np.float64)
    d0 = np.asarray(delta0, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    a, b, k = y @ y, y @ k0 @ y, np.sum(k0 * k0)
    m, d, p = d0 @ k0 @ d0, d0 @ d0, (y @ d0) ** 2
    target = alignment**2 * a**2
    quad, half_lin, const = p**2 - target * d**2, b * p - target * m, b**2 - target * k
    disc = half_lin**2 - quad * const
    if disc < 0.0:
        return math.nan
    s = -(half_lin + math.copysign(math.sqrt(disc), half_lin))
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = np.array([s / quad, const / s])
    roots[(roots < 0.0) & (roots * d >= -1e-12 * math.sqrt(k))] = 0.0  # γ̂ = 0 up to rounding
    ok = np.isfinite(roots) & (roots >= 0.0) & ((b + roots * p) * alignment >= 0.0)
    return float(np.min(roots[ok])) if ok.any() else math.nan

