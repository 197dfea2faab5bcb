"""CNN model (shapes, parameterizations, LeNet-5 size), its NTK by both generic implementations against
brute-force Jacobians, its linearization, and the AUTO cost rule."""

import functools
import math
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from ntkpipe.models import CNN, LENET5, MLP, ConvLayer, Linearized, trainable
from ntkpipe.models.cnn import SMALL_IMAGE_PIXELS, Conv, _pool
from ntkpipe.ntk import NtkImplementation, choose_implementation, empirical_ntk
from ntkpipe.ntk.cost import forward_flops, generic_costs, parameter_count
from ntkpipe.ntk.precision import to_float64
from tests.test_ntk import assert_close

GENERIC = [NtkImplementation.JACOBIAN, NtkImplementation.NTK_VECTOR_PRODUCTS]
# 6×6×2 → conv 3@3×3 SAME, max-pool 2 → 3×3×3 → conv 4@2×2 VALID, avg-pool 2 → 1×1×4 → dense 5 → 2
TINY_CONV = (ConvLayer(3, 3, pool="max"), ConvLayer(4, 2, padding="VALID", pool="avg"))


def images(n, shape, seed):
    return jax.random.normal(jax.random.key(seed), (n, *shape), jnp.float64)


def tiny_cnn(parameterization):
    model = CNN(
        (6, 6, 2),
        TINY_CONV,
        [5],
        2,
        activation="tanh",
        parameterization=parameterization,
        sigma=1.3,
        output_scale=0.7,
        bias=True,
        dtype=jnp.float64,
        key=jax.random.key(0),
    )
    # nonzero biases, so the bias terms are exercised away from init
    return eqx.tree_at(lambda m: [layer.bias for layer in m.layers], model, replace_fn=lambda b: b + 0.3)


@pytest.mark.parametrize(
    "conv, dense, out_shape",
    [
        (TINY_CONV, [5], (2,)),
        ((ConvLayer(4, 3, stride=2, padding="VALID"),), [], (2,)),  # 6×6 → 2×2×4 → readout
        ((ConvLayer(3, 3, pool="max", pool_size=4),), [7, 3], (2,)),  # 6×6 → 1×1×3 (ragged edge dropped)
        ((), [4], (2,)),  # no conv layer: a dense network on the flattened image
    ],
)
def test_cnn_output_shapes(conv, dense, out_shape):
    def outputs(x):  # shapes only: built and run abstractly
        model = CNN((6, 6, 2), conv, dense, 2, bias=True, key=jax.random.key(0))
        assert len(model.layers) == len(conv) + len(dense) + 1
        return jax.vmap(model)(x)

    x = jax.ShapeDtypeStruct((3, 6, 6, 2), jnp.float32)
    assert jax.eval_shape(outputs, x) == jax.ShapeDtypeStruct((3, *out_shape), jnp.float32)


# 7×8 input: k = 4, stride 3 SAME pads rows (1, 2) and columns (1, 1); k = 3, stride 2 VALID drops column 7
# (9×8: SAME pads rows (0, 1))
@pytest.mark.parametrize("kernel_size, stride, padding", [(4, 3, "SAME"), (3, 2, "VALID")])
@pytest.mark.parametrize("rows", [7, 9], ids=["im2col", "lax"])  # 56 and 72 positions: SMALL_IMAGE_PIXELS
def test_conv_and_its_custom_derivative_match_lax(kernel_size, stride, padding, rows):
    # The brute-force NTKs below differentiate through the same custom JVP, so check it against
    # JAX's own derivative of lax.conv_general_dilated, in both modes and both arguments.
    assert (rows * 8 <= SMALL_IMAGE_PIXELS) == (rows == 7)
    h = images(1, (rows, 8, 3), 0)[0]
    w = images(1, (kernel_size, kernel_size, 3, 4), 1)[0]

    def reference(h, w):
        return jax.lax.conv_general_dilated(
            h[None], w, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
        )[0]

    layer = Conv(w, None, 1.0, ConvLayer(4, kernel_size, stride, padding))

    def custom(h, w):
        return eqx.tree_at(lambda m: m.weight, layer, w)(h)

    @functools.partial(jax.jit, static_argnums=0)
    def values_and_jacobians(f):
        return f(h, w), jax.jacrev(f, (0, 1))(h, w), jax.jacfwd(f, (0, 1))(h, w)

    actual, expected = values_and_jacobians(custom), values_and_jacobians(reference)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, e, rtol=0, atol=1e-12)


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pooling_is_the_windowed_reduction(pool):
    # 7×5 input, 2×2 windows: the ragged last row and column are dropped, as lax.reduce_window's VALID
    h = images(1, (7, 5, 3), 2)[0]
    reduce, start = (jax.lax.max, -jnp.inf) if pool == "max" else (jax.lax.add, 0.0)
    expected = jax.lax.reduce_window(h, start, reduce, (2, 2, 1), (2, 2, 1), "VALID") / (1 if pool == "max" else 4)
    pooled = _pool(h, ConvLayer(3, 3, pool=pool))
    assert pooled.shape == (3, 2, 3)
    np.testing.assert_allclose(pooled, expected, rtol=1e-15, atol=0)


def test_cnn_rejects_bad_layers():
    with pytest.raises(ValueError, match="padding"):
        ConvLayer(3, 3, padding="same")
    with pytest.raises(ValueError, match="pool"):
        ConvLayer(3, 3, pool="sum")
    with pytest.raises(ValueError, match="too small"):
        CNN((4, 4, 1), [ConvLayer(3, 5, padding="VALID")], [], key=jax.random.key(0))


def test_standard_and_ntk_parameterization_agree_at_init():
    options = dict(sigma=1.3, bias=True, dtype=jnp.float64, key=jax.random.key(0))
    standard = CNN((6, 6, 2), TINY_CONV, [5], 2, parameterization="standard", **options)
    ntk = CNN((6, 6, 2), TINY_CONV, [5], 2, parameterization="ntk", **options)
    x = images(4, (6, 6, 2), 1)
    outputs = eqx.filter_jit(lambda model: jax.vmap(model)(x))
    np.testing.assert_allclose(outputs(standard), outputs(ntk), rtol=1e-12)
    fan_ins = (3 * 3 * 2, 2 * 2 * 3, 4, 5)  # k·k·C_in for a conv layer
    assert [layer.multiplier for layer in ntk.layers] == pytest.approx([1.3 / math.sqrt(n) for n in fan_ins])
    assert [layer.multiplier for layer in standard.layers] == [1.0] * 4


def test_standard_init_variance():
    model = CNN((4, 4, 50), [ConvLayer(64, 3)], [], sigma=0.5, key=jax.random.key(1))
    assert float(jnp.var(model.layers[0].weight)) == pytest.approx(0.25 / (3 * 3 * 50), rel=0.03)


@pytest.mark.parametrize(
    "input_shape, flat",  # flat = 16 channels × the spatial size after two SAME convs and 2×2 pools
    [((8, 8, 1), 2 * 2 * 16), ((32, 32, 3), 8 * 8 * 16)],
)
def test_lenet5_parameter_count(input_shape, flat):
    conv, dense = LENET5
    model = jax.eval_shape(lambda: CNN(input_shape, conv, dense, bias=True, key=jax.random.key(0)))
    channels = input_shape[-1]
    expected = (
        (5 * 5 * channels * 6 + 6)  # conv 6@5×5
        + (5 * 5 * 6 * 16 + 16)  # conv 16@5×5
        + (flat * 120 + 120)  # dense 120
        + (120 * 84 + 84)  # dense 84
        + (84 * 1 + 1)  # readout
    )
    assert sum(leaf.size for leaf in jax.tree.leaves(model)) == expected
    assert expected == {(8, 8, 1): 20_621, (32, 32, 3): 136_121}[input_shape]


@eqx.filter_jit
def brute_force_components(model, x1, x2):
    """Brute force, per layer: J₁J₂ᵀ from the Jacobian of the flat parameter vector (as ``brute_force_ntk``
    of tests/test_ntk.py), its columns split by the ``layers[ℓ]`` in their leaves' paths."""
    arrays, rest = trainable(to_float64(model))
    flat, unravel = ravel_pytree(arrays)  # concatenates the leaves in pytree order
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(arrays)[0]]
    layer_of_leaf = [int(re.search(r"\.layers\[(\d+)\]", path).group(1)) for path in paths]
    layer_of_column = np.repeat(layer_of_leaf, [leaf.size for leaf in jax.tree.leaves(arrays)])

    def output(theta, x):
        return eqx.combine(unravel(theta), rest)(x)

    jacobians = jax.vmap(jax.jacrev(output), in_axes=(None, 0))
    j1, j2 = jacobians(flat, x1), jacobians(flat, x2)
    return jnp.stack([
        jnp.einsum("acp,bdp->abcd", j1[..., layer_of_column == layer], j2[..., layer_of_column == layer])
        for layer in range(max(layer_of_leaf) + 1)
    ])


@pytest.mark.parametrize("parameterization, x2_given", [("standard", True), ("ntk", False)])
def test_cnn_ntk_matches_brute_force(parameterization, x2_given):
    model = tiny_cnn(parameterization)
    x1, x2 = images(5, (6, 6, 2), 0), images(3, (6, 6, 2), 1)
    second = x2 if x2_given else None
    components = brute_force_components(model, x1, x2 if x2_given else x1)
    assert components.shape == (4, 5, 3 if x2_given else 5, 2, 2)  # conv, conv, dense, readout
    for implementation in GENERIC:
        # blocks of 2 rows start at 0, 2, 3 (the last overlaps)
        options = dict(implementation=implementation, block_size=2)
        kernel = empirical_ntk(model, x1, second, **options)
        assert kernel.dtype == jnp.float64
        assert_close(kernel, components.sum(0))
        assert_close(empirical_ntk(model, x1, second, per_layer=True, **options), components)


def test_linearized_cnn_ntk_is_the_constant_origin_ntk():
    model = tiny_cnn("ntk")
    x = images(5, (6, 6, 2), 0)  # the shapes of the brute-force test, whose compilation is reused
    linearized = Linearized(model)
    outputs = eqx.filter_jit(lambda model: jax.vmap(model)(x))
    np.testing.assert_allclose(outputs(linearized), outputs(model), rtol=1e-12)

    def perturb(m):
        leaves, treedef = jax.tree.flatten(m)
        keys = jax.random.split(jax.random.key(1), len(leaves))
        return jax.tree.unflatten(treedef, [v + 0.5 * jax.random.normal(k, v.shape) for v, k in zip(leaves, keys)])

    moved = eqx.tree_at(lambda m: m.params, linearized, replace_fn=perturb)
    origin_components = brute_force_components(model, x, x)
    for implementation in GENERIC:
        assert_close(empirical_ntk(moved, x, per_layer=True, implementation=implementation), origin_components)
    # the network itself at the moved parameters has a different kernel
    moved_kernel = brute_force_components(moved.params, x, x).sum(0)
    assert np.abs(moved_kernel - origin_components.sum(0)).max() > 1e-3 * np.abs(moved_kernel).max()


def test_auto_follows_the_cost_model():
    # Dense-heavy (no conv layer), 10 outputs: [FP] ≈ 2P < C·P, so NTK-vector products
    # (N²·C·[FP] against N²·C²·P).
    dense_heavy = CNN((1, 1, 64), [], [256], 10, key=jax.random.key(0))
    # Conv-heavy: 32×32 positions, global average pool, 224 weights: [FP] ≫ C·P, so Jacobian contraction.
    conv_heavy = CNN((32, 32, 3), [ConvLayer(8, 3, pool="avg", pool_size=32)], [], key=jax.random.key(0))
    assert (parameter_count(dense_heavy), parameter_count(conv_heavy)) == (64 * 256 + 256 * 10, 3 * 3 * 3 * 8 + 8)
    n = 100
    x_dense, x_conv = np.zeros((n, 1, 1, 64), np.float32), np.zeros((n, 32, 32, 3), np.float32)  # the models' dtype
    for model, x, num_outputs, expected, ratio in (
        (dense_heavy, x_dense, 10, NtkImplementation.NTK_VECTOR_PRODUCTS, (1, 10)),
        (conv_heavy, x_conv, 1, NtkImplementation.JACOBIAN, (100, 10_000)),
    ):
        fp, p = forward_flops(model, x[0]), parameter_count(model)
        assert ratio[0] < fp / p < ratio[1]
        costs = generic_costs(model, x[0], n, None)
        assert costs.jacobian == n * num_outputs * fp + n**2 * num_outputs**2 * p
        assert costs.vector_products == n**2 * num_outputs * fp
        assert choose_implementation(model, x) is expected
        assert choose_implementation(Linearized(model), x, x[:50]) is expected
    mlp = MLP(3, 8, 2, 1, key=jax.random.key(0))
    assert choose_implementation(mlp, images(5, (3,), 0)) is NtkImplementation.MLP_LAYERS
