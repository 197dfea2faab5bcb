"""Deep-linear gradient-flow theory against closed forms and an independent simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ntkpipe.theory import deep_linear


@pytest.mark.parametrize("u0_sq", [1e-6, 1e-4, 1e-2])
@pytest.mark.parametrize("s", [0.5, 1.0, 3.0])
def test_two_layer_half_loss_time_matches_closed_form(u0_sq, s):
    ode = deep_linear.half_loss_time(u0_sq, s, depth=2)
    # exact: c(t) = s / (1 + (s/c₀ − 1) e^{−2st}) reaches s − (s − c₀)/√2 when
    # (s/c₀ − 1) e^{−2st} = r / (1 − r), r = (1 − c₀/s)/√2
    r = (1.0 - u0_sq / s) / math.sqrt(2.0)
    exact = math.log((s / u0_sq - 1.0) * (1.0 - r) / r) / (2.0 * s)
    assert ode == pytest.approx(exact, rel=1e-8)
    # the paper's form takes the initial loss as s²/2 (f₀ ≈ 0): off by about 1.7 c₀/s²
    closed = deep_linear.half_loss_time_two_layer(u0_sq, s)
    assert ode == pytest.approx(closed, abs=2.5 * u0_sq / s**2)


def test_two_layer_trajectory_matches_eq_c4():
    """The L = 2 gain ODE against Eq. C.4, u² = s e^{2st}/(e^{2st} − 1 + s/u₀²)."""
    t = np.linspace(0.0, 8.0, 50)
    c = deep_linear.gain_trajectory(t, 1e-4, 1.0, depth=2)
    e = np.exp(2.0 * t)
    np.testing.assert_allclose(c, e / (e - 1.0 + 1.0 / 1e-4), rtol=1e-7)


def _balanced_chain_half_time(u0: float, s: float, depth: int, dt: float = 1e-3) -> float:
    """Gradient descent on the balanced scalar chain f = u^L, loss ½(s − u^L)², each layer's
    weight u following u̇ = −∂loss/∂u = u^{L−1}(s − u^L); returns the first t with loss ≤ half."""
    u, t = u0, 0.0
    loss0 = 0.5 * (s - u0**depth) ** 2
    prev_t, prev_loss = 0.0, loss0
    while True:
        u += dt * u ** (depth - 1) * (s - u**depth)
        t += dt
        loss = 0.5 * (s - u**depth) ** 2
        if loss <= 0.5 * loss0:
            return prev_t + (0.5 * loss0 - prev_loss) * (t - prev_t) / (loss - prev_loss)
        prev_t, prev_loss = t, loss


@pytest.mark.parametrize("depth,u0", [(2, 0.05), (3, 0.2), (4, 0.4)])
def test_ode_matches_simulated_balanced_network(depth, u0):
    """With the chain-rule factor L the ODE is the balanced net's dynamics (to the Euler step)."""
    simulated = _balanced_chain_half_time(u0, 1.0, depth)
    assert deep_linear.half_loss_time(u0**depth, 1.0, depth) == pytest.approx(simulated, rel=1e-3)


@pytest.mark.parametrize("depth", [3, 4, 5])
def test_small_init_asymptote(depth):
    c0 = 1e-12
    t = deep_linear.half_loss_time(c0, 1.0, depth)
    assert t == pytest.approx(deep_linear.half_loss_time_asymptote(c0, 1.0, depth), rel=0.02)


@pytest.mark.parametrize("depth", [3, 4])
def test_power_law_exponent_in_sigma(depth):
    """t½ ∝ σ^{-(L-2)} with c₀ = σ^L (silent-alignment Fig. 3a)."""
    sigma = np.geomspace(1e-4, 1e-3, 5)
    t = [deep_linear.half_loss_time(x**depth, 1.0, depth) for x in sigma]
    slope = np.polyfit(np.log(sigma), np.log(t), 1)[0]
    assert slope == pytest.approx(-(depth - 2), abs=0.01)


def test_rejects_initial_gain_above_target():
    with pytest.raises(ValueError, match="0 < c0 < s"):
        deep_linear.half_loss_time(2.0, 1.0, 3)


def _unit(v):
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("depth", [2, 3, 5])
def test_aligned_initial_gain_of_a_balanced_aligned_net_is_its_end_to_end_gain(depth):
    """W_ℓ = u e_ℓ e_{ℓ−1}ᵀ (e_0 = β): c₀ is βᵀ(W_L ⋯ W_1)ᵀ, the product of the weights along β."""
    rng = np.random.default_rng(depth)
    dims = [7] + [5] * (depth - 1) + [1]
    e = [_unit(rng.standard_normal(n)) for n in dims[:-1]] + [np.ones(1)]
    u = 0.3
    weights = [u * np.outer(e[k + 1], e[k]) for k in range(depth)]
    product = weights[0]
    for w in weights[1:]:
        product = w @ product
    end_to_end = float(product[0] @ e[0])
    assert end_to_end == pytest.approx(u**depth, rel=1e-12)
    assert deep_linear.aligned_initial_gain(weights, e[0]) == pytest.approx(end_to_end, rel=1e-12)


def test_aligned_initial_gain_at_depth_two_is_the_growing_mode():
    """L = 2: c₀ = (q₀ + r₀)/2 of App. C.5 for a random init."""
    import jax
    import jax.numpy as jnp

    from ntkpipe.models import MLP
    from ntkpipe.theory import two_layer

    model = MLP(9, 6, 2, activation="linear", sigma=0.1, dtype=jnp.float64, key=jax.random.key(3))
    beta = _unit(np.random.default_rng(3).standard_normal(9))
    q0, r0 = two_layer.initial_overlaps(model, beta)
    assert deep_linear.aligned_initial_gain(model.weights, beta) == pytest.approx((q0 + r0) / 2.0, rel=1e-12)


def test_aligned_initial_gain_maximizes_the_path_sum_by_brute_force():
    """L = 3, random weights: c₀ = (S/3)³ with S the largest Σ_ℓ e_ℓᵀW_ℓe_{ℓ−1} over unit e_ℓ in the
    span of the forward path W_ℓ⋯W_1β and the backward path (W_3⋯W_{ℓ+1})ᵀ, found on a grid of
    angles (0.2°) instead of by coordinate ascent."""
    rng = np.random.default_rng(0)
    w1, w2, a = rng.standard_normal((5, 6)) * 0.2, rng.standard_normal((5, 5)) * 0.2, rng.standard_normal((1, 5)) * 0.2
    beta = _unit(rng.standard_normal(6))
    paths = [(w1 @ beta, (a @ w2)[0]), (w2 @ w1 @ beta, a[0])]  # (forward, backward) at hidden layers 1, 2
    bases = []
    for forward, backward in paths:  # Gram–Schmidt by hand
        f = _unit(forward)
        bases.append((f, _unit(backward - (backward @ f) * f)))
    angles = np.radians(np.arange(0.0, 360.0, 0.2))
    e1 = np.cos(angles)[:, None] * bases[0][0] + np.sin(angles)[:, None] * bases[0][1]  # (n, 5)
    e2 = np.cos(angles)[:, None] * bases[1][0] + np.sin(angles)[:, None] * bases[1][1]
    path_sum = (e1 @ w1 @ beta)[:, None] + e1 @ w2.T @ e2.T + (e2 @ a[0])[None, :]  # S(e1, e2) on the grid
    expected = (path_sum.max() / 3.0) ** 3
    assert deep_linear.aligned_initial_gain([w1, w2, a], beta) == pytest.approx(expected, rel=1e-4)
