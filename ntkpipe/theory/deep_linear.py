"""Gradient-flow theory of deep linear networks from small initialization (silent-alignment Sec. 3–4).

On whitened data with a linear teacher y = s βᵀx, a balanced depth-L linear network aligns to β and
its end-to-end gain c = u^L along β obeys (App. E.1, Eq. 60, with the chain-rule factor L that the
paper drops: ċ = L u^{L-1} u̇)

    ċ = L c^{2−2/L} (s − c),                                                    (1)

which for L = 2 is the logistic ċ = 2c(s − c) of App. C.4 with solution (Eq. C.4, c = u²)

    u(t)² = s e^{2st} / (e^{2st} − 1 + s/u₀²).                                   (2)

The training loss is ½(s − c)² + L_irr, with L_irr the loss of the best linear predictor (0 for a
realizable teacher), so the half-loss time t½ solves ½(s − c)² + L_irr = ½[½(s − c₀)² + L_irr].
"""

from __future__ import annotations

import math

import numpy as np


def _log_gain_rate(s: float, depth: int):
    """d(ln c)/dt = L c^{1−2/L}(s − c): Eq. (1) in ln c, accurate from tiny c₀."""

    def rhs(_, log_c):
        c = math.exp(log_c[0])
        return [depth * c ** (1.0 - 2.0 / depth) * (s - c)]

    return rhs


def _integrate_log_gain(c0: float, s: float, depth: int, horizon: float, **options):
    """ln c(t) of Eq. (1) from ln c₀ over [0, horizon] (LSODA; ``options`` to ``solve_ivp``)."""
    from scipy.integrate import solve_ivp  # on first use: the planner imports this module (theory overlays)

    return solve_ivp(_log_gain_rate(s, depth), (0.0, horizon), [math.log(c0)], method="LSODA", **options)


def half_loss_gain(c0: float, s: float, irreducible: float = 0.0) -> float:
    """The gain c½ at which ½(s − c)² + L_irr is half the initial loss ½(s − c₀)² + L_irr."""
    gap_sq = 0.5 * (s - c0) ** 2 - irreducible
    if gap_sq <= 0.0:
        raise ValueError(f"the loss never halves: irreducible loss {irreducible} ≥ ¼(s − c0)²")
    return s - math.sqrt(gap_sq)


def gain_trajectory(times, c0: float, s: float, depth: int) -> np.ndarray:
    """c(t) from Eq. (1) at ``times`` (float64), integrated in log c for accuracy at tiny c₀."""
    times = np.asarray(times, dtype=np.float64)
    if not 0.0 < c0 < s:
        raise ValueError(f"need 0 < c0 < s, got c0={c0}, s={s}")
    sol = _integrate_log_gain(c0, s, depth, float(times.max()), t_eval=times, rtol=1e-10, atol=1e-12)
    if not sol.success:
        raise RuntimeError(f"gain ODE failed: {sol.message}")
    return np.exp(sol.y[0])


def half_loss_time(c0: float, s: float, depth: int, irreducible: float = 0.0) -> float:
    """t½ from numerical integration of Eq. (1) (event c(t) = c½), float64."""
    if not 0.0 < c0 < s:
        raise ValueError(f"need 0 < c0 < s, got c0={c0}, s={s}")
    return gain_time(c0, s, depth, half_loss_gain(c0, s, irreducible))


def gain_time(c0: float, s: float, depth: int, level: float) -> float:
    """The time c(t) of Eq. (1) reaches ``level`` (c₀ < level < s), integrated in ln c with an event;
    ``level`` = s/2 is a mode's learning time (silent-alignment App. H; for L = 2 it is
    (1/2s) ln(s/c₀ − 1), from Eq. (2))."""
    if not 0.0 < c0 < level < s:
        raise ValueError(f"need 0 < c0 < level < s, got c0={c0}, level={level}, s={s}")
    target = math.log(level)

    def reached(_, log_c):
        return log_c[0] - target

    reached.terminal = True
    reached.direction = 1.0
    horizon = 10.0 * half_loss_time_asymptote(c0, s, depth) + 100.0 / s
    sol = _integrate_log_gain(c0, s, depth, horizon, events=reached, rtol=1e-11, atol=1e-12)
    if sol.t_events[0].size == 0:
        raise RuntimeError(f"gain {level} not reached by t={horizon} (c0={c0}, s={s}, L={depth})")
    return float(sol.t_events[0][0])


def half_loss_time_two_layer(u0_sq: float, s: float) -> float:
    """L = 2 closed form from Eq. (2): t½ = (1/2s) ln[(√2 − 1)(s/u₀² − 1)] (f₀ ≈ 0)."""
    return math.log((math.sqrt(2.0) - 1.0) * (s / u0_sq - 1.0)) / (2.0 * s)


def half_loss_time_asymptote(c0: float, s: float, depth: int) -> float:
    """Small-c₀ scaling of Eq. (1): t½ ≈ c₀^{−(L−2)/L} / ((L−2)s) for L ≥ 3 (App. E.1, Eq. 61).

    For L = 2 returns the logarithmic closed form instead.
    """
    if depth == 2:
        return half_loss_time_two_layer(c0, s)
    return c0 ** (-(depth - 2.0) / depth) / ((depth - 2.0) * s)


def aligned_initial_gain(weights, beta, *, tol: float = 1e-14, max_sweeps: int = 10_000) -> float:
    """c₀ of Eq. (1) from the initial weights W_1 … W_L (input side first; W_L the 1 × N readout):
    the end-to-end gain along β of the balanced, β-aligned network nearest to them along the paths
    of the teacher signal.

    Eq. (1) describes balanced networks aligned with the teacher, W_ℓ = u e_ℓ e_{ℓ−1}ᵀ with unit
    e_0 = β, e_1 … e_{L−1} and e_L = 1, whose end-to-end map W_L ⋯ W_1 = u^L βᵀ has gain c = u^L
    along β. While the output is small, gradient flow moves each layer along one rank-one
    direction, Ẇ_ℓ = s b_ℓ f_{ℓ−1}ᵀ, with the forward path f_ℓ = W_ℓ ⋯ W_1 β and the backward path
    b_ℓ = (W_L ⋯ W_{ℓ+1})ᵀ, so the mode that grows has e_ℓ ∈ span(f_ℓ, b_ℓ). Projecting the initial
    weights onto the balanced aligned networks with such e_ℓ,

        min over u, e_1 … e_{L−1} of  Σ_ℓ ‖W_ℓ − u e_ℓ e_{ℓ−1}ᵀ‖²_F,

    gives u = S/L with S = max Σ_ℓ e_ℓᵀ W_ℓ e_{ℓ−1}, and c₀ = (S/L)^L. S is linear in each e_ℓ and
    is maximized by block-coordinate ascent, e_ℓ ∝ P_ℓ(W_ℓ e_{ℓ−1} + W_{ℓ+1}ᵀ e_{ℓ+1}) (P_ℓ the
    projector on the span), from the forward path. For L = 2, e_1 ∥ W_1β + aᵀ (in the span) and
    c₀ = |W_1β + aᵀ|²/4 = (q₀ + r₀)/2, the growing mode of App. C.5. Unlike |a₀|^L it uses every
    layer along the path β → output; unlike the raw component W_L ⋯ W_1 β (whose sign is random at
    small σ) it measures the mode that grows.
    """
    gain, _ = _aligned_path(weights, beta, tol, max_sweeps)
    return gain


def aligned_mode_gains(weights, v, u, *, tol: float = 1e-14, max_sweeps: int = 10_000) -> np.ndarray:
    """c₀ of each target mode k (``final_kernel.target_modes``: input directions v (D, K), output
    directions u (C, K), strongest first) for Eq. (1) with s = s_k, derived here (docs/papers.md §3.5):
    ``aligned_initial_gain`` of the chain W_1 … W_{L−1}, u_kᵀW_L from v_k, after projecting each hidden
    layer off the directions e_ℓ the stronger modes took. The final net holds the modes in orthogonal
    hidden directions (W_ℓ = Σ_a s_a^{1/L} r_{ℓ+1,a} r_{ℓ,a}ᵀ), so a mode learned later keeps only the part
    of its path orthogonal to theirs. For L = 2 this is ``two_layer.initial_mode_gains`` (the QR of the
    growing directions g_k)."""
    layers = [np.asarray(w, dtype=np.float64) for w in weights]
    v, u = np.asarray(v, dtype=np.float64), np.asarray(u, dtype=np.float64)
    taken = [np.zeros((w.shape[0], 0)) for w in layers[:-1]]  # hidden directions of the stronger modes
    gains = []
    for k in range(v.shape[1]):
        off = [np.eye(len(q)) - q @ q.T for q in taken]
        chain = [off[0] @ layers[0]] + [off[i] @ w @ off[i - 1] for i, w in enumerate(layers[1:-1], start=1)]
        chain.append(u[:, k][None] @ layers[-1] @ off[-1])
        gain, path = _aligned_path(chain, v[:, k], tol, max_sweeps)
        gains.append(gain)
        taken = [np.linalg.qr(np.column_stack([q, e]))[0] for q, e in zip(taken, path)]
    return np.array(gains)


def _aligned_path(weights, beta, tol: float, max_sweeps: int) -> tuple[float, list[np.ndarray]]:
    """(c₀, [e_1 … e_{L−1}]) of ``aligned_initial_gain``: the gain and the hidden unit directions of the
    balanced aligned network nearest to the weights."""
    layers = [np.asarray(w, dtype=np.float64) for w in weights]
    if layers[-1].shape[0] != 1:
        raise ValueError(f"need a single-output network, got {layers[-1].shape[0]} outputs")
    forward = [np.asarray(beta, dtype=np.float64) / np.linalg.norm(beta)]
    for w in layers[:-1]:
        forward.append(w @ forward[-1])
    backward = [np.ones(1)]
    for w in layers[:0:-1]:
        backward.insert(0, w.T @ backward[0])
    bases = [forward[0][:, None]]
    bases += [np.linalg.qr(np.stack([f, b], axis=1))[0] for f, b in zip(forward[1:], backward[:-1])]
    bases.append(np.ones((1, 1)))
    reduced = [bases[k + 1].T @ w @ bases[k] for k, w in enumerate(layers)]  # the chain in span coordinates
    total, e = _max_path_sum(reduced, tol, max_sweeps)
    return (total / len(layers)) ** len(layers), [basis @ ek for basis, ek in zip(bases[1:-1], e[1:-1])]


def _max_path_sum(layers: list[np.ndarray], tol: float, max_sweeps: int) -> tuple[float, list[np.ndarray]]:
    """max Σ_ℓ e_ℓᵀ W_ℓ e_{ℓ−1} over unit e_1 … e_{L−1}, with e_0, e_L the 1-vectors of a chain that
    starts and ends in one dimension (block-coordinate ascent from the forward path), and the e_ℓ."""
    e = [np.ones(1)]
    for w in layers[:-1]:
        e.append(_unit(w @ e[-1]))
    e.append(np.ones(1))

    def path_sum() -> float:
        return float(sum(e[k + 1] @ w @ e[k] for k, w in enumerate(layers)))

    total = path_sum()
    for _ in range(max_sweeps):
        for k in range(1, len(layers)):
            e[k] = _unit(layers[k - 1] @ e[k - 1] + layers[k].T @ e[k + 1])
        total, previous = path_sum(), total
        if total - previous <= tol * abs(total):
            break
    return total, e


def _unit(v: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v)
    if norm == 0.0:
        raise ValueError("the weights carry nothing along the teacher direction (a zero path)")
    return v / norm
