"""Measurements against definitions and independent computations."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.measure.crossing import first_crossing, half_loss_time
from ntkpipe.measure.fits import log_law, power_law
from ntkpipe.measure.layers import first_layer_alignment
from ntkpipe.models import MLP
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.ntk.kernel_stats import kernel_alignment, kernel_norm

RNG = np.random.default_rng(0)


def test_alignment_is_one_for_the_target_kernel_and_scale_free():
    y = RNG.standard_normal((7, 2))
    v = y.reshape(-1)
    assert kernel_alignment(np.outer(v, v), y) == pytest.approx(1.0)
    a = RNG.standard_normal((14, 14))
    k = a @ a.T
    assert kernel_alignment(3.0 * k, y) == pytest.approx(kernel_alignment(k, y))
    assert kernel_alignment(k, y) == pytest.approx(v @ k @ v / (np.sqrt(np.sum(k * k)) * v @ v))
    assert kernel_norm(k) == pytest.approx(np.sqrt(np.trace(k @ k)))


def test_first_layer_alignment_of_a_rank_one_layer():
    beta = RNG.standard_normal(5)
    beta /= np.linalg.norm(beta)
    model = MLP(5, 4, 2, 1, activation="linear", key=jax.random.PRNGKey(0))
    aligned = eqx.tree_at(lambda m: m.weights[0], model, jnp.asarray(np.outer(RNG.standard_normal(4), beta)))
    assert first_layer_alignment(aligned.weights[0], beta) == pytest.approx(1.0)
    assert 0.0 < first_layer_alignment(model.weights[0], beta) < 0.6


def test_crossings_interpolate():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    assert half_loss_time(t, np.array([4.0, 3.0, 1.0, 0.5])) == pytest.approx(1.5)
    assert first_crossing(t, np.array([0.0, 0.2, 0.6, 0.9]), 0.5, downward=False) == pytest.approx(1.75)
    assert np.isnan(first_crossing(t, np.zeros(4), 0.5, downward=False))


def test_top_eigenpairs_match_numpy():
    a = RNG.standard_normal((30, 30))
    k = a @ a.T
    values, vectors = top_eigenpairs(k, 5)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(k)[::-1][:5], rtol=1e-12)
    np.testing.assert_allclose(k @ vectors, vectors * values, atol=1e-9)
    assert np.all(vectors[np.abs(vectors).argmax(0), range(5)] > 0)  # sign convention


def test_fits_recover_exponent_and_slope():
    x = np.geomspace(0.01, 1, 8)
    assert power_law(x, 3 * x**-2.0)[0] == pytest.approx(-2.0)
    assert log_law(x, 1 - 0.5 * np.log(x))[0] == pytest.approx(-0.5)
    assert np.isnan(power_law(x[:2], x[:2])[0])


def test_accuracy_of_one_logit_counts_zero_as_the_positive_class():
    from ntkpipe.measure.accuracy import accuracy

    targets = np.array([[1.0], [-1.0], [1.0], [1.0]])
    assert accuracy(np.array([[0.3], [-2.0], [-0.1], [5.0]]), targets) == pytest.approx(0.75)
    assert accuracy(np.zeros((4, 1)), targets) == pytest.approx(0.75)  # f ≡ 0 scores the share of +1 labels
    assert accuracy(np.eye(3)[[0, 2, 1]], np.eye(3)[[0, 2, 2]]) == pytest.approx(2 / 3)
