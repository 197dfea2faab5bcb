"""Empirical NTK (both implementations), its per-layer split, and Jacobian alignment, against
brute-force Jacobians and closed forms, in float64."""

import functools
import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from ntkpipe.models import MLP, Linearized, layer_components, trainable
from ntkpipe.ntk import (
    NtkImplementation,
    empirical_ntk,
    flatten_gram,
    jacobian_alignment,
    jacobian_alignments,
)

RTOL = 1e-10
IMPLEMENTATIONS = [NtkImplementation.JACOBIAN, NtkImplementation.MLP_LAYERS]


def _float64(tree):
    return jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, tree)


def _everything(path):
    return True


def in_layer(layer, path):
    return path.startswith(f".layers[{layer}]")


@eqx.filter_jit
def brute_force_ntk(model, x1, x2, selected=_everything):
    """J₁J₂ᵀ over the trainable leaves whose pytree path satisfies ``selected``, via one flat vector."""
    arrays, rest = trainable(_float64(model))
    spec = jax.tree_util.tree_map_with_path(lambda path, _: selected(jax.tree_util.keystr(path)), arrays)
    chosen, others = eqx.partition(arrays, spec)
    flat, unravel = ravel_pytree(chosen)

    def output(theta, x):
        return eqx.combine(unravel(theta), others, rest)(x)

    jacobians = jax.vmap(jax.jacrev(output), in_axes=(None, 0))
    return jnp.einsum("acp,bdp->abcd", jacobians(flat, x1), jacobians(flat, x2))


def assert_close(actual, expected, rtol=RTOL):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    scale = np.abs(expected).max()
    assert scale > 0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale)


def inputs(n, d, seed):
    return jax.random.normal(jax.random.key(seed), (n, d), jnp.float64)


ACTIVATION_NAMES = ["linear", "relu", "tanh", "gelu"]
# Every (parameterization, bias, outputs) triple once; every depth and every activation twice.
ARCHITECTURES = [
    (1 + i % 4, ACTIVATION_NAMES[(i + i // 4) % 4], *variant)
    for i, variant in enumerate(itertools.product(["standard", "ntk"], [False, True], [1, 3]))
]


@pytest.mark.parametrize("depth, activation, parameterization, bias, num_outputs", ARCHITECTURES)
def test_mlp_ntk_matches_brute_force(depth, activation, parameterization, bias, num_outputs):
    model = MLP(
        4,
        6,
        depth,
        num_outputs,
        activation=activation,
        parameterization=parameterization,
        sigma=1.3,
        output_scale=0.7,
        bias=bias,
        key=jax.random.key(depth),
    )
    if bias:  # nonzero biases, so the bias terms are exercised away from init
        biases = tuple(jnp.full_like(b, 0.3) for b in model.biases)
        model = eqx.tree_at(lambda m: m.biases, model, biases)
    x1, x2 = inputs(5, 4, 0), inputs(3, 4, 1)
    expected = brute_force_ntk(model, x1, x2)
    components = {}
    for implementation in IMPLEMENTATIONS:
        kernel = empirical_ntk(model, x1, x2, implementation=implementation)
        assert kernel.dtype == jnp.float64
        assert kernel.shape == (5, 3, num_outputs, num_outputs)
        assert_close(kernel, expected)
        per_layer = empirical_ntk(model, x1, x2, per_layer=True, implementation=implementation)
        components[implementation] = per_layer
        assert per_layer.shape == (depth, 5, 3, num_outputs, num_outputs)
        assert_close(per_layer.sum(0), expected)
    assert_close(components[NtkImplementation.JACOBIAN], components[NtkImplementation.MLP_LAYERS])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_two_layer_linear_network_closed_form(implementation):
    # f(x) = aᵀWx (standard param.): Θ(x, x') = xᵀ[WᵀW + |a|²I]x'  (silent-alignment Eq. 5)
    model = MLP(3, 7, 2, 1, activation="linear", key=jax.random.key(0), dtype=jnp.float64)
    w, a = model.weights[0], model.weights[1][0]
    x1, x2 = inputs(4, 3, 0), inputs(5, 3, 1)
    readout_expected = x1 @ w.T @ w @ x2.T
    hidden_expected = (a @ a) * (x1 @ x2.T)
    kernel = empirical_ntk(model, x1, x2, implementation=implementation)[..., 0, 0]
    assert_close(kernel, x1 @ (w.T @ w + (a @ a) * jnp.eye(3)) @ x2.T)
    hidden, readout = empirical_ntk(model, x1, x2, per_layer=True, implementation=implementation)[..., 0, 0]
    assert_close(readout, readout_expected)
    assert_close(hidden, hidden_expected)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_linearized_ntk_is_the_constant_origin_ntk(implementation):
    model = MLP(3, 8, 3, 2, activation="tanh", bias=True, key=jax.random.key(0))
    x = inputs(6, 3, 0)
    origin_kernel = empirical_ntk(model, x)
    linearized = Linearized(model)
    assert_close(empirical_ntk(linearized, x, implementation=implementation), origin_kernel)

    def perturb(m):
        leaves, treedef = jax.tree.flatten(m)
        keys = jax.random.split(jax.random.key(1), len(leaves))
        moved = [v + 0.5 * jax.random.normal(k, v.shape, v.dtype) for v, k in zip(leaves, keys)]
        return jax.tree.unflatten(treedef, moved)

    moved = eqx.tree_at(lambda m: m.params, linearized, replace_fn=perturb)
    assert_close(empirical_ntk(moved, x, implementation=implementation), origin_kernel)
    # the network itself at the perturbed parameters has a different kernel
    assert np.abs(empirical_ntk(moved.params, x) - origin_kernel).max() > 1e-3 * np.abs(origin_kernel).max()
    assert_close(
        empirical_ntk(moved, x, per_layer=True, implementation=implementation),
        empirical_ntk(model, x, per_layer=True),
    )


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_blocking_does_not_change_the_kernel(implementation):
    # 7 rows in blocks of 3: starts 0, 3, 4 (the last overlaps); x2=None mirrors off-diagonal blocks
    model = MLP(3, 5, 2, 2, activation="relu", bias=True, key=jax.random.key(0))
    x1, x2 = inputs(7, 3, 0), inputs(5, 3, 1)
    for second, expected in ((x2, brute_force_ntk(model, x1, x2)), (None, brute_force_ntk(model, x1, x1))):
        options = dict(per_layer=True, implementation=implementation)
        blocked = empirical_ntk(model, x1, second, block_size=3, **options)
        assert_close(blocked.sum(0), expected)
        assert_close(blocked, empirical_ntk(model, x1, second, **options))


def test_generic_model_uses_jacobian_path_and_layer_index_grouping():
    model = eqx.nn.MLP(3, 2, 5, 2, activation=jnp.tanh, key=jax.random.key(0), dtype=jnp.float64)
    x1, x2 = inputs(4, 3, 0), inputs(3, 3, 1)
    assert_close(empirical_ntk(model, x1, x2), brute_force_ntk(model, x1, x2))
    components = empirical_ntk(model, x1, x2, per_layer=True)
    assert components.shape == (3, 4, 3, 2, 2)
    for layer in range(3):
        assert_close(components[layer], brute_force_ntk(model, x1, x2, functools.partial(in_layer, layer)))
    with pytest.raises(TypeError, match="JACOBIAN"):
        empirical_ntk(model, x1, implementation=NtkImplementation.MLP_LAYERS)


def test_layer_components_rule():
    mlp = MLP(3, 4, 3, 1, bias=True, key=jax.random.key(0))
    assert layer_components(trainable(mlp)[0]) == ((0, 1, 2, 0, 1, 2), 3)
    assert layer_components(trainable(Linearized(mlp))[0]) == ((0, 1, 2, 0, 1, 2), 3)
    tree = {"layers": [jnp.ones(2), jnp.ones(2)], "readout": jnp.ones(2), "scale": jnp.ones(())}
    assert layer_components(tree) == ((0, 1, 2, 3), 4)


def test_implementation_accepts_value_strings():
    model = MLP(3, 4, 2, 1, key=jax.random.key(0))
    x = inputs(3, 3, 0)
    generic = empirical_ntk(model, x, implementation="jacobian")
    assert_close(generic, empirical_ntk(model, x, implementation="mlp_layers"))


def test_flatten_gram_orders_example_then_output():
    kernel = jax.random.normal(jax.random.key(0), (2, 3, 4, 5, 5))
    flat = np.asarray(flatten_gram(kernel))
    assert flat.shape == (2, 15, 20)
    kernel = np.asarray(kernel)
    for i, j, c, d in itertools.product(range(3), range(4), range(5), range(5)):
        assert flat[1, i * 5 + c, j * 5 + d] == kernel[1, i, j, c, d]


def test_alignment_of_gram_eigenvectors_is_their_eigenvalue():
    # α(φ_j) = λ_j for unit eigenvectors of Θ (linearized-networks Lemma 1), C = 1
    model = MLP(3, 16, 3, 1, activation="gelu", bias=True, key=jax.random.key(0))
    x = inputs(7, 3, 0)
    eigenvalues, eigenvectors = np.linalg.eigh(np.asarray(flatten_gram(empirical_ntk(model, x)), np.float64))
    tolerance = RTOL * eigenvalues.max()
    batched = jacobian_alignments(model, x, eigenvectors.T, block_size=3)
    assert batched.dtype == jnp.float64 and batched.shape == (7,)
    np.testing.assert_allclose(batched, eigenvalues, rtol=0, atol=tolerance)
    for j in (0, 6):
        vector, value = eigenvectors[:, j], eigenvalues[j]
        np.testing.assert_allclose(jacobian_alignment(model, x, vector), value, rtol=0, atol=tolerance)
        as_column = jacobian_alignment(model, x, vector[:, None], block_size=4)
        np.testing.assert_allclose(as_column, value, rtol=0, atol=tolerance)


def test_alignment_is_the_gram_quadratic_form_for_several_outputs():
    model = MLP(3, 10, 2, 2, activation="relu", parameterization="ntk", bias=True, key=jax.random.key(1))
    x = inputs(7, 3, 0)
    vs = jax.random.normal(jax.random.key(2), (3, 7, 2), jnp.float64)
    gram = flatten_gram(empirical_ntk(model, x))
    expected = jnp.stack([v.reshape(-1) @ gram @ v.reshape(-1) for v in vs])
    assert_close(jacobian_alignments(model, x, vs, block_size=4), expected)
    assert_close(jacobian_alignment(model, x, vs[0]), expected[0])
    with pytest.raises(ValueError, match="cotangents"):
        jacobian_alignment(model, x, vs[0, :, 0])
