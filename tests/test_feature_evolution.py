"""Optimal feature evolution: the diffrax integration against closed forms, the Riccati solution and the
paper's claims; the feature-rate fit against its Δ₀ = −y closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import expm

from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.theory import feature_evolution as ofe

N = 20
RATE = 0.7
TIMES = np.linspace(0.0, 4.0, 9)


def _problem(seed: int = 0):
    """Random K₀ ≻ 0 (eigenvalues in ≈[0.1, 4]), ±1 targets y and Δ₀ = f₀ − y with a small f₀."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((N, N))
    k0 = a @ a.T / N + 0.1 * np.eye(N)
    y = np.sign(rng.standard_normal(N))
    return k0, y, 0.3 * rng.standard_normal(N) - y


def _rel(a, b, axes) -> float:
    return float(np.max(np.linalg.norm(a - b, axis=axes) / np.linalg.norm(b, axis=axes)))


@pytest.mark.parametrize("gamma, psi0", [(0.5, 0.3), (2.0, 1.0), (0.0, 1.0), (1.0, 0.0)])
def test_scalar_integration_matches_logistic_closed_form(gamma, psi0):
    times = np.linspace(0.0, 3.0, 13)
    sol = ofe.ofe_solve(np.array([[psi0**2]]), np.array([-1.3]), gamma, 0.5, times, atol=1e-16)
    delta, psi = ofe.ofe_scalar(-1.3, psi0, gamma, 0.5, times)
    np.testing.assert_allclose(sol.delta[:, 0], delta, rtol=1e-8)
    np.testing.assert_allclose(sol.kernel[:, 0, 0], psi**2, rtol=1e-8, atol=1e-300)
    np.testing.assert_allclose(gamma * delta**2 + psi**2, gamma * 1.3**2 + psi0**2, rtol=1e-14)
    assert sol.conservation_error <= 1e-9


def test_scalar_closed_form_solves_eq_31():
    """Central differences of (Δ, ψ) against Δ̇ = −rψ²Δ, ψ̇ = γrψΔ²."""
    t, h, gamma, rate = np.linspace(0.1, 3.0, 8), 1e-5, 1.5, 0.8
    delta, psi = ofe.ofe_scalar(0.9, 0.4, gamma, rate, t)
    (dp, pp), (dm, pm) = ofe.ofe_scalar(0.9, 0.4, gamma, rate, t + h), ofe.ofe_scalar(0.9, 0.4, gamma, rate, t - h)
    np.testing.assert_allclose((dp - dm) / (2 * h), -rate * psi**2 * delta, rtol=1e-8)
    np.testing.assert_allclose((pp - pm) / (2 * h), gamma * rate * psi * delta**2, rtol=1e-8)


@pytest.mark.parametrize("gamma", [0.0, 0.1, 1.0, 5.0])
def test_matrix_integration_matches_closed_form(gamma):
    k0, _, delta0 = _problem()
    sol = ofe.ofe_solve(k0, delta0, gamma, RATE, TIMES)
    delta, kernel = ofe.ofe_closed_form(k0, delta0, gamma, RATE, TIMES)
    assert _rel(sol.kernel, kernel, (1, 2)) <= 1e-7
    assert _rel(sol.delta, delta, 1) <= 1e-7
    np.testing.assert_array_equal(ofe.ofe_kernel_closed_form(k0, delta0, gamma, RATE, TIMES), kernel)
    assert sol.conservation_error <= 1e-9
    np.testing.assert_array_equal(sol.kernel, sol.kernel.swapaxes(1, 2))
    np.testing.assert_array_equal(sol.conserved, k0 + gamma * np.outer(delta0, delta0))


@pytest.mark.parametrize("gamma", [0.0, 1.0, 5.0])
def test_closed_form_matches_riccati_inverse(gamma):
    """Eq. (2) against K(t) = [e^{−rCt}(K₀⁻¹ − C⁻¹)e^{−rCt} + C⁻¹]⁻¹ with scipy's expm and inverses."""
    k0, _, delta0 = _problem(1)
    c = ofe.ofe_final_kernel(k0, delta0, gamma)
    spike = np.linalg.inv(k0) - np.linalg.inv(c)
    for t in TIMES:
        e = expm(-RATE * c * t)
        riccati = np.linalg.inv(e @ spike @ e + np.linalg.inv(c))
        assert _rel(ofe.ofe_kernel_closed_form(k0, delta0, gamma, RATE, t), riccati, None) <= 1e-12


def test_long_time_limit_is_final_kernel():
    k0, y, _ = _problem(2)
    sol = ofe.ofe_solve(k0, -y, 2.0, 1.0, [0.0, 400.0])
    np.testing.assert_allclose(ofe.ofe_final_kernel(k0, -y, 2.0), k0 + 2.0 * np.outer(y, y), rtol=1e-15)
    assert _rel(sol.kernel[-1], sol.conserved, None) <= 1e-10
    assert np.linalg.norm(sol.delta[-1]) <= 1e-10 * np.linalg.norm(y)


def test_gamma_zero_is_frozen_kernel_gradient_flow():
    k0, _, delta0 = _problem(3)
    sol = ofe.ofe_solve(k0, delta0, 0.0, RATE, TIMES)
    exact = np.array([expm(-RATE * k0 * t) @ delta0 for t in TIMES])
    assert _rel(sol.delta, exact, 1) <= 1e-9
    np.testing.assert_array_equal(sol.kernel, np.broadcast_to(0.5 * (k0 + k0.T), sol.kernel.shape))


def test_larger_feature_rate_learns_faster_and_aligns_more():
    """Sec. 4.1 / Fig. 2A–B: larger γ lowers |Δ(t)|² at every t > 0 and raises A(K(t)) and A(K∞)."""
    k0, y, _ = _problem(4)
    gammas = [0.0, 0.05, 0.5, 2.0]
    sols = [ofe.ofe_solve(k0, -y, g, RATE, TIMES) for g in gammas]
    loss = np.array([np.sum(s.delta**2, axis=1) for s in sols])
    align = np.array([[kernel_alignment(k, y) for k in s.kernel] for s in sols])
    assert np.all(np.diff(loss[:, 1:], axis=0) < 0.0)
    assert np.all(np.diff(align[:, 1:], axis=0) > 0.0)
    final = [kernel_alignment(ofe.ofe_final_kernel(k0, -y, g), y) for g in gammas]
    assert np.all(np.diff(final) > 0.0)


def _target_kernel_alignment(k0, delta0, y, gamma):
    return kernel_alignment(k0 + gamma * np.outer(delta0, delta0), y)


@pytest.mark.parametrize("gamma", [1e-3, 0.2, 3.0, 50.0])
def test_fit_feature_rate_round_trips_and_matches_closed_form(gamma):
    k0, y, delta0 = _problem(5)
    for d0 in (delta0, -y):  # A(γ) may turn over for a general Δ₀: the fit is then the first γ to reach it
        target = _target_kernel_alignment(k0, d0, y, gamma)
        fit = ofe.fit_feature_rate(k0, d0, y, target)
        assert _target_kernel_alignment(k0, d0, y, fit) == pytest.approx(target, rel=1e-12)
        assert fit <= gamma * (1 + 1e-10)
    assert fit == pytest.approx(gamma, rel=1e-8)
    a, b, k = y @ y, y @ k0 @ y, np.sum(k0**2)
    closed = (target * math.sqrt((a**2 * k - b**2) / (1 - target**2)) - b) / a**2
    assert ofe.fit_feature_rate(k0, -y, y, target) == pytest.approx(closed, rel=1e-10)
    assert ofe.fit_feature_rate(k0, -y.reshape(-1, 1), y.reshape(-1, 1), target) == pytest.approx(closed, rel=1e-10)


def test_fit_feature_rate_outside_the_reachable_range_is_nan():
    k0, y, _ = _problem(6)
    a0 = kernel_alignment(k0, y)
    assert 0.0 <= ofe.fit_feature_rate(k0, -y, y, a0) <= 1e-14  # γ̂ = 0 up to rounding, not NaN
    assert math.isnan(ofe.fit_feature_rate(k0, -y, y, 0.9 * a0))
    assert math.isnan(ofe.fit_feature_rate(k0, -y, y, 1.0))
    assert math.isnan(ofe.fit_feature_rate(k0, -y, y, 1.2))


def test_fit_feature_rate_takes_the_smallest_root():
    """Δ₀ along K₀'s top eigenvector and y mixing it with a weak mode: A(γ) rises above its limit
    cos²∠(y, Δ₀) and falls back, so a target between the limit and the peak is met twice."""
    rng = np.random.default_rng(7)
    v, _ = np.linalg.qr(rng.standard_normal((N, N)))
    k0 = (v * np.linspace(0.1, 4.0, N)[::-1]) @ v.T
    delta0, y = v[:, 0], v[:, 0] + 0.8 * v[:, 5]
    grid = np.geomspace(1e-4, 1e4, 4001)
    curve = np.array([_target_kernel_alignment(k0, delta0, y, g) for g in grid])
    limit = (y @ delta0) ** 2 / (y @ y * delta0 @ delta0)
    peak = int(np.argmax(curve))
    assert curve[peak] > limit + 1e-3 and 0 < peak < grid.size - 1
    target = 0.5 * (limit + curve[peak])
    fit = ofe.fit_feature_rate(k0, delta0, y, target)
    assert _target_kernel_alignment(k0, delta0, y, fit) == pytest.approx(target, rel=1e-12)
    assert fit < grid[peak] and np.all(curve[grid < fit] < target)
