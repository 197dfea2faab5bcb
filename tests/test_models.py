"""Model definitions: parameterizations, linearization, end-to-end maps."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.lang.schema import MlpSpec
from ntkpipe.models import MLP, Linearized, build_model

X = jnp.asarray(np.random.default_rng(0).standard_normal((6, 5)))


@pytest.mark.parametrize("activation", ["linear", "relu", "tanh", "gelu"])
def test_standard_and_ntk_parameterization_agree_at_init(activation):
    kw = dict(activation=activation, sigma=1.3, bias=True, dtype=jnp.float64, key=jax.random.PRNGKey(0))
    std, ntk = MLP(5, 7, 3, 2, parameterization="standard", **kw), MLP(5, 7, 3, 2, parameterization="ntk", **kw)
    np.testing.assert_allclose(jax.vmap(std)(X), jax.vmap(ntk)(X), rtol=1e-12)
    assert [float(c) for c in ntk.multipliers] == pytest.approx((1.3 / np.sqrt(5), 1.3 / np.sqrt(7), 1.3 / np.sqrt(7)))


def test_standard_init_variance():
    model = MLP(400, 300, 2, 1, sigma=0.5, key=jax.random.PRNGKey(1))
    assert float(jnp.var(model.weights[0])) == pytest.approx(0.25 / 400, rel=0.02)


def test_end_to_end_matrix_of_a_linear_net():
    model = MLP(5, 7, 4, 3, activation="linear", output_scale=2.0, dtype=jnp.float64, key=jax.random.PRNGKey(2))
    np.testing.assert_allclose(jax.vmap(model)(X), X @ model.end_to_end_matrix().T, rtol=1e-12)


def test_linearization_is_affine_in_the_parameters():
    base = MLP(5, 7, 3, 1, activation="relu", bias=True, dtype=jnp.float64, key=jax.random.PRNGKey(3))
    lin = Linearized(base)
    np.testing.assert_allclose(jax.vmap(lin)(X), jax.vmap(base)(X))

    def shift(scale):
        params = jax.tree.map(lambda p: p + scale * 0.1, base)
        return jax.vmap(eqx.tree_at(lambda m: m.params, lin, params))(X) - jax.vmap(lin)(X)

    np.testing.assert_allclose(shift(2.0), 2.0 * shift(1.0), rtol=1e-10)
    assert not np.allclose(shift(1.0) + jax.vmap(base)(X),
                           jax.vmap(jax.tree.map(lambda p: p + 0.1, base))(X))  # the network is not affine


def test_build_model_is_deterministic_in_the_seed():
    spec = MlpSpec(depth=2, width=4, sigma=1.0)
    a, b, c = build_model(spec, (3,), 1, 0), build_model(spec, (3,), 1, 0), build_model(spec, (3,), 1, 1)
    np.testing.assert_array_equal(a.weights[0], b.weights[0])
    assert not np.allclose(a.weights[0], c.weights[0])
    assert isinstance(build_model(spec.model_copy(update={"kind": "linearized"}), (3,), 1, 0), Linearized)


@pytest.mark.parametrize("tree", [
    {"w": jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3), "b": jnp.ones(4, jnp.float32)},
    {"w": jnp.arange(6.0).reshape(3, 2), "b": (jnp.ones(2), jnp.zeros((1, 1)))},
    {"empty": []},
])
def test_flat_vector_is_ravel_pytree_on_the_host(tree):
    """The host-side flattening equals ``jax.flatten_util.ravel_pytree`` in order, dtype and values, and
    its inverse gives back every leaf in its shape and dtype."""
    from jax.flatten_util import ravel_pytree

    from ntkpipe.models.flat import flat_vector, from_flat_vector

    expected, unravel = ravel_pytree(tree)
    flat = flat_vector(tree)
    assert isinstance(flat, np.ndarray) and flat.dtype == expected.dtype
    np.testing.assert_array_equal(flat, expected)
    for got, want in zip(jax.tree.leaves(from_flat_vector(tree, flat)), jax.tree.leaves(unravel(expected))):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_flat_vector_of_a_network_with_batch_statistics():
    """A ResNet's stored arrays (weights and BatchNorm running statistics) round-trip bit for bit."""
    from jax.flatten_util import ravel_pytree

    from ntkpipe.lang.schema import MODEL_SPEC
    from ntkpipe.models import stored
    from ntkpipe.models.flat import flat_vector, from_flat_vector

    spec = MODEL_SPEC.validate_python({"architecture": "resnet", "width_multiplier": 1 / 32, "blocks": [1, 1],
                                       "norm": "batch"})
    arrays, _ = stored(build_model(spec, (8, 8, 3), 2, seed=0))
    flat = flat_vector(arrays)
    np.testing.assert_array_equal(flat, ravel_pytree(arrays)[0])
    np.testing.assert_array_equal(flat_vector(from_flat_vector(arrays, flat + 1)), flat + 1)
