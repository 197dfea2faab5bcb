"""Mixed derivative ∇²_{x,θ} f and its NADs against brute-force Jacobians (float64), the NAD data
source's statistics, and Theorem 1 (Stein's lemma) by Monte Carlo."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from ntkpipe.data import nad_samples
from ntkpipe.models import MLP, trainable
from ntkpipe.ntk import mixed_gram, neural_anisotropy_directions, stein_check
from ntkpipe.ntk.mixed import gaussian_points
from ntkpipe.ntk.precision import to_float64

RTOL = 1e-10
STEIN_BOUND = 0.05  # ntkpipe.ntk.mixed.stein_check: below 5% at the default sample count


class TinyConvNet(eqx.Module):
    """(4, 4, 1) image → 3×3 SAME convolution (3 channels) → GeLU → dense → (2,) outputs."""

    kernel: jax.Array
    bias: jax.Array
    readout: jax.Array

    def __init__(self, *, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.kernel = jax.random.normal(k1, (3, 3, 1, 3), jnp.float64) / 3.0
        self.bias = 0.1 * jax.random.normal(k2, (3,), jnp.float64)
        self.readout = jax.random.normal(k3, (2, 48), jnp.float64) / np.sqrt(48)

    def __call__(self, x):
        h = jax.lax.conv_general_dilated(
            x[None], self.kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return self.readout @ jax.nn.gelu(h[0] + self.bias, approximate=False).reshape(-1)


def gelu_mlp(seed=0):
    model = MLP(5, 7, 3, activation="gelu", bias=True, key=jax.random.key(seed))
    biases = tuple(jnp.full_like(b, 0.2) for b in model.biases)  # nonzero, so M(0) has bias terms
    return to_float64(eqx.tree_at(lambda m: m.biases, model, biases))


CASES = [(gelu_mlp, (5,), 0), (lambda: TinyConvNet(key=jax.random.key(1)), (4, 4, 1), 1)]


@eqx.filter_jit
def brute_force_mixed(model, points, output):
    """Mean over ``points`` of the full (P, d) Jacobian of ∇_θ f_output w.r.t. the flattened input."""
    arrays, rest = trainable(model)
    theta, unravel = ravel_pytree(arrays)

    def f(parameters, x):
        return eqx.combine(unravel(parameters), rest)(x.reshape(points.shape[1:]))[output]

    mixed = jax.jacfwd(jax.grad(f), argnums=1)
    return jnp.mean(jax.vmap(lambda x: mixed(theta, x.reshape(-1)))(points), axis=0)


def assert_close(actual, expected, rtol=RTOL):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize("build, shape, output", CASES)
def test_mixed_gram_and_nads_at_the_origin_match_brute_force(build, shape, output):
    model = build()
    m = brute_force_mixed(model, jnp.zeros((1, *shape)), output)
    d = int(np.prod(shape))
    assert m.shape[1] == d
    gram = mixed_gram(model, shape, output=output, block_size=3)  # 3 ∤ d: the last block is padded
    assert gram.dtype == jnp.float64
    assert_close(gram, m.T @ m)

    sigma_sq, directions = neural_anisotropy_directions(model, shape, output=output, top_k=4, block_size=3)
    _, singular_values, right = np.linalg.svd(np.asarray(m))
    assert directions.shape == (4, *shape)
    assert_close(sigma_sq, singular_values[:4] ** 2)
    flat = directions.reshape(4, d)
    assert_close(flat @ flat.T, np.eye(4))
    signs = np.sign(np.sum(flat * right[:4], axis=1))
    assert_close(flat, signs[:, None] * right[:4])
    assert np.all(flat[np.arange(4), np.argmax(np.abs(flat), axis=1)] > 0)


@pytest.mark.parametrize("build, shape, output", CASES)
def test_gaussian_mixed_gram_is_the_gram_of_the_mean_over_the_same_draws(build, shape, output):
    model, key = build(), jax.random.key(3)
    m = brute_force_mixed(model, gaussian_points(key, 7, shape), output)
    # 7 draws in blocks of 3 (the last padded with weight 0), 5 basis vectors per pass
    gram = mixed_gram(model, shape, at="gaussian", samples=7, key=key, output=output, block_size=5, sample_block=3)
    assert_close(gram, m.T @ m)


def test_gaussian_estimates_need_draws():
    with pytest.raises(ValueError, match="samples >= 1 and a key"):
        mixed_gram(gelu_mlp(), (5,), at="gaussian", samples=10)
    with pytest.raises(ValueError, match="'origin' or 'gaussian'"):
        mixed_gram(gelu_mlp(), (5,), at="data")
    with pytest.raises(ValueError, match="samples >= 2"):
        stein_check(gelu_mlp(), (5,), np.eye(5)[:1], samples=1, key=jax.random.key(0))


@pytest.mark.parametrize("half_margin, margin", [(True, 0.75), (False, 1.5)])
def test_nad_samples_statistics(half_margin, margin):
    direction = np.random.default_rng(0).standard_normal((3, 4, 2))  # image-shaped, not unit norm
    u = direction.reshape(-1) / np.linalg.norm(direction)
    d, n, sigma = u.size, 20_000, 0.8
    x, y = nad_samples(direction, n, np.random.default_rng(1), epsilon=1.5, sigma=sigma, half_margin=half_margin)
    assert x.shape == (n, 3, 4, 2) and x.dtype == np.float64 and y.shape == (n,)
    assert set(np.unique(y)) == {-1.0, 1.0} and np.sum(y == 1) == n // 2
    assert 0.4 < np.mean(y[: n // 2] == 1) < 0.6  # shuffled
    flat = x.reshape(n, d)
    np.testing.assert_allclose(y * (flat @ u), margin, rtol=1e-12)
    noise = flat - margin * y[:, None] * u
    assert np.abs(noise @ u).max() < 1e-12
    # per-coordinate variance of w ~ N(0, σ²(I − uuᵀ)) averages σ²(d − 1)/d; relative MC error ~ (2/(n d))^½
    assert np.mean(noise**2) == pytest.approx(sigma**2 * (d - 1) / d, rel=0.02)
    np.testing.assert_allclose(np.mean(noise, axis=0), 0.0, atol=5 * sigma / np.sqrt(n))


def test_nad_samples_odd_count_and_zero_direction():
    _, y = nad_samples(np.ones(3), 7, np.random.default_rng(0))
    assert np.sum(y == 1) in (3, 4) and np.sum(y == -1) in (3, 4)
    with pytest.raises(ValueError, match="nonzero"):
        nad_samples(np.zeros(3), 4, np.random.default_rng(0))


def test_stein_check_on_top_nads_and_a_random_direction():
    model = gelu_mlp()
    _, nads = neural_anisotropy_directions(model, (5,), top_k=2, block_size=3)
    random = np.random.default_rng(0).standard_normal(5)
    directions = np.vstack([nads, random / np.linalg.norm(random)])
    result = stein_check(model, (5,), directions, key=jax.random.key(1))
    assert set(result) == {"alpha_monte_carlo", "alpha_stein", "relative_error"}
    assert result["relative_error"].shape == (3,)
    assert np.all(result["relative_error"] < STEIN_BOUND), result
