"""Two-layer overlaps, final NTK, min-norm solution and mode dynamics of linear networks, each against
an independent computation: simulated training of actual networks, the generic NTK, or a direct formula."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from ntkpipe.models import MLP
from ntkpipe.ntk import empirical_ntk
from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.ntk.layout import flatten_gram
from ntkpipe.theory import deep_linear, final_kernel, two_layer


def _whitened(rng, p: int, d: int) -> np.ndarray:
    """(P, D) inputs √P·U Vᵀ from the thin SVD of a Gaussian matrix: XᵀX/P = I for P ≥ D, and
    XXᵀ/P = I (XᵀX/P the projector on the span) for P < D."""
    u, _, vt = np.linalg.svd(rng.standard_normal((p, d)), full_matrices=False)
    return np.sqrt(p) * u @ vt


def _unit(rng, d: int) -> np.ndarray:
    b = rng.standard_normal(d)
    return b / np.linalg.norm(b)


def _linear_net(in_size, width, depth, sigma, seed, out_size=1) -> MLP:
    return MLP(in_size, width, depth, out_size, activation="linear", sigma=sigma, dtype=jnp.float64,
               key=jax.random.key(seed))


def _weights(model: MLP) -> list[np.ndarray]:
    return [np.asarray(w, dtype=np.float64) for w in model.weights]


def _with_weights(model: MLP, weights) -> MLP:
    return eqx.tree_at(lambda m: m.weights, model, tuple(jnp.asarray(w) for w in weights))


def _gradient_flow(weights, x, y, times) -> list[list[np.ndarray]]:
    """Gradient flow of (1/2P)Σ‖W_L⋯W_1x − y‖² on (P, D) inputs and (P, C) targets, integrated with
    DOP853 at rtol 1e-10 (so discretization error is negligible); the weights at each of ``times``.
    The loss depends on the data through Σ_xx = XᵀX/P and Σ_yx = YᵀX/P only: with E = Σ_yx − W_L⋯W_1Σ_xx,
    −∂L/∂W_ℓ = (W_L⋯W_{ℓ+1})ᵀ E (W_{ℓ−1}⋯W_1)ᵀ, D columns instead of P rows."""
    shapes = [w.shape for w in weights]
    splits = np.cumsum([w.size for w in weights])[:-1]
    sxx, syx = x.T @ x / len(x), y.T @ x / len(x)

    def unflatten(theta):
        return [part.reshape(shape) for part, shape in zip(np.split(theta, splits), shapes)]

    def minus_gradient(_, theta):
        ws = unflatten(theta)
        prefixes = [np.eye(x.shape[1])]  # W_ℓ⋯W_1
        for w in ws:
            prefixes.append(w @ prefixes[-1])
        left = syx - prefixes[-1] @ sxx  # (W_L⋯W_{ℓ+1})ᵀ E, from ℓ = L down
        grads = []
        for w, prefix in zip(ws[::-1], prefixes[-2::-1]):
            grads.append(left @ prefix.T)
            left = w.T @ left
        return np.concatenate([gr.ravel() for gr in grads[::-1]])

    theta0 = np.concatenate([w.ravel() for w in weights])
    sol = solve_ivp(minus_gradient, (0.0, float(times[-1])), theta0, t_eval=times, method="DOP853",
                    rtol=1e-10, atol=1e-14)
    assert sol.success, sol.message
    return [unflatten(theta) for theta in sol.y.T]


def _end_to_end(weights) -> np.ndarray:
    m = weights[0]
    for w in weights[1:]:
        m = w @ m
    return m


# --- two-layer overlaps q(t), r(t) (App. C.1, C.5) -------------------------------------------------


def _euler_overlaps(a, w, x, y, beta, dt, t_max, every):
    """q, r along Euler gradient descent (step dt) of f = aᵀWx on (1/2P)Σ(f − y)², every ``every``."""
    stride = round(every / dt)
    qs, rs = [], []
    for k in range(round(t_max / dt) + 1):
        if k % stride == 0:
            wb = w @ beta
            qs.append(0.5 * (a @ a + wb @ wb))
            rs.append(a @ wb)
        h = w @ x.T
        e = (a @ h - y) / len(x)
        a, w = a - dt * (h @ e), w - dt * np.outer(a, e @ x)
    return np.array(qs), np.array(rs)


@pytest.mark.parametrize("zero_r0", [False, True])
def test_overlaps_match_simulated_two_layer_net(zero_r0):
    """P = 100 whitened points in D = 25, N = 10, σ = 1e-3, s = 1 (silent-alignment Fig. C.3a).

    Euler's error is first order: the early growth (1 + 2s dt)^{t/dt} lags e^{2st} by ≈ 2s²dt·t in
    log, ≈ 0.5% at the transition t ≈ 6 for dt = 1e-3. The Richardson combination 2·q(dt/2) − q(dt)
    removes it, leaving the O(σ²) ≈ 1e-6 error of the theory and an O(dt²) remainder (≈ 1e-5 here).
    For ``zero_r0`` the init is projected to r₀ = 0, where Eq. 50–51 apply as printed.
    """
    rng = np.random.default_rng(0)
    s, dt, t_max, every = 1.0, 1e-3, 14.0, 0.01
    x = _whitened(rng, 100, 25)
    beta = _unit(rng, 25)
    model = _linear_net(25, 10, 2, sigma=1e-3, seed=0)
    if zero_r0:
        w, a = _weights(model)[0], _weights(model)[1][0]
        wb = w @ beta
        model = _with_weights(model, [w, (a - (a @ wb) / (wb @ wb) * wb)[None]])
    q0, r0 = two_layer.initial_overlaps(model, beta)
    if r0 < 0:  # the same init with the teacher flipped: r(t) > 0 throughout, so relative errors are defined
        beta, r0 = -beta, -r0
    assert abs(r0) < 1e-12 * q0 if zero_r0 else r0 > 0.05 * q0

    w0, a0 = _weights(model)[0], _weights(model)[1][0]
    q_dt, r_dt = _euler_overlaps(a0, w0, x, s * x @ beta, beta, dt, t_max, every)
    q_half, r_half = _euler_overlaps(a0, w0, x, s * x @ beta, beta, dt / 2, t_max, every)
    q_sim, r_sim = 2 * q_half - q_dt, 2 * r_half - r_dt
    t = every * np.arange(q_dt.size)
    q, r = two_layer.overlaps(t, q0, s) if zero_r0 else two_layer.overlaps(t, q0, s, r0=r0)

    assert q_sim[-1] == pytest.approx(s, rel=1e-5)  # trained past convergence
    assert np.max(np.abs(q_dt / q - 1)) < 1e-2
    assert np.max(np.abs(r_dt[1:] / r[1:] - 1)) < 1e-2
    assert np.max(np.abs(q_sim / q - 1)) < 1e-4
    assert np.max(np.abs(r_sim[1:] / r[1:] - 1)) < 1e-4
    if not zero_r0:  # Eq. 50–51 as printed (r₀ = 0) shift the transition by ln(1 + r₀/q₀)/2s
        assert np.max(np.abs(q_sim / two_layer.overlaps(t, q0, s)[0] - 1)) > 5e-2

    # Eq. 33 drops the cubic terms, relative size ≈ q/s: within 2e-3 while q ≤ 1e-3 s (t ≲ 3.8)
    q_early, r_early = two_layer.early_overlaps(t, q0, r0, s)
    early = q_early <= 1e-3 * s
    assert t[early].max() > 3.0
    assert np.max(np.abs(q_sim[early] / q_early[early] - 1)) < 2e-3
    assert np.max(np.abs(r_sim[early][1:] / r_early[early][1:] - 1)) < 2e-3


def test_overlaps_limits_and_logistic():
    """q(0) = q₀, r(0) = r₀; q, r → s; q₀ cosh, q₀ sinh early (r₀ = 0); (q + r)/2 is Eq. C.4."""
    s, q0, r0 = 1.5, 1e-8, 3e-9
    t = np.linspace(0.0, 20.0, 201)
    q, r = two_layer.overlaps(t, q0, s, r0=r0)
    assert (q[0], r[0]) == (pytest.approx(q0, rel=1e-14), pytest.approx(r0, rel=1e-14))
    assert (q[-1], r[-1]) == (pytest.approx(s, rel=1e-12), pytest.approx(s, rel=1e-12))
    c0, e = 0.5 * (q0 + r0), np.exp(2 * s * t)
    np.testing.assert_allclose(0.5 * (q + r), s * e / (e - 1 + s / c0), rtol=1e-12)
    early = t < 2.0
    q, r = two_layer.overlaps(t[early], q0, s)
    np.testing.assert_allclose(q, q0 * np.cosh(2 * s * t[early]), rtol=1e-5)
    np.testing.assert_allclose(r[1:], q0 * np.sinh(2 * s * t[early][1:]), rtol=1e-5)
    # Eq. 50–51 as printed
    e = np.exp(2 * s * t)
    q, r = two_layer.overlaps(t, q0, s)
    np.testing.assert_allclose(q, 2 * s * np.cosh(2 * s * t) / (e - 1 + 2 * s / q0), rtol=1e-12)
    np.testing.assert_allclose(r, 2 * s * np.sinh(2 * s * t) / (e - 1 + 2 * s / q0), rtol=1e-12)


@pytest.mark.parametrize("d,width", [(25, 10), (64, 100)])
def test_readout_norm_from_the_measured_init_matches_gradient_flow(d, width):
    """u(t)² = q(t) + u₀² − q₀ (docs/papers.md §3.3) against gradient flow integrated by DOP853 from the
    net's own, unbalanced init (σ = 1e-3, s = 1, P = 100 whitened points; D = 25, N = 10 as the
    synthetic case, D = 64, N = 100 as digits). Measured max_t |ln(u²/u²_theory)| = 6.1e-6 and 6.9e-6
    (what is left: the O(σ²) part of W off β and the O(σ²) error of Eq. 50–51's closed form); Eq. C.4
    from u₀² = (q₀ + r₀)/2 starts 2.49× and 1.44× below u₀² and is off by 0.91 and 0.37 in log."""
    rng = np.random.default_rng(d)
    s, sigma = 1.0, 1e-3
    x = _whitened(rng, 100, d)
    beta = _unit(rng, d)
    model = _linear_net(d, width, 2, sigma=sigma, seed=d)
    t = np.concatenate([[0.0], np.geomspace(1e-2, 16.0, 120)])
    path = _gradient_flow(_weights(model), x, s * x @ beta[:, None], t)
    u_sq = np.array([float(a[0] @ a[0]) for _, a in path])
    q0, r0 = two_layer.initial_overlaps(model, beta)
    theory = two_layer.readout_norm_sq(t, q0, s, r0, u_sq[0])
    assert theory[0] == pytest.approx(u_sq[0], rel=1e-12)
    assert u_sq[-1] == pytest.approx(s, rel=1e-4)  # trained past the transition
    assert two_layer.max_log_error(u_sq, theory) < 1e-4
    e = np.exp(2 * s * t)
    balanced = s * e / (e - 1 + 2 * s / (q0 + r0))  # Eq. C.4 from u₀² = (q₀ + r₀)/2
    assert u_sq[0] / balanced[0] > 1.4
    assert two_layer.max_log_error(u_sq, balanced) > 0.3


def test_per_time_errors_by_hand():
    """max_t |ln(m/θ)| and max_t |m − θ|/scale on four numbers: ln 2 at t = 1 (m = 2θ), the entries
    with a non-positive or NaN value left out; |0.3 − 0.1|/0.5 = 0.4 at t = 2."""
    measured = np.array([1e-8, 2e-4, 0.9, -1.0, np.nan])
    theory = np.array([1.1e-8, 1e-4, 1.0, 1.0, 1.0])
    assert two_layer.max_log_error(measured, theory) == pytest.approx(np.log(2.0), rel=1e-12)
    assert np.isnan(two_layer.max_log_error([-1.0], [1.0]))
    r, r_theory, q = np.array([0.0, 0.01, 0.3, np.nan]), np.array([0.001, 0.0, 0.1, 0.0]), np.array([0.01, 0.1, 0.5, 1])
    assert two_layer.max_scaled_error(r, r_theory, q) == pytest.approx(0.4, rel=1e-12)


# --- final NTK of deep linear nets (App. E.2) ------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("parameterization,output_scale", [("standard", 1.0), ("ntk", 0.7)])
def test_linear_ntk_matrix_matches_empirical_ntk(depth, parameterization, output_scale):
    """On basis vectors K(e_i, e_j) = M_ij; multipliers c_ℓ and κ enter as in the model."""
    model = MLP(6, 5, depth, activation="linear", parameterization=parameterization, sigma=1.3,
                output_scale=output_scale, dtype=jnp.float64, key=jax.random.key(depth))
    m = final_kernel.linear_ntk_matrix(model)
    k = np.asarray(empirical_ntk(model, np.eye(6))[:, :, 0, 0])
    np.testing.assert_allclose(m, k, rtol=1e-10, atol=1e-10 * np.abs(k).max())


def test_linear_ntk_matrix_rejects_biases():
    model = MLP(4, 3, 2, activation="linear", bias=True, key=jax.random.key(0))
    with pytest.raises(ValueError, match="bias-free"):
        final_kernel.linear_ntk_matrix(model)


@pytest.mark.parametrize("depth,sigma,t_max", [(2, 1e-2, 40.0), (3, 3e-2, 150.0), (4, 5e-2, 800.0)])
def test_final_ntk_of_trained_deep_linear_net(depth, sigma, t_max):
    """Gradient flow from σ-small init on whitened data (P = 100, D = 25, N = 20, s = 2) to convergence:
    M → s^{2(L−1)/L}[(L − 1)ββᵀ + I] up to the O(σ) left in the first layer off β (Eq. 63). Measured
    relative Frobenius errors 4e-5, 4e-4, 2e-3 (L = 2, 3, 4) against the bound σ; ratio off ≤ 2e-3."""
    rng = np.random.default_rng(depth)
    s = 2.0
    x = _whitened(rng, 100, 25)
    beta = _unit(rng, 25)
    model = _linear_net(25, 20, depth, sigma, seed=depth)
    (trained,) = _gradient_flow(_weights(model), x, s * x @ beta[:, None], [t_max])
    assert np.linalg.norm(_end_to_end(trained)[0] - s * beta) < 1e-6 * s
    m = final_kernel.linear_ntk_matrix(_with_weights(model, trained))
    theory = final_kernel.final_ntk_matrix(beta, s, depth)
    assert np.linalg.norm(m - theory) / np.linalg.norm(theory) < sigma
    assert final_kernel.direction_ratio(m, beta) == pytest.approx(depth, rel=1e-2)
    assert final_kernel.direction_ratio(theory, beta) == pytest.approx(depth, rel=1e-12)


def test_direction_ratio_is_mean_over_orthogonal_complement():
    rng = np.random.default_rng(1)
    g = rng.standard_normal((7, 7))
    m, beta = g @ g.T, _unit(rng, 7)
    complement = np.linalg.svd(np.eye(7) - np.outer(beta, beta))[0][:, :6]  # orthonormal basis of β⊥
    expected = beta @ m @ beta / np.mean(np.einsum("dk,de,ek->k", complement, m, complement))
    assert final_kernel.direction_ratio(m, 3.0 * beta) == pytest.approx(expected, rel=1e-12)


def test_kernel_alignment_of_matrix():
    """Against the Gram built entry by entry, and the closed form A = L/√(L² + D − 1) of M∞ with
    y = sXβ on whitened X (XᵀX = P·I turns yᵀKy, ‖K‖_F into traces of [(L − 1)ββᵀ + I])."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((12, 5)), rng.standard_normal(12)
    g = rng.standard_normal((5, 5))
    m = g @ g.T
    gram = np.array([[xi @ m @ xj for xj in x] for xi in x])
    direct = sum(y[i] * gram[i, j] * y[j] for i in range(12) for j in range(12))
    direct /= np.sqrt(np.sum(gram**2)) * np.sum(y**2)
    assert final_kernel.kernel_alignment_of_matrix(m, x, y[:, None]) == pytest.approx(direct, rel=1e-12)

    x, beta = _whitened(rng, 60, 20), _unit(rng, 20)
    for depth in (1, 2, 5):
        m = final_kernel.final_ntk_matrix(beta, 1.7, depth)
        alignment = final_kernel.kernel_alignment_of_matrix(m, x, 1.7 * x @ beta)
        assert alignment == pytest.approx(depth / np.sqrt(depth**2 + 20 - 1), rel=1e-12)


# --- min-norm interpolant (App. G.1) ---------------------------------------------------------------


def test_min_norm_interpolant_matches_pinv():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 25))
    for y in (rng.standard_normal(10), rng.standard_normal((10, 3))):
        np.testing.assert_allclose(final_kernel.min_norm_interpolant(x, y), np.linalg.pinv(x) @ y, rtol=1e-10)


@pytest.mark.parametrize("depth,sigma,t_max", [(2, 1e-3, 40.0), (3, 1e-2, 400.0)])
def test_linear_net_converges_to_min_norm_interpolant(depth, sigma, t_max):
    """P = 10 < D = 25 points whitened on their span, a teacher off the span. Every interpolant has
    the min-norm one as its in-span part; the first layer moves only within the span, so the rest is
    the frozen B₁W₁(0)P_⊥ of norm ≈ σ√((D − P)/D)·|B₁| ≈ 0.7σ|w_min| here (measured 0.72σ, 0.82σ)."""
    rng = np.random.default_rng(4)
    x = _whitened(rng, 10, 25)
    y = x @ (2.0 * _unit(rng, 25))
    model = _linear_net(25, 20, depth, sigma, seed=10 + depth)
    (trained,) = _gradient_flow(_weights(model), x, y[:, None], [t_max])
    w = np.asarray(_with_weights(model, trained).end_to_end_matrix())[0]
    w_min = final_kernel.min_norm_interpolant(x, y)
    np.testing.assert_allclose(x @ w_min, y, rtol=1e-10)
    assert np.linalg.norm(w - w_min) / np.linalg.norm(w_min) < 2 * sigma


# --- per-mode dynamics with several outputs (Saxe et al. 2014; App. H) -----------------------------


def _mode_task(rng, strengths, p=100, d=25):
    """Whitened (P, D) inputs and targets Y = X Tᵀ with T = U diag(s) Vᵀ, so Σ_yx = T."""
    c = len(strengths)
    u = np.linalg.qr(rng.standard_normal((c, c)))[0]
    v = np.linalg.qr(rng.standard_normal((d, c)))[0]
    x = _whitened(rng, p, d)
    return x, x @ (v * strengths) @ u.T, u, v


def test_mode_strengths_project_the_end_to_end_matrix():
    """m_k = u_kᵀ W (XᵀX/P) v_k for the network's map W; = u_kᵀWv_k on whitened data; rank-deficient
    targets keep only their nonzero modes."""
    rng = np.random.default_rng(5)
    x, y, u, v = _mode_task(rng, np.array([3.0, 2.0, 0.0]))
    model = _linear_net(25, 8, 3, sigma=1.0, seed=5, out_size=3)
    w = np.asarray(model.end_to_end_matrix())
    m, s = final_kernel.mode_strengths(np.asarray(jax.vmap(model)(x)), x, y)
    np.testing.assert_allclose(s, [3.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(m, np.einsum("ck,cd,dk->k", u, w, v)[:2], rtol=1e-10)

    x_raw = rng.standard_normal((40, 25)) * np.linspace(0.5, 2.0, 25)
    y_raw = x_raw @ rng.standard_normal((25, 3))
    vm, sm, um = final_kernel.target_modes(x_raw, y_raw)
    m, s = final_kernel.mode_strengths(np.asarray(jax.vmap(model)(x_raw)), x_raw, y_raw)
    np.testing.assert_allclose(sm, s)
    np.testing.assert_allclose(um * s @ vm.T, y_raw.T @ x_raw / 40, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m, np.einsum("ck,cd,dk->k", um, w @ x_raw.T @ x_raw / 40, vm), rtol=1e-10)


def _simulated_mode_strengths(depth, width, sigma, strengths, t_max, seed):
    rng = np.random.default_rng(seed)
    x, y, u, v = _mode_task(rng, strengths)
    model = _linear_net(25, width, depth, sigma, seed=seed, out_size=len(strengths))
    times = np.linspace(0.0, t_max, round(t_max / 0.05) + 1)
    path = _gradient_flow(_weights(model), x, y, times)
    measured = np.array([final_kernel.mode_strengths(x @ _end_to_end(ws).T, x, y)[0] for ws in path])
    return model, x, y, times, measured.T


def test_two_layer_mode_strengths_follow_ode_from_predicted_gains():
    """C = 3 modes, s = (3, 2, 1), N = 50, σ = 1e-4: each m_k(t) follows ċ = 2c(s_k − c) from the
    c₀ of ``initial_mode_gains``, no fit. What remains is the coupling of modes 1 and 2 while mode 1
    grows, which scales as mode 2's relative size then, (c₀/s)^{1 − s₂/s₁} ∝ σ^{2/3}: ≤ 2e-4 s_k over
    8 inits (≤ 9e-4 at σ = 1e-3). Taking c₀ = (q₀ + r₀)/2 per mode without the Gram–Schmidt step
    misses the squared overlaps of the modes' growing directions, O(1/N) ≈ 1e-2 s_k."""
    strengths = np.array([3.0, 2.0, 1.0])
    model, x, y, times, measured = _simulated_mode_strengths(2, 50, 1e-4, strengths, 15.0, seed=6)
    c0 = two_layer.initial_mode_gains(model, x, y)
    theory = final_kernel.mode_strength_trajectories(times, c0, strengths, depth=2)
    error = np.max(np.abs(measured - theory), axis=1) / strengths
    assert np.all(error < 1e-3), error
    np.testing.assert_allclose(measured[:, -1], strengths, rtol=1e-4)


def _fit_initial_gain(times, measured, s, depth):
    """c₀ putting the ODE through the first sample past s/2."""
    i = int(np.argmax(measured > s / 2))

    def miss(log_c0):
        return deep_linear.gain_trajectory([0.0, times[i]], np.exp(log_c0), s, depth)[-1] - measured[i]

    high = np.log(measured[i]) - 1e-12
    low = high - 5.0
    while miss(low) > 0:
        low -= 5.0
    return np.exp(brentq(miss, low, high, xtol=1e-14))


def test_deep_mode_strengths_follow_ode():
    """L = 3, C = 3, s = (4, 2, 1), N = 30, σ = 1e-2. For L ≥ 3 alignment and growth share their
    σ-scaling (App. E.1), so c₀ is not predicted: it is fixed by one point, and the whole sigmoid —
    whose sharpness depends on L — is tested. The net's top singular vectors still lag (u₁, v₁) by
    an angle θ while mode 1 grows, moving ≈ c₁θ² from m₁ to m₂; this does not shrink with σ, and over
    16 inits it stays ≤ 6e-3 s_k (up to 2e-2 with the smaller gap s = (3, 2, 1)). The L = 2 sigmoid
    through the same point is off by more than 5e-2 s_k."""
    strengths = np.array([4.0, 2.0, 1.0])
    _, _, _, times, measured = _simulated_mode_strengths(3, 30, 1e-2, strengths, 200.0, seed=7)
    for depth, bound in ((3, 1e-2), (2, None)):
        c0 = [_fit_initial_gain(times, mk, sk, depth) for mk, sk in zip(measured, strengths)]
        theory = final_kernel.mode_strength_trajectories(times, c0, strengths, depth)
        error = np.max(np.abs(measured - theory), axis=1) / strengths
        if bound is None:
            assert np.all(error > 5e-2), error
        else:
            assert np.all(error < bound), error
    np.testing.assert_allclose(measured[:, -1], strengths, rtol=1e-4)


def test_gain_time_against_the_closed_form_and_the_trajectory():
    """c(t) = s/2 at t = (1/2s) ln(s/c₀ − 1) for L = 2 (Eq. C.4); for L = 3, 4 the trajectory of Eq. (1)
    reaches the level at the returned time; t½ is the gain time of c½."""
    s, c0 = 0.5, 2e-5
    assert deep_linear.gain_time(c0, s, 2, s / 2) == pytest.approx(np.log(s / c0 - 1) / (2 * s), rel=1e-8)
    for depth in (3, 4):
        t = deep_linear.gain_time(c0, s, depth, 0.3)
        assert deep_linear.gain_trajectory([0.0, t], c0, s, depth)[-1] == pytest.approx(0.3, rel=1e-5)
    assert deep_linear.half_loss_time(c0, s, 3) == pytest.approx(
        deep_linear.gain_time(c0, s, 3, deep_linear.half_loss_gain(c0, s)), rel=1e-12)
    with pytest.raises(ValueError, match="level"):
        deep_linear.gain_time(c0, s, 2, 1.2 * s)


def test_aligned_mode_gains_at_two_layers_are_the_qr_of_the_growing_directions():
    """At L = 2 the per-mode aligned chain, deflated by the stronger modes' hidden directions, is
    ``two_layer.initial_mode_gains`` (R_kk² of the QR of g_k = (W₂ᵀu_k + W₁v_k)/2), computed apart."""
    rng = np.random.default_rng(3)
    x, y, _, _ = _mode_task(rng, np.array([3.0, 2.0, 1.0]))
    model = _linear_net(25, 20, 2, sigma=1e-2, seed=3, out_size=3)
    v, _, u = final_kernel.target_modes(x, y)
    np.testing.assert_allclose(deep_linear.aligned_mode_gains(_weights(model), v, u),
                               two_layer.initial_mode_gains(model, x, y), rtol=1e-8)


@pytest.mark.parametrize("depth,sigma,t_max,bound", [(3, 1e-2, 200.0, 0.08), (4, 0.05, 400.0, 0.25)])
def test_deep_mode_times_from_aligned_gains(depth, sigma, t_max, bound):
    """C = 3 modes s = (4, 2, 1), N = 30, gradient flow (DOP853) from σ-small init: each mode's learning
    time (m_k = s_k/2) against the ODE's from c₀ of ``aligned_mode_gains``, no fit. Measured t_ODE/t − 1:
    −0.014, −0.038, −0.021 (L = 3, σ = 1e-2) and 0.001, −0.123, −0.010 (L = 4, σ = 0.05); the bounds are
    twice the largest: the ODE's balanced chain is an approximation for the unbalanced init. The readout
    alone, c₀ = |W_Lᵀu_k|^L, is off by −0.19 … −0.25 (L = 3) and −0.17 … −0.42 (L = 4)."""
    from ntkpipe.measure.outputs import mode_half_times

    strengths = np.array([4.0, 2.0, 1.0])
    model, x, y, times, measured = _simulated_mode_strengths(depth, 30, sigma, strengths, t_max, seed=7)
    v, s, u = final_kernel.target_modes(x, y)
    measured_times = mode_half_times(times, measured.T, s)
    weights = _weights(model)
    c0 = deep_linear.aligned_mode_gains(weights, v, u)
    theory = np.array([deep_linear.gain_time(c, sk, depth, sk / 2) for c, sk in zip(c0, s)])
    assert np.all(np.diff(measured_times) > 0)
    assert np.max(np.abs(theory / measured_times - 1)) < bound, theory / measured_times - 1
    readout = np.linalg.norm(weights[-1].T @ u, axis=0) ** depth
    readout_times = np.array([deep_linear.gain_time(c, sk, depth, sk / 2) for c, sk in zip(readout, s)])
    assert np.max(np.abs(readout_times / measured_times - 1)) > np.max(np.abs(theory / measured_times - 1))


# --- final NTK with several outputs (App. H) -------------------------------------------------------


def _ntk_gram(model: MLP, x) -> np.ndarray:
    """The (P·C, P·C) training Gram of the model, by automatic differentiation (ntkpipe's empirical NTK)."""
    return np.asarray(flatten_gram(empirical_ntk(model, x)), dtype=np.float64)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_multioutput_final_gram_is_the_ntk_of_the_balanced_net(depth):
    """A balanced rank-C net W_1 = R_2 S^{1/L} Vᵀ, W_ℓ = R_{ℓ+1} S^{1/L} R_ℓᵀ, W_L = Z S^{1/L} R_Lᵀ (random
    orthonormal R_ℓ) computes β = Z S Vᵀ; its NTK by autodiff is the closed form, to round-off."""
    rng = np.random.default_rng(10 + depth)
    x, y, z, v = _mode_task(rng, np.array([3.0, 1.5, 0.5]), p=30, d=8)
    strengths, width = np.array([3.0, 1.5, 0.5]), 6
    r = [np.linalg.qr(rng.standard_normal((width, 3)))[0] for _ in range(depth - 1)]
    root = np.diag(strengths ** (1.0 / depth))
    sides = [v] + r + [z]  # r_1 = v, …, r_{L+1} = z
    weights = [sides[k + 1] @ root @ sides[k].T for k in range(depth)]
    model = _with_weights(_linear_net(8, width, depth, 1.0, seed=depth, out_size=3), weights)
    np.testing.assert_allclose(_end_to_end(weights), z * strengths @ v.T, atol=1e-12)
    gram = _ntk_gram(model, x)
    theory = final_kernel.multioutput_final_gram(x, y, depth)
    np.testing.assert_allclose(theory, gram, rtol=1e-9, atol=1e-9 * np.abs(gram).max())
    assert final_kernel.multioutput_final_alignment(x, y, depth) == pytest.approx(kernel_alignment(gram, y), rel=1e-9)


def test_multioutput_final_alignment_with_one_output_is_eq63():
    """C = 1: the closed form is Eq. 63's M∞ with β the least-squares direction."""
    rng = np.random.default_rng(3)
    x, beta = _whitened(rng, 60, 20), _unit(rng, 20)
    for depth in (2, 3):
        expected = final_kernel.kernel_alignment_of_matrix(final_kernel.final_ntk_matrix(beta, 1.7, depth), x,
                                                           1.7 * x @ beta)
        assert final_kernel.multioutput_final_alignment(x, 1.7 * x @ beta, depth) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("depth,sigma,t_max", [(2, 1e-2, 60.0), (3, 3e-2, 400.0)])
def test_multioutput_final_gram_of_trained_net(depth, sigma, t_max):
    """Gradient flow from σ-small init (P = 60, D = 12, C = 3, s = 3, 1.5, 0.8, N = 16) to convergence:
    the net's NTK Gram (autodiff) reaches the closed form up to the O(σ) the first layer keeps off the
    data's modes. Measured: relative Frobenius error 2.9e-5 (L = 2), 3.8e-4 (L = 3) against the bound σ;
    alignment 0.33925 vs 0.33925 and 0.42071 vs 0.42070 (off by 5e-7, 8e-6; bound 1e-4)."""
    rng = np.random.default_rng(20 + depth)
    x, y, _, _ = _mode_task(rng, np.array([3.0, 1.5, 0.8]), p=60, d=12)
    model = _linear_net(12, 16, depth, sigma, seed=depth, out_size=3)
    (trained,) = _gradient_flow(_weights(model), x, y, [t_max])
    net = _with_weights(model, trained)
    assert np.abs(np.asarray(jax.vmap(net)(jnp.asarray(x))) - y).max() < 1e-5
    gram, theory = _ntk_gram(net, x), final_kernel.multioutput_final_gram(x, y, depth)
    assert np.linalg.norm(gram - theory) / np.linalg.norm(theory) < sigma
    assert final_kernel.multioutput_final_alignment(x, y, depth) == pytest.approx(kernel_alignment(gram, y), abs=1e-4)


def test_relu_final_gram_is_the_ntk_of_the_collapsed_relu_net():
    """A bias-free two-layer ReLU net whose units lie on ±β, balanced (|a_i| = |w_i|, a_i w_i ∥ β) with
    Σ₊|w_i|² = Σ₋|w_i|² = s, computes sβᵀx; its NTK by autodiff is s·1(zz' > 0)(zz' + xᵀx'), z = βᵀx
    (docs/papers.md §3.8), to round-off, and its alignment lies below the linear net's (Eq. 63)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 5))
    beta = rng.standard_normal(5)
    beta /= np.linalg.norm(beta)
    s, width = 1.7, 6
    shares = rng.dirichlet(np.ones(width // 2), size=2).ravel()  # each side's |w_i|² sum to s
    norms = np.sqrt(s * shares)
    signs = np.repeat([1.0, -1.0], width // 2)
    model = MLP(5, width, 2, 1, activation="relu", sigma=1.0, dtype=jnp.float64, key=jax.random.key(0))
    model = _with_weights(model, [np.outer(signs * norms, beta), (signs * norms)[None, :]])
    f = np.asarray(jax.vmap(model)(jnp.asarray(x)), np.float64)[:, 0]
    np.testing.assert_allclose(f, s * x @ beta, atol=1e-12)
    gram = _ntk_gram(model, x)
    theory = final_kernel.relu_final_gram(x, beta, s)
    np.testing.assert_allclose(theory, gram, rtol=1e-10, atol=1e-10 * np.abs(gram).max())
    y = s * x @ beta
    linear = x @ final_kernel.final_ntk_matrix(beta, s, 2) @ x.T
    assert kernel_alignment(theory, y) < kernel_alignment(linear, y)


@pytest.mark.parametrize("depth", [2, 3])
def test_min_norm_error_theory_is_the_rms_of_the_frozen_part(depth):
    """For a fixed first layer W₁ and unit rows r drawn uniformly, E|rᵀW₁P⊥|² = ‖W₁P⊥‖²_F/N (Monte
    Carlo, 20,000 draws), so |w_min|^{(L−1)/L}·that RMS over |w_min| is min_norm_error_theory; for
    W ~ N(0, σ²/D) it is ≈ σ√((D − P)/D)/|w_min|^{1/L}."""
    rng = np.random.default_rng(depth)
    p, d, n, sigma = 8, 20, 30, 0.05
    x = rng.standard_normal((p, d))
    y = rng.standard_normal(p)
    w1 = sigma / np.sqrt(d) * rng.standard_normal((n, d))
    w_min = final_kernel.min_norm_interpolant(x, y)
    theory = final_kernel.min_norm_error_theory(w1, x, w_min, depth)
    off_span = np.eye(d) - np.linalg.pinv(x) @ x
    r = rng.standard_normal((20_000, n))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    rms = np.sqrt(np.mean(np.sum((r @ w1 @ off_span) ** 2, axis=1)))
    norm = np.linalg.norm(w_min)
    assert theory == pytest.approx(norm ** ((depth - 1) / depth) * rms / norm, rel=0.02)
    assert theory == pytest.approx(sigma * np.sqrt((d - p) / d) / norm ** (1 / depth), rel=0.15)
