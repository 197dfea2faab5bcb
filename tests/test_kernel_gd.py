"""Frozen-kernel gradient descent against an explicit loop and a linearized network trained by ntkpipe."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.lang.schema import TrainSpec
from ntkpipe.models import MLP, Linearized
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.theory.kernel_gd import kernel_gd
from ntkpipe.train import train


def _psd_with_zero_mode(rng, n):
    """A PSD kernel with eigenvalues spanning 0, 1e-9 and up to 3 (exercises λ → 0 and rλ > 1)."""
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.concatenate([[0.0, 1e-9], np.linspace(0.05, 3.0, n - 2)])
    return (v * lam) @ v.T


def _loop(k, k_te, delta0, f0_test, rate, steps):
    delta, f_test, out_d, out_f = delta0.copy(), f0_test.copy(), [], []
    for k_step in range(max(steps) + 1):
        if k_step in steps:
            out_d.append(delta.copy())
            out_f.append(f_test.copy())
        f_test = f_test - rate * k_te @ delta
        delta = delta - rate * k @ delta
    return np.array(out_d), np.array(out_f)


def test_kernel_gd_matches_explicit_loop():
    rng = np.random.default_rng(0)
    n, m = 12, 5
    k = _psd_with_zero_mode(rng, n)
    k_te = rng.standard_normal((m, n))
    delta0, f0_test = rng.standard_normal(n), rng.standard_normal(m)
    rate = 0.6  # r λ_max = 1.8: the top mode oscillates, (1 − rλ) < 0
    steps = [0, 1, 2, 7, 50, 300, 3000]
    delta, f_test = kernel_gd(k, k_te, delta0, f0_test, rate, steps)
    ref_d, ref_f = _loop(k, k_te, delta0, f0_test, rate, steps)
    assert delta.shape == (7, n) and f_test.shape == (7, m)
    np.testing.assert_allclose(delta, ref_d, rtol=0, atol=1e-10 * np.abs(delta0).max())
    np.testing.assert_allclose(f_test, ref_f, rtol=0, atol=1e-10 * np.abs(ref_f).max())


def test_kernel_gd_many_steps_and_no_test_points():
    """10⁵ steps: the λ = 1e-9 mode has moved by k r λ = 6e-5 of itself, the λ = 0 mode not at all,
    and the test outputs keep growing linearly (k r) along the zero mode."""
    rng = np.random.default_rng(1)
    n = 8
    k = _psd_with_zero_mode(rng, n)
    k_te = rng.standard_normal((3, n))
    delta0 = rng.standard_normal(n)
    steps = [0, 99_999, 100_000]
    delta, f_test = kernel_gd(k, np.zeros((0, n)), delta0, np.zeros(0), 0.6, steps)
    assert f_test.shape == (3, 0)
    ref_d, ref_f = _loop(k, k_te, delta0, np.zeros(3), 0.6, steps)
    np.testing.assert_allclose(delta, ref_d, rtol=0, atol=1e-10 * np.abs(delta0).max())
    _, f_test = kernel_gd(k, k_te, delta0, np.zeros(3), 0.6, steps)
    np.testing.assert_allclose(f_test, ref_f, rtol=0, atol=1e-10 * np.abs(ref_f).max())


def test_linearized_network_trained_by_gd_is_kgd():
    """ntkpipe's trainer on Linearized(net) (float64, full-batch GD, loss (1/2P)Σ|f − y|²) follows
    KGD with the initial NTK and rate η/P, on train and test points, two outputs."""
    rng = np.random.default_rng(3)
    p, m, c = 8, 4, 2
    x = rng.standard_normal((p + m, 3))
    y = rng.standard_normal((p, c))
    net = MLP(3, 16, 2, c, activation="tanh", dtype=jnp.float64, key=jax.random.key(0))
    gram = np.asarray(flatten_gram(empirical_ntk(net, x)))
    k_train, k_test_train = gram[: p * c, : p * c], gram[p * c:, : p * c]
    lr = p / np.linalg.eigvalsh(k_train)[-1]  # r λ_max = 1
    spec = TrainSpec.model_validate({"optimizer": {"name": "gd", "lr": lr}, "steps": 200, "dtype": "float64",
                                     "checkpoints": {"spacing": "linear", "count": 4}})

    def outputs(model, index, last):
        f = np.asarray(jax.vmap(model)(jnp.asarray(x)))
        return {"f_train": f[:p].reshape(-1), "f_test": f[p:].reshape(-1)}

    traj = train(Linearized(net), x[:p], y, spec, key=jax.random.key(1), measure=outputs)
    f0 = np.asarray(jax.vmap(net)(jnp.asarray(x)))
    delta, f_test = kernel_gd(k_train, k_test_train, f0[:p].reshape(-1) - y.reshape(-1),
                              f0[p:].reshape(-1), lr / p, traj.steps)
    np.testing.assert_allclose(traj.series["f_train"], delta + y.reshape(-1), rtol=0, atol=1e-8)
    np.testing.assert_allclose(traj.series["f_test"], f_test, rtol=0, atol=1e-8)
    assert np.linalg.norm(delta[-1]) < 0.5 * np.linalg.norm(delta[0])  # it did train
