"""The solvable two-layer linear model (``ntkpipe.theory.solvable``) against fine-step RK4 integration of
the gradient flow of the full model f(x) = κ uᵀWx (u ∈ R^N, W ∈ R^{N×D}), which knows nothing of p, q,
s or the reduction to w = Wx."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.theory import solvable

N, D = 20, 3


def _rk4_flow(u0, w_mat0, x, y, kappa, eta_u, eta_w, t_max, dt, every):
    """(times, u (T, N), W (T, N, D)) of u̇ = −η_u ∂L/∂u, Ẇ = −η_W ∂L/∂W for L = (1/2P)Σ(κuᵀWx_μ − y_μ)²
    on (P, D) inputs, by classical RK4 with step dt, recorded every ``every`` (rounded to whole steps)
    up to ``t_max``: the steps run as one compiled loop (a Python loop over NumPy took 150 µs a step)."""
    stride, steps = round(every / dt), round(t_max / dt)
    u0, w_mat0 = np.array(u0, dtype=np.float64), np.array(w_mat0, dtype=np.float64)
    us, ws = _rk4_records(u0, w_mat0, np.asarray(x, np.float64), np.asarray(y, np.float64), kappa, eta_u, eta_w,
                          dt, stride, records=steps // stride)
    return (stride * dt * np.arange(steps // stride + 1), np.concatenate([u0[None], np.asarray(us)]),
            np.concatenate([w_mat0[None], np.asarray(ws)]))


@functools.partial(jax.jit, static_argnames="records")
def _rk4_records(u, w_mat, x, y, kappa, eta_u, eta_w, dt, stride, records):
    """u and W after each of ``records`` times ``stride`` RK4 steps of :func:`_rk4_flow`'s flow."""

    def velocity(u, w_mat):
        h = w_mat @ x.T  # (N, P)
        g = kappa * (kappa * u @ h - y) / len(x)  # κ(f_μ − y_μ)/P
        return -eta_u * h @ g, -eta_w * jnp.outer(u, g @ x)

    def step(_, state):
        u, w_mat = state
        k1 = velocity(u, w_mat)
        k2 = velocity(u + 0.5 * dt * k1[0], w_mat + 0.5 * dt * k1[1])
        k3 = velocity(u + 0.5 * dt * k2[0], w_mat + 0.5 * dt * k2[1])
        k4 = velocity(u + dt * k3[0], w_mat + dt * k3[1])
        return (u + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
                w_mat + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))

    def record(state, _):
        state = jax.lax.fori_loop(0, stride, step, state)
        return state, state

    return jax.lax.scan(record, (u, w_mat), length=records)[1]


def _unit(rng, d):
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v)


def _one_point_sim(u0, w_mat0, x, kappa, y, eta_u, eta_w, t_max, dt, every=0.05):
    """Simulated f, K (from the parameter gradients), cos θ, |u|², |w|², u, w = Wx on one point x."""
    t, us, ws = _rk4_flow(u0, w_mat0, x[None], np.array([y]), kappa, eta_u, eta_w, t_max, dt, every)
    w = ws @ x
    u_sq, w_sq, uw = np.sum(us**2, 1), np.sum(w**2, 1), np.sum(us * w, 1)
    grad_u, grad_w_mat = kappa * w, kappa * us[:, :, None] * x  # ∂f/∂u, ∂f/∂W
    ntk = eta_u * np.sum(grad_u**2, 1) + eta_w * np.sum(grad_w_mat**2, (1, 2))
    return t, {"f": kappa * uw, "ntk": ntk, "layer_alignment": uw / np.sqrt(u_sq * w_sq),
               "u_norm_sq": u_sq, "w_norm_sq": w_sq, "u": us, "w": w}


def _init(case, rng):
    """(u₀ (N,), W₀ (N, D), x, κ, y, η_u, η_W) for the named initializations."""
    x = _unit(rng, D)
    w_mat = rng.standard_normal((N, D)) / np.sqrt(N)
    u = rng.standard_normal(N) / np.sqrt(N)
    v, xi = _unit(rng, N), rng.standard_normal(N) / np.sqrt(N)

    def with_w(w):  # W₀ with W₀x = w, the rest random
        return w_mat + np.outer(w - w_mat @ x, x)

    cases = {
        "equal_rates": (u, w_mat, x, 1.0, 1.0, 1.0, 1.0),
        "ratio_10": (u, w_mat, x, 1.0, 1.0, 1.0, 0.1),
        "ratio_0.1": (u, w_mat, x, 1.0, 1.0, 0.1, 1.0),
        # near-parallel, large output f₀ ≈ 3 > y: learning by disalignment
        "parallel_above": (2.0 * v + 0.1 * xi, with_w(1.5 * v - 0.1 * xi), x, 1.0, 1.0, 1.0, 0.5),
        # near-parallel, small output f₀ ≈ 0.09 < y: alignment
        "parallel_below": (0.3 * v + 0.05 * xi, with_w(0.3 * v + 0.05 * xi[::-1]), x, 1.0, 2.0, 0.5, 1.0),
        "negative_target": (u, w_mat, x, 1.0, -1.5, 3.0, 1.0),
        "kappa": (u, w_mat, x, 0.5, 1.0, 2.0, 2.0),
    }
    return cases[case]


CASES = ["equal_rates", "ratio_10", "ratio_0.1", "parallel_above", "parallel_below", "negative_target",
         "kappa"]


@pytest.mark.parametrize("case", CASES)
def test_closed_form_matches_simulation(case):
    """f, K, cos θ, |u|², |w|², u and w = Wx of ``closed_form`` against RK4 (dt = 2e-3/K_max; measured
    differences ≤ 2e-13) to 1e-10 of each quantity's scale over 12/λ; the invariants along the flow."""
    rng = np.random.default_rng(CASES.index(case))
    u0, w_mat0, x, kappa, y, eta_u, eta_w = _init(case, rng)
    w0 = w_mat0 @ x
    lam = solvable.learning_speed(u0, w0, kappa, y, eta_u, eta_w)[0]
    k0 = kappa**2 * (eta_u * w0 @ w0 + eta_w * u0 @ u0)
    t_max = 12.0 / lam
    t, sim = _one_point_sim(u0, w_mat0, x, kappa, y, eta_u, eta_w, t_max, dt=2e-3 / max(k0, lam),
                            every=t_max / 200)
    theory = solvable.closed_form(u0, w0, kappa, y, eta_u, eta_w, t)

    f0 = kappa * u0 @ w0
    assert (f0 > y) == (case in ("parallel_above", "negative_target"))
    assert abs(sim["f"][-1] - y) < 1e-3 * abs(y)  # trained to convergence
    for key, value in sim.items():
        scale = np.max(np.abs(value))
        err = np.max(np.abs(theory[key] - value)) / scale
        assert err < 1e-10, (key, err)
    # cos θ moves monotonically, up iff f₀ < y (y > 0) — the alignment / disalignment of Sec. 2.2
    cos = sim["layer_alignment"]
    steps = np.sign(np.diff(cos))
    assert np.all(steps == (1 if f0 < y else -1))
    # invariants p·q, |p|²|q|², A₀² along the simulated trajectory
    for along, at0 in zip(solvable.conserved(sim["u"], sim["w"], eta_u, eta_w),
                          solvable.conserved(u0, w0, eta_u, eta_w)):
        assert np.max(np.abs(along - at0)) < 1e-9 * max(abs(at0), 1e-3)
    # the docs/papers.md §6.2 form of s(t) with s±, R, as printed
    big_p0 = np.sum((np.sqrt(eta_w) * u0 + np.sqrt(eta_u) * w0) ** 2)
    b = 2 * kappa * y * np.sqrt(eta_u * eta_w)
    s_plus, s_minus = (b + lam) / (kappa**2 * big_p0), (b - lam) / (kappa**2 * big_p0)
    r = (1 - s_plus) / (1 - s_minus)
    e = np.exp(-lam * t)
    np.testing.assert_allclose(theory["s"], (s_plus - s_minus * r * e) / (1 - r * e), rtol=1e-10)
    assert np.sign(r) == np.sign(f0 - y)


def test_learning_speed_split():
    """λ² = 4κ²η_uη_W y² + κ⁴Δ₀ with Δ₀ from its printed definition; K(t) → λ along the simulation;
    y = 0 leaves only the init term, a balanced parallel init (Δ₀ = 0) only the target term."""
    rng = np.random.default_rng(7)
    u0, w0, kappa, y, eta_u, eta_w = rng.standard_normal(N), rng.standard_normal(N), 0.7, -1.3, 0.4, 2.5
    lam, target, init = solvable.learning_speed(u0, w0, kappa, y, eta_u, eta_w)
    delta0 = (eta_w * u0 @ u0 + eta_u * w0 @ w0) ** 2 - 4 * eta_u * eta_w * (u0 @ w0) ** 2
    assert target == pytest.approx(4 * kappa**2 * eta_u * eta_w * y**2, rel=1e-14)
    assert init == pytest.approx(kappa**4 * delta0, rel=1e-12)
    assert lam**2 == pytest.approx(target + init, rel=1e-14)
    no_target = solvable.learning_speed(u0, w0, kappa, 0.0, eta_u, eta_w)
    assert no_target[:2] == (pytest.approx(np.sqrt(init)), 0.0)
    balanced = np.sqrt(eta_w / eta_u) * u0  # q₀ = 0
    assert solvable.learning_speed(u0, balanced, kappa, y, eta_u, eta_w)[2] == pytest.approx(0.0, abs=1e-12)

    x = _unit(rng, D)
    w_mat0 = np.outer(w0, x)
    t_max = 15.0 / lam
    _, sim = _one_point_sim(u0, w_mat0, x, kappa, y, eta_u, eta_w, t_max, dt=2e-3 / lam, every=t_max / 50)
    assert sim["ntk"][-1] == pytest.approx(lam, rel=1e-6)  # ḟ = −K(f − y) decays at rate λ at the end


@pytest.mark.parametrize("case", ["balanced_parallel", "balanced_antiparallel"])
@pytest.mark.parametrize("y", [1.0, 0.0, -1.0])
def test_degenerate_inits_match_simulation(case, y):
    """q₀ = 0 (w₀ = √(η_W/η_u)u₀) or p₀ = 0 (w₀ = −√(η_W/η_u)u₀) stay so; y = 0 with q₀ = 0 has λ = 0 and
    P = P₀/(1 + κ²P₀t/2); q₀ = 0, y < 0 and p₀ = 0, y > 0 fall into the saddle at the origin (f → 0)."""
    rng = np.random.default_rng(11)
    eta_u, eta_w, kappa = 0.5, 2.0, 1.0
    x, u0 = _unit(rng, D), 0.6 * _unit(rng, N)
    w0 = (1 if case == "balanced_parallel" else -1) * np.sqrt(eta_w / eta_u) * u0
    t, sim = _one_point_sim(u0, np.outer(w0, x), x, kappa, y, eta_u, eta_w, 15.0, dt=1e-3, every=0.1)
    theory = solvable.closed_form(u0, w0, kappa, y, eta_u, eta_w, t)
    # at the saddle the rounding-level p or q of the simulation grows as e^{κc|y|t} (≈ 1e-9 at t = 15)
    for key in ("f", "ntk", "u_norm_sq", "w_norm_sq", "u", "w"):
        assert np.max(np.abs(theory[key] - sim[key])) < 1e-8 * np.max(np.abs(sim[key])), key
    saddle = (case == "balanced_parallel") != (y > 0) or y == 0
    assert abs(theory["f"][-1] - (0.0 if saddle else y)) < (0.1 if y == 0 else 1e-6)
    if y == 0 and case == "balanced_parallel":
        assert solvable.learning_speed(u0, w0, kappa, y, eta_u, eta_w)[0] == 0.0
        big_p0 = 4 * eta_w * u0 @ u0
        np.testing.assert_allclose(theory["s"], 1 / (1 + kappa**2 * big_p0 * t / 2), rtol=1e-13)


def test_start_at_target_and_large_times():
    """f₀ = y (R = 0) stays put; at t up to 1e300 everything is finite, warning-free and converged."""
    rng = np.random.default_rng(3)
    u0, w0 = rng.standard_normal(N), rng.standard_normal(N)
    t = np.array([0.0, 1.0, 1e3, 1e8, 1e300])
    still = solvable.closed_form(u0, w0, 1.0, u0 @ w0, 1.0, 0.3, t)
    np.testing.assert_allclose(still["f"], u0 @ w0, rtol=1e-13)
    np.testing.assert_allclose(still["u"], np.broadcast_to(u0, (5, N)), rtol=1e-12)
    for y in (5.0, -5.0, 0.0):
        out = solvable.closed_form(u0, w0, 2.0, y, 1.0, 0.3, t)
        for value in out.values():
            assert np.all(np.isfinite(value))
        assert out["residual"][-1] == 0.0
        assert out["layer_alignment"][-1] == pytest.approx(
            solvable.final_alignment(u0, w0, 2.0, y) if y else 0.0, abs=1e-14)
    with pytest.raises(ValueError):
        solvable.closed_form(u0, w0, 0.0, 1.0, 1.0, 1.0, t)


def test_final_alignment_independent_of_learning_rate_ratio():
    """The end point of cos θ is y/√(y² + κ²A₀²) for η_u/η_W = 0.1, 1, 10 (simulated to 25 learning times),
    while the paths differ; from a near-parallel large-output init the alignment falls to the same value."""
    rng = np.random.default_rng(5)
    x = _unit(rng, D)
    v = _unit(rng, N)
    for u0, w0, y in [(rng.standard_normal(N) / np.sqrt(N), rng.standard_normal(N) / np.sqrt(N), 1.0),
                      (1.5 * v + 0.2 * rng.standard_normal(N) / np.sqrt(N), 1.5 * v, -0.5)]:
        predicted = solvable.final_alignment(u0, w0, 1.0, y)
        a0_sq = (u0 @ u0) * (w0 @ w0) - (u0 @ w0) ** 2
        assert predicted == pytest.approx(y / np.sqrt(y**2 + a0_sq), rel=1e-10)
        midway = []
        for eta_u, eta_w in [(0.1, 1.0), (1.0, 1.0), (1.0, 0.1)]:
            lam = solvable.learning_speed(u0, w0, 1.0, y, eta_u, eta_w)[0]
            k0 = eta_u * w0 @ w0 + eta_w * u0 @ u0
            t_max = 25.0 / lam
            _, sim = _one_point_sim(u0, np.outer(w0, x), x, 1.0, y, eta_u, eta_w, t_max,
                                    dt=5e-3 / max(k0, lam), every=t_max / 2)
            assert sim["layer_alignment"][-1] == pytest.approx(predicted, abs=1e-9)
            midway.append(solvable.closed_form(u0, w0, 1.0, y, eta_u, eta_w, [0.5])["layer_alignment"][0])
        assert np.ptp(midway) > 1e-3


def test_line_reduction_matches_multi_point_simulation():
    """P = 5 points x_μ = a_μ n in D = 3 with arbitrary targets: the (1/2P)Σ loss is the one-point problem
    with κ → κā, y → y* = ⟨ay⟩/ā plus ½(⟨y²⟩ − y*²); f_μ = (a_μ/ā) f; W moves only along n."""
    rng = np.random.default_rng(9)
    n = _unit(rng, D)
    a = np.array([0.5, -1.2, 2.0, 0.8, -0.3])
    y = np.array([0.4, -0.9, 1.7, 0.2, 0.5])
    x = a[:, None] * n
    kappa, eta_u, eta_w = 0.8, 1.0, 0.25
    u0, w_mat0 = rng.standard_normal(N) / np.sqrt(N), rng.standard_normal((N, D)) / np.sqrt(N)
    a_bar, y_star, irreducible = solvable.line_reduction(a, y)
    assert irreducible > 0.0  # the targets are not collinear with a
    lam = solvable.learning_speed(u0, w_mat0 @ n, kappa * a_bar, y_star, eta_u, eta_w)[0]
    t_max = 12.0 / lam
    t, us, ws = _rk4_flow(u0, w_mat0, x, y, kappa, eta_u, eta_w, t_max, dt=2e-3 / lam, every=t_max / 100)
    f_sim = kappa * np.einsum("tn,tnd,pd->tp", us, ws, x)
    loss_sim = 0.5 * np.mean((f_sim - y) ** 2, axis=1)

    theory = solvable.closed_form(u0, w_mat0 @ n, kappa * a_bar, y_star, eta_u, eta_w, t)
    f_theory = theory["f"][:, None] * a / a_bar
    loss_theory = 0.5 * theory["residual"] ** 2 + irreducible
    assert np.max(np.abs(f_theory - f_sim)) < 1e-9 * np.max(np.abs(f_sim))
    np.testing.assert_allclose(loss_theory, loss_sim, rtol=1e-9)
    assert loss_sim[-1] == pytest.approx(irreducible, rel=1e-6)
    np.testing.assert_allclose(ws @ n, theory["w"], atol=1e-9)
    off_line = np.eye(D) - np.outer(n, n)
    np.testing.assert_allclose(ws @ off_line, np.broadcast_to(w_mat0 @ off_line, ws.shape), atol=1e-12)
