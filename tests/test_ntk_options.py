"""Kernel options: traced and diagonal kernels (all three implementations, MLP and CNN) against the
brute-force Jacobian contraction, float32 kernels against float64, and empirical_ntk inside jax.jit."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.models import MLP
from ntkpipe.ntk import NtkImplementation, empirical_ntk
from tests.test_cnn import images, tiny_cnn
from tests.test_ntk import assert_close, brute_force_ntk, inputs

ALL = list(NtkImplementation)[:3]
GENERIC = [NtkImplementation.JACOBIAN, NtkImplementation.NTK_VECTOR_PRODUCTS]


def reduced(kernel, outputs):
    """The diagonal or trace of a full (…, n1, n2, C, C) kernel."""
    diagonal = jnp.diagonal(kernel, axis1=-2, axis2=-1)
    return diagonal if outputs == "diagonal" else diagonal.sum(-1)


def mlp(depth, activation, parameterization, bias, num_outputs):
    model = MLP(4, 6, depth, num_outputs, activation=activation, parameterization=parameterization,
                sigma=1.3, output_scale=0.7, bias=bias, key=jax.random.key(depth))
    if bias:
        model = eqx.tree_at(lambda m: m.biases, model, tuple(jnp.full_like(b, 0.3) for b in model.biases))
    return model


# (depth, activation, parameterization, bias, C): depths 1–3, both parameterizations, with and without biases
MLPS = [(1, "relu", "ntk", True, 3), (2, "tanh", "standard", False, 3), (3, "gelu", "ntk", True, 2)]


@pytest.mark.parametrize("architecture", MLPS)
def test_mlp_traced_and_diagonal_kernels_match_brute_force(architecture):
    model = mlp(*architecture)
    depth, num_outputs = architecture[0], architecture[-1]
    x1, x2 = inputs(7, 4, 0), inputs(3, 4, 1)
    full_x1, full_x2 = brute_force_ntk(model, x1, x1), brute_force_ntk(model, x1, x2)
    for outputs, trailing in (("trace", ()), ("diagonal", (num_outputs,))):
        components = []
        for implementation in ALL:
            # x2 = None: symmetric blocks of 3 rows (the last overlapping), each also written mirrored
            kernel = empirical_ntk(model, x1, outputs=outputs, implementation=implementation, block_size=3)
            assert kernel.dtype == jnp.float64 and kernel.shape == (7, 7, *trailing)
            assert_close(kernel, reduced(full_x1, outputs), rtol=1e-12)
            layers = empirical_ntk(model, x1, x2, outputs=outputs, implementation=implementation, per_layer=True)
            assert layers.shape == (depth, 7, 3, *trailing)
            assert_close(layers.sum(0), reduced(full_x2, outputs), rtol=1e-12)
            components.append(layers)
        for layers in components[1:]:  # the same per-layer split by all three implementations
            assert_close(layers, components[0], rtol=1e-12)


def test_cnn_traced_and_diagonal_kernels_match_brute_force():
    # x2 = x1 in blocks of 2 rows (mirrored); the x2 ≠ x1 case of both generic paths is run on the MLPs
    model = tiny_cnn("ntk")
    x = images(5, (6, 6, 2), 0)
    full = brute_force_ntk(model, x, x)
    for outputs in ("trace", "diagonal"):
        for implementation in GENERIC:
            kernel = empirical_ntk(model, x, outputs=outputs, implementation=implementation, block_size=2)
            assert_close(kernel, reduced(full, outputs), rtol=1e-12)


def test_float32_kernel_error_against_float64():
    # Bound: float32 rounding (ε = 6e-8) of features and GEMMs over a few hundred terms, summed over
    # leaves in float64 (jacobian) or over the layers in float32 (mlp_layers); measured 2–5e-7 of
    # max |K| here either way, so 1e-5 leaves a 20× margin, and 1e-9
    # shows the kernel really was computed in float32.
    x = jax.random.normal(jax.random.key(0), (64, 20), jnp.float64)
    for depth, activation, num_outputs, implementation in ((3, "relu", 10, "mlp_layers"), (2, "tanh", 3, "jacobian")):
        model = MLP(20, 256, depth, num_outputs, activation=activation, bias=True, key=jax.random.key(1))
        for outputs in ("full", "trace"):
            exact = np.asarray(empirical_ntk(model, x, outputs=outputs, implementation=implementation))
            single = empirical_ntk(model, x, outputs=outputs, implementation=implementation, dtype=jnp.float32)
            assert single.dtype == jnp.float32
            error = np.abs(np.asarray(single, np.float64) - exact).max() / np.abs(exact).max()
            assert 1e-9 < error < 1e-5


@pytest.mark.parametrize("model, x, kinds", [(mlp(3, "tanh", "ntk", True, 3), inputs(9, 4, 0), ("full", "trace")),
                                             (tiny_cnn("standard"), images(5, (6, 6, 2), 0), ("full",))],
                         ids=["mlp", "cnn"])
def test_empirical_ntk_inside_jit_equals_eager(model, x, kinds):
    # the CNN goes through AUTO's cost model, which lowers the forward pass of the traced model
    for outputs in kinds:
        jitted = jax.jit(lambda m, x, outputs=outputs: empirical_ntk(m, x, outputs=outputs, block_size=4))(model, x)
        assert_close(jitted, empirical_ntk(model, x, outputs=outputs, block_size=4), rtol=1e-14)
    per_example = jax.vmap(lambda row: empirical_ntk(model, row[None], outputs="trace")[0, 0])(x)
    assert_close(per_example, jnp.diagonal(empirical_ntk(model, x, outputs="trace")), rtol=1e-14)


def test_bad_options_are_named():
    model, x = mlp(2, "relu", "ntk", False, 2), inputs(3, 4, 0)
    with pytest.raises(ValueError, match=r"outputs must be one of 'full', 'diagonal', 'trace', got 'traced'"):
        empirical_ntk(model, x, outputs="traced")
    with pytest.raises(ValueError, match="dtype must be float64 or float32, got float16"):
        empirical_ntk(model, x, dtype=jnp.float16)
