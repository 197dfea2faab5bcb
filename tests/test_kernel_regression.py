"""Kernel regression with empirical NTKs, checked against independent closed forms."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.measure.kernel_regression import (
    KernelRegression,
    kernel_predictions,
    kernel_regression,
    prediction_agreement,
)
from ntkpipe.models import MLP


def _rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b))


def _psd(rng, n, m=None):
    a = rng.standard_normal((n, m or 2 * n))
    return a @ a.T / a.shape[1]


def test_full_rank_equals_solve():
    rng = np.random.default_rng(0)
    p, q = 12, 5
    z = rng.standard_normal((p + q, 3 * (p + q)))
    k_all = z @ z.T / z.shape[1]                       # full-rank PSD on train ∪ test
    k, k_star = k_all[:p, :p], k_all[p:, :p]
    y = rng.standard_normal((p, 1))
    fit = kernel_regression(k, k_star, y)
    assert isinstance(fit, KernelRegression)
    expected = k_star @ np.linalg.solve(k, y)
    assert fit.predictions.shape == (q, 1)
    assert _rel(fit.predictions, expected) < 1e-10
    assert fit.rank == p
    evals = np.linalg.eigvalsh(k)
    assert fit.condition == pytest.approx(evals.max() / evals.min(), rel=1e-8)
    assert (fit.ridge, fit.rcond) == (0.0, 1e-10)


def test_ridge_is_relative_to_mean_diagonal():
    rng = np.random.default_rng(1)
    p, q, ridge = 10, 4, 0.3
    k = 50.0 * _psd(rng, p)                            # scale must not change the regularization
    k_star = rng.standard_normal((q, p))
    y = rng.standard_normal((p, 1))
    fit = kernel_regression(k, k_star, y, ridge=ridge)
    lam = ridge * np.mean(np.diag(k))
    expected = k_star @ np.linalg.solve(k + lam * np.eye(p), y)
    assert _rel(fit.predictions, expected) < 1e-10
    assert fit.ridge == ridge
    evals = np.linalg.eigvalsh(k) + lam
    assert fit.condition == pytest.approx(evals.max() / evals.min(), rel=1e-8)
    # Same relative ridge on a rescaled kernel: the same predictor.
    fit_scaled = kernel_regression(k / 50.0, k_star / 50.0, y, ridge=ridge)
    assert _rel(fit_scaled.predictions, fit.predictions) < 1e-10


def test_singular_linear_kernel_is_min_norm_regression():
    rng = np.random.default_rng(2)
    p, q, d = 20, 7, 4
    x = rng.standard_normal((p, d))
    x_test = rng.standard_normal((q, d))
    w = rng.standard_normal(d)
    y = (x @ w)[:, None]
    k, k_star = x @ x.T, x_test @ x.T                  # rank d < p
    fit = kernel_regression(k, k_star, y)
    w_minnorm = np.linalg.pinv(x) @ y
    assert fit.rank == d
    assert _rel(fit.predictions, x_test @ w_minnorm) < 1e-9
    assert _rel(fit.predictions, (x_test @ w)[:, None]) < 1e-9
    # Targets off the kernel's range: the pseudo-inverse still gives min-norm least squares.
    y_noisy = rng.standard_normal((p, 1))
    fit_noisy = kernel_regression(k, k_star, y_noisy)
    assert _rel(fit_noisy.predictions, x_test @ np.linalg.pinv(x) @ y_noisy) < 1e-9


def _linear_mlp(d, n, key, c=1):
    return MLP(d, n, 2, c, activation="linear", dtype=jnp.float64, key=jax.random.PRNGKey(key))


def _closed_form_linear(model, x, y, x_test):
    """NTK of f(x) = a W x is xᵀ(WᵀW + |a|²I)x'; its kernel regressor is xᵀ M Xᵀ (X M Xᵀ)⁺ y."""
    w, a = np.asarray(model.weights[0]), np.asarray(model.weights[1])
    m = w.T @ w + np.sum(a**2) * np.eye(w.shape[1])
    return x_test @ m @ x.T @ np.linalg.pinv(x @ m @ x.T, rcond=1e-10, hermitian=True) @ y


@pytest.mark.parametrize("p", [6, 15])                  # p < d: full rank; p > d: rank d
def test_linear_mlp_matches_closed_form(p):
    d, n, q = 8, 16, 5
    rng = np.random.default_rng(3)
    x, x_test = rng.standard_normal((p, d)), rng.standard_normal((q, d))
    model_init = _linear_mlp(d, n, 0)
    # A "trained" model: different, larger weights with a rank-one spike (an aligned kernel).
    u = rng.standard_normal((n, 1))
    model_final = eqx.tree_at(
        lambda mdl: mdl.weights,
        model_init,
        (model_init.weights[0] * 2.0 + u @ rng.standard_normal((1, d)),
         model_init.weights[1] + 0.5 * u.T),
    )
    beta = rng.standard_normal((d, 1))
    y = x @ beta + 0.1 * rng.standard_normal((p, 1))

    out = kernel_predictions(model_init, model_final, x, y, x_test)

    w_f, a_f = np.asarray(model_final.weights[0]), np.asarray(model_final.weights[1])
    network = x_test @ (a_f @ w_f).T
    assert out["prediction_network"].dtype == np.float64
    assert _rel(out["prediction_network"], network) < 1e-12
    expected_final = _closed_form_linear(model_final, x, y, x_test)
    expected_init = _closed_form_linear(model_init, x, y, x_test)
    assert out["prediction_final_ntk"].shape == (q, 1)
    assert _rel(out["prediction_final_ntk"], expected_final) < 1e-8
    assert _rel(out["prediction_init_ntk"], expected_init) < 1e-8
    assert out["kr_rank_final"] == out["kr_rank_init"] == min(p, d)
    assert (out["kr_ridge"], out["kr_rcond"]) == (0.0, 1e-10)
    for tag, pred in (("final", expected_final), ("init", expected_init)):
        assert out[f"pred_corr_{tag}"] == pytest.approx(np.corrcoef(network.ravel(), pred.ravel())[0, 1],
                                                        abs=1e-8)
        assert out[f"pred_relerr_{tag}"] == pytest.approx(_rel(pred, network), rel=1e-7)


def test_two_outputs_flattening_matches_blocks():
    rng = np.random.default_rng(4)
    p, q, c = 7, 3, 2
    # Per-(output, output) blocks K^{cd} (P × P), assembled by hand in (example, output) order.
    z = rng.standard_normal(((p + q) * c, 4 * (p + q) * c))
    big = z @ z.T / z.shape[1]                        # PSD, indexed by (output, example)
    blocks = big.reshape(c, p + q, c, p + q)          # [c, i, d, j]
    k = np.zeros((p * c, p * c))
    k_star = np.zeros((q * c, p * c))
    for ci in range(c):
        for di in range(c):
            for i in range(p):
                for j in range(p):
                    k[i * c + ci, j * c + di] = blocks[ci, i, di, j]
            for i in range(q):
                for j in range(p):
                    k_star[i * c + ci, j * c + di] = blocks[ci, p + i, di, j]
    y = rng.standard_normal((p, c))
    fit = kernel_regression(k, k_star, y)
    # Independent: solve in (output, example) order, then reorder to (example, output).
    k_oe = blocks[:, :p, :, :p].reshape(c * p, c * p)
    k_star_oe = blocks[:, p:, :, :p].reshape(c * q, c * p)
    f_oe = k_star_oe @ np.linalg.solve(k_oe, y.T.reshape(-1))
    assert fit.predictions.shape == (q, c)
    assert _rel(fit.predictions, f_oe.reshape(c, q).T) < 1e-10
    assert fit.rank == p * c


def test_two_output_mlp_uses_flattened_ntk():
    from ntkpipe.ntk.dispatch import empirical_ntk

    d, n, p, q, c = 3, 8, 5, 4, 2
    rng = np.random.default_rng(5)
    x, x_test = rng.standard_normal((p, d)), rng.standard_normal((q, d))
    y = rng.standard_normal((p, c))
    model0 = MLP(d, n, 2, c, activation="tanh", dtype=jnp.float64, key=jax.random.PRNGKey(1))
    model1 = MLP(d, n, 2, c, activation="tanh", dtype=jnp.float64, key=jax.random.PRNGKey(2))
    out = kernel_predictions(model0, model1, x, y, x_test, ridge=1e-3)
    assert out["prediction_network"].shape == out["prediction_init_ntk"].shape == (q, c)
    for tag, model in (("init", model0), ("final", model1)):
        kk = np.asarray(empirical_ntk(model, x))                 # (P, P, C, C)
        ks = np.asarray(empirical_ntk(model, x_test, x))         # (Q, P, C, C)
        k = np.block([[kk[i, j] for j in range(p)] for i in range(p)])
        k_star = np.block([[ks[i, j] for j in range(p)] for i in range(q)])
        lam = 1e-3 * np.mean(np.diag(k))
        expected = (k_star @ np.linalg.solve(k + lam * np.eye(p * c), y.reshape(-1))).reshape(q, c)
        assert _rel(out[f"prediction_{tag}_ntk"], expected) < 1e-9
        assert out[f"kr_rank_{tag}"] == p * c
    assert out["kr_ridge"] == 1e-3


def test_prediction_agreement_matches_corrcoef():
    rng = np.random.default_rng(6)
    net = rng.standard_normal((9, 2))
    ker = net + 0.3 * rng.standard_normal((9, 2))
    corr, relerr = prediction_agreement(net, ker)
    assert corr == pytest.approx(np.corrcoef(net.ravel(), ker.ravel())[0, 1], rel=1e-12)
    assert relerr == pytest.approx(np.linalg.norm(ker - net) / np.linalg.norm(net), rel=1e-12)
    assert prediction_agreement(net, net) == pytest.approx((1.0, 0.0))
    c_const, _ = prediction_agreement(net, np.ones_like(net))
    assert np.isnan(c_const)
    with pytest.raises(ValueError):
        prediction_agreement(net, ker[:, :1])


def test_rejects_bad_inputs():
    k = np.eye(4)
    with pytest.raises(ValueError):
        kernel_regression(k, np.ones((2, 4)), np.ones((3, 1)))
    with pytest.raises(ValueError):
        kernel_regression(k, np.ones((2, 4)), np.ones((4, 1)), ridge=-1.0)
    with pytest.raises(ValueError):
        kernel_regression(k, np.ones((3, 4)), np.ones((2, 2)))     # 3 rows not divisible by C=2
    with pytest.raises(ValueError):
        kernel_regression(np.full((4, 4), np.nan), np.ones((2, 4)), np.ones((4, 1)))
