"""The solvable two-layer linear model of Xu & Ziyin (solvable-model Sec. 2, Thm. 1; docs/papers.md §6.2).

f(x) = κ uᵀWx with u ∈ R^N, W ∈ R^{N×D}, κ > 0, loss ½(f − y)² on one point x with |x| = 1, and
gradient flow u̇ = −η_u ∂L/∂u, Ẇ = −η_W ∂L/∂W (Eq. 5). Only w = Wx enters: with g = κ(f − y),

    f = κ u·w,    u̇ = −η_u g w,    ẇ = −η_W g u.                                               (1)

Data on a line, x_μ = a_μ n with |n| = 1 and targets y_μ under ntkpipe's (1/2P)Σ(f_μ − y_μ)², reduce to
(1) exactly (``line_reduction``): with v = u·Wn, ā² = ⟨a²⟩ and y* = ⟨ay⟩/ā,

    (1/2P)Σ(κa_μv − y_μ)² = ½(κā v − y*)² + ½(⟨y²⟩ − y*²),                                         (2)

so the gradients in u and w = Wn (W moves only along u nᵀ) are those of (1) with κ → κā, y → y*, the
constant is the irreducible loss, and f_μ = (a_μ/ā) f.

Rotating to p = √η_W u + √η_u w, q = √η_W u − √η_u w and c = √(η_uη_W) decouples (1):

    ṗ = −c g p,    q̇ = +c g q   ⇒   p(t) = √s(t) p₀,  q(t) = q₀/√s(t),  s = exp(−2c∫₀ᵗ g),        (3)

so p·q = η_W|u|² − η_u|w|², |p|²|q|² and A₀² = |u|²|w|² − (u·w)² = (|p|²|q|² − (p·q)²)/4c² are conserved.
Back in the original variables u = (p + q)/2√η_W, w = (p − q)/2√η_u, and with P = |p|², Q = |q|²

    f = κ(P − Q)/4c,   |u|² = (P + Q + 2p·q)/4η_W,   |w|² = (P + Q − 2p·q)/4η_u.                  (4)

P = P₀s then obeys a Riccati equation (docs/papers.md §6.2's ṡ = −(κ²P₀/2)s² + bs + κ²Q₀/2, times P₀)

    Ṗ = −(κ²/2)(P − P₊)(P − P₋),   P± = (b ± λ)/κ²,   b = 2κyc,   λ² = b² + κ⁴Δ₀,   Δ₀ = P₀Q₀,     (5)

and Q = Δ₀/P the same with Q± = −P∓. Δ₀ = (η_W|u₀|² + η_u|w₀|²)² − 4η_uη_W(u₀·w₀)² splits the squared
learning speed into a target term 4κ²η_uη_W y² and an init term κ⁴Δ₀ (Eq. 17). The solution
s = (s₊ − s₋Re^{−λt})/(1 − Re^{−λt}) of docs/papers.md §6.2, s± = P±/P₀, R = (P₀ − P₊)/(P₀ − P₋), is evaluated as

    P(t) − P₊ = (P₀ − P₊) e^{−λt} / (e^{−λt} + (κ²/2)(P₀ − P₋) τ(t)),   τ(t) = (1 − e^{−λt})/λ,     (6)

where both terms of the denominator are ≥ 0 (P₋ ≤ 0 ≤ P₀): no e^{λt}, no 1 − Re^{−λt} cancellation,
and λ → 0 (y = 0 with p₀ ∥ q₀ zero) is the limit τ = t, P = P₀/(1 + κ²P₀t/2). R < 1 always; its sign is
sign(f₀ − y) and R = 0 iff f₀ = y; 1 − s₋ = (P₀ − P₋)/P₀ ≥ 1 never vanishes. A vanishing p₀ or q₀
(balanced, exactly parallel or antiparallel layers) stays zero. As P₊ + P₋ = 2b/κ², f → y except from
p₀ = 0 with y > 0 or q₀ = 0 with y < 0, which flow into the saddle at the origin (f → 0).

The NTK on the data point (ḟ = −K(f − y), Eq. 18) and the layer alignment (Eq. 21) follow from (4):

    K = κ²(η_u|w|² + η_W|u|²) = κ²(P + Q)/2 = √(4κ²c²f² + κ⁴Δ₀),    cos θ = u·w/(|u||w|) = f/√(f² + κ²A₀²).

cos θ is monotone in f, and f moves monotonically from f₀ to y, so θ ends at y/√(y² + κ²A₀²) whatever
η_u/η_W: the learning rates only set the path (through λ and the split of (4)), not the end point.
"""

from __future__ import annotations

import numpy as np


def _as_pair(u, w) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(u, dtype=np.float64), np.asarray(w, dtype=np.float64)


def _wedge_sq(u: np.ndarray, w: np.ndarray) -> np.ndarray:
    """|u|²|w|² − (u·w)² along the last axis, as |u|²|w − (w·û)û|² (no cancellation for u ∥ w)."""
    uu = np.sum(u * u, axis=-1)
    scale = np.divide(np.sum(u * w, axis=-1), uu, out=np.zeros_like(uu), where=uu > 0)
    w_perp = w - scale[..., None] * u
    return uu * np.sum(w_perp * w_perp, axis=-1)


def _rotate(u: np.ndarray, w: np.ndarray, eta_u: float, eta_w: float) -> tuple[np.ndarray, np.ndarray]:
    """p = √η_W u + √η_u w, q = √η_W u − √η_u w of (3)."""
    return np.sqrt(eta_w) * u + np.sqrt(eta_u) * w, np.sqrt(eta_w) * u - np.sqrt(eta_u) * w


def _direction(v: np.ndarray, norm_sq: float) -> np.ndarray:
    return v / np.sqrt(norm_sq) if norm_sq > 0 else v


def conserved(u, w, eta_u: float, eta_w: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p·q, |p|²|q|², A₀²) of (3) for u, w of shape (..., N): the three invariants of the flow (1),
    p·q = η_W|u|² − η_u|w|², |p|²|q|² = Δ, A₀² = |u|²|w|² − (u·w)² (floats for one state)."""
    u, w = _as_pair(u, w)
    p, q = _rotate(u, w, eta_u, eta_w)
    return np.sum(p * q, axis=-1), np.sum(p * p, axis=-1) * np.sum(q * q, axis=-1), _wedge_sq(u, w)


def learning_speed(u0, w0, kappa: float, y: float, eta_u: float, eta_w: float) -> tuple[float, float, float]:
    """(λ, 4κ²η_uη_W y², κ⁴Δ₀) of Eq. (5)/(17): λ² is the sum of the target and the init term,
    Δ₀ = (η_W|u₀|² + η_u|w₀|²)² − 4η_uη_W(u₀·w₀)², evaluated as |p₀|²|q₀|²."""
    target = 4.0 * kappa**2 * eta_u * eta_w * y**2
    init = kappa**4 * float(conserved(u0, w0, eta_u, eta_w)[1])
    return float(np.sqrt(target + init)), target, init


def _riccati_offset(x0: float, x_plus: float, x_minus: float, kappa: float, lam: float, t) -> np.ndarray:
    """x(t) − x₊ for ẋ = −(κ²/2)(x − x₊)(x − x₋), x(0) = x₀ ≥ 0 ≥ x₋, by Eq. (6); x₀ = 0 stays 0."""
    if x0 == 0.0:
        return np.full(t.shape, -x_plus)
    decay = np.exp(-lam * t)
    tau = -np.expm1(-lam * t) / lam if lam > 0 else t
    return (x0 - x_plus) * decay / (decay + 0.5 * kappa**2 * (x0 - x_minus) * tau)


def closed_form(u0, w0, kappa: float, y: float, eta_u: float, eta_w: float, t) -> dict[str, np.ndarray]:
    """The exact gradient flow (1) at times ``t`` (T,), from u₀ and w₀ = W₀x (N,), κ > 0, η_u, η_W > 0.

    Returns float64 arrays over t: ``s`` (the multiplier of (3), P/P₀, or Q₀/Q when p₀ = 0), ``f``,
    ``residual`` f − y (exact to relative precision as f → y, for log-loss curves), ``ntk`` K,
    ``layer_alignment`` cos θ (nan while u or w vanishes), ``u_norm_sq`` |u|², ``w_norm_sq`` |w|², and
    ``u``, ``w`` (T, N) from (3)–(4): p(t) = √P p̂₀, q(t) = √Q q̂₀, u = (p + q)/2√η_W, w = (p − q)/2√η_u.
    """
    if kappa <= 0 or eta_u <= 0 or eta_w <= 0:
        raise ValueError(f"need κ, η_u, η_W > 0, got {kappa}, {eta_u}, {eta_w}")
    u0, w0 = _as_pair(u0, w0)
    t = np.asarray(t, dtype=np.float64)
    c = np.sqrt(eta_u * eta_w)
    p0, q0 = _rotate(u0, w0, eta_u, eta_w)
    big_p0, big_q0 = float(p0 @ p0), float(q0 @ q0)
    pq, delta0, a0_sq = (float(v) for v in conserved(u0, w0, eta_u, eta_w))
    b = 2.0 * kappa * y * c
    lam = learning_speed(u0, w0, kappa, y, eta_u, eta_w)[0]
    # P± of (5) without cancellation, via P₊P₋ = −Δ₀
    p_plus = (b + lam) / kappa**2 if b >= 0 else kappa**2 * delta0 / (lam - b)
    p_minus = (b - lam) / kappa**2 if b <= 0 else -kappa**2 * delta0 / (lam + b)
    dp = _riccati_offset(big_p0, p_plus, p_minus, kappa, lam, t)
    dq = _riccati_offset(big_q0, -p_minus, -p_plus, kappa, lam, t)
    big_p, big_q = np.maximum(p_plus + dp, 0.0), np.maximum(dq - p_minus, 0.0)
    residual = kappa * (dp - dq) / (4.0 * c)  # P₊ − Q₊ = 2b/κ² carries f = y exactly
    f = y + residual
    p = np.sqrt(big_p)[:, None] * _direction(p0, big_p0)
    q = np.sqrt(big_q)[:, None] * _direction(q0, big_q0)
    u_sq = (big_p + big_q + 2.0 * pq) / (4.0 * eta_w)
    w_sq = (big_p + big_q - 2.0 * pq) / (4.0 * eta_u)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = big_p / big_p0 if big_p0 > 0 else big_q0 / big_q
        alignment = f / np.sqrt(f**2 + kappa**2 * a0_sq)
    return {"s": s, "f": f, "residual": residual, "ntk": 0.5 * kappa**2 * (big_p + big_q),
            "layer_alignment": alignment, "u_norm_sq": u_sq, "w_norm_sq": w_sq,
            "u": (p + q) / (2.0 * np.sqrt(eta_w)), "w": (p - q) / (2.0 * np.sqrt(eta_u))}


def final_alignment(u0, w0, kappa: float, y: float) -> float:
    """cos θ at t → ∞ from the invariant A₀²: y/√(y² + κ²A₀²), sign(y) for parallel layers (A₀ = 0), for
    any η_u/η_W. Assumes f → y (not from the saddle-bound inits p₀ = 0, y > 0 or q₀ = 0, y < 0)."""
    a0_sq = float(_wedge_sq(*_as_pair(u0, w0)))
    if y == 0 and a0_sq == 0:
        raise ValueError("undefined for y = 0 with parallel layers: u and w shrink to the origin")
    return float(y / np.sqrt(y**2 + kappa**2 * a0_sq))


def line_reduction(a, y) -> tuple[float, float, float]:
    """(ā, y*, irreducible loss) of Eq. (2) for P points x_μ = a_μ n, targets y_μ: run ``closed_form``
    with κā, y* and w₀ = W₀n; then f_μ = (a_μ/ā) f and the loss is ½(f − y*)² + ½(⟨y²⟩ − y*²)."""
    a, y = _as_pair(a, y)
    a_bar = float(np.sqrt(np.mean(a * a)))
    y_star = float(np.mean(a * y)) / a_bar
    return a_bar, y_star, 0.5 * (float(np.mean(y * y)) - y_star**2)
