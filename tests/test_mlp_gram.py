"""The structured MLP Gram's fast paths against brute-force Jacobians: the readout layer as s_L ⊗ κ²·I
(its constant gradient detected from the traced program), small symmetric blocks with mirrored
writes, inside jit."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.models import MLP
from ntkpipe.ntk import empirical_ntk
from ntkpipe.ntk.mlp_layers import (
    ACCELERATOR_TILE_ROWS,
    TILE_ROWS,
    _traced_last_hidden,
    batched_layer_features,
    block_rows,
    has_constant_readout_gradient,
    mlp_layers_ntk,
    tile_rows,
)
from tests.test_ntk import assert_close, brute_force_ntk, inputs
from tests.test_ntk_options import mlp, reduced


def readout_layer(depth):
    """Selects the last layer's weight and bias leaves in ``brute_force_ntk``."""
    return lambda path: path in (f".weights[{depth - 1}]", f".biases[{depth - 1}]")


class TanhReadout(MLP):
    """f = tanh(κ z_L): g_L depends on the input, so the readout has no constant gradient."""

    def layer_inputs_and_output(self, x, offsets=None):
        inputs, output = super().layer_inputs_and_output(x, offsets)
        return inputs, jnp.tanh(output)


@pytest.mark.parametrize("parameterization", ["standard", "ntk"])
def test_readout_gradient_is_constant_also_when_traced(parameterization):
    model = MLP(4, 6, 3, 3, parameterization=parameterization, sigma=1.3, output_scale=0.7,
                key=jax.random.key(0), dtype=jnp.float64)
    assert has_constant_readout_gradient(model)
    assert jax.jit(lambda m: jnp.asarray(has_constant_readout_gradient(m)))(model)
    models = jax.vmap(lambda k: MLP(4, 6, 3, 3, output_scale=0.7, key=k))(jax.random.split(jax.random.key(1), 2))
    assert jax.vmap(lambda m: jnp.asarray(has_constant_readout_gradient(m)))(models).tolist() == [True, True]


def test_readout_without_constant_gradient_takes_the_general_product():
    model = TanhReadout(4, 6, 2, 3, output_scale=0.7, bias=True, key=jax.random.key(0), dtype=jnp.float64)
    assert not has_constant_readout_gradient(model)
    x1, x2 = inputs(5, 4, 0), inputs(3, 4, 1)
    kernel = mlp_layers_ntk(model, x1, x2, per_layer=True, block_size=256)
    assert_close(kernel.sum(0), brute_force_ntk(model, x1, x2), rtol=1e-12)
    assert_close(kernel[-1], brute_force_ntk(model, x1, x2, readout_layer(2)), rtol=1e-12)


# (depth, activation, parameterization, bias, C): c_L ≠ 1 (ntk) and biases change s_L; κ = 0.7
@pytest.mark.parametrize("architecture", [(2, "relu", "ntk", True, 3), (3, "tanh", "standard", False, 4)])
def test_readout_component_is_diagonal_in_the_outputs(architecture):
    model = mlp(*architecture)
    depth = architecture[0]
    x1, x2 = inputs(7, 4, 0), inputs(3, 4, 1)
    for second, n2 in ((None, 7), (x2, 3)):
        other = x1 if second is None else x2
        readout = brute_force_ntk(model, x1, other, readout_layer(depth))
        off_diagonal = readout * (1 - jnp.eye(architecture[-1]))
        assert np.abs(np.asarray(off_diagonal)).max() == 0
        full = brute_force_ntk(model, x1, other)
        for outputs in ("full", "diagonal", "trace"):
            layers = empirical_ntk(model, x1, second, per_layer=True, outputs=outputs, block_size=3)
            expected = (readout, full) if outputs == "full" else (reduced(readout, outputs), reduced(full, outputs))
            assert_close(layers[-1], expected[0], rtol=1e-12)
            assert_close(layers.sum(0), expected[1], rtol=1e-12)
            assert_close(empirical_ntk(model, x1, second, outputs=outputs, block_size=3), expected[1], rtol=1e-12)


def test_block_rows_hold_about_tile_rows_example_outputs(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")  # CPU tiles, wherever the suite runs
    assert block_rows(1000, 10, 256, "full") == 63  # 16 blocks of at most TILE_ROWS // 10 = 64
    assert block_rows(1024, 10, 256, "full") == TILE_ROWS // 10
    assert block_rows(100, 10, 256, "full") == 50  # two blocks, not 64 + 64 overlapping by 28
    assert block_rows(1024, 10, 32, "full") == 32  # at most block_size
    assert block_rows(1000, 10, 256, "trace") == 250  # four blocks of at most 256
    assert block_rows(5, 10, 256, "diagonal") == 5  # at most n
    assert block_rows(1000, 10_000, 256, "full") == 1


def test_accelerators_take_larger_tiles(monkeypatch):
    """On a GPU or TPU a block holds up to ACCELERATOR_TILE_ROWS example-output rows (fewer loop steps,
    each a kernel launch); on CPU TILE_ROWS (the fused pass stays in cache)."""
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert tile_rows() == TILE_ROWS
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert tile_rows() == ACCELERATOR_TILE_ROWS
    assert block_rows(1000, 10, 256, "full") == 250  # four blocks of at most min(256, 2560 // 10)
    assert block_rows(1000, 10, 1000, "full") == 250
    assert block_rows(2000, 10, 1000, "full") == 250  # eight blocks of at most 2560 // 10 = 256


def test_small_symmetric_blocks_with_many_outputs_match_brute_force():
    # C = 150 outputs (on CPU; 630 on a GPU): tile_rows() // C = 4 examples per block, so 11 examples
    # take blocks at 0, 4, 7 (the last overlapping); x2 = x1 writes the blocks above the diagonal mirrored
    num_outputs = tile_rows() // 4 - 10
    assert block_rows(11, num_outputs, 256, "full") == 4
    model = MLP(4, 8, 3, num_outputs, activation="gelu", bias=True, output_scale=1.7,
                key=jax.random.key(3), dtype=jnp.float64)
    x = inputs(11, 4, 0)
    expected = brute_force_ntk(model, x, x)
    kernel = empirical_ntk(model, x)
    assert_close(kernel, expected, rtol=1e-12)
    assert_close(kernel, kernel.transpose(1, 0, 3, 2), rtol=1e-15)  # mirrored
    jitted = jax.jit(lambda m, x: empirical_ntk(m, x, per_layer=True))(model, x)
    assert_close(jitted.sum(0), expected, rtol=1e-12)
    assert_close(jitted[-1], brute_force_ntk(model, x, x, readout_layer(3)), rtol=1e-12)


def test_gram_of_models_under_vmap_is_each_models_gram():
    models = jax.vmap(lambda k: MLP(4, 6, 2, 3, output_scale=0.7, bias=True, key=k, dtype=jnp.float64))(
        jax.random.split(jax.random.key(1), 2))
    x = inputs(7, 4, 0)
    kernels = jax.vmap(lambda m: empirical_ntk(m, x, per_layer=True, block_size=3))(models)
    for i in range(2):
        model = jax.tree.map(lambda a, i=i: a[i], models)
        assert_close(kernels[i].sum(0), brute_force_ntk(model, x, x), rtol=1e-12)
        assert_close(kernels[i][-1], brute_force_ntk(model, x, x, readout_layer(2)), rtol=1e-12)


def last_hidden_layer(depth):
    """Selects the last hidden layer's weight and bias leaves in ``brute_force_ntk``."""
    return lambda path: path in (f".weights[{depth - 2}]", f".biases[{depth - 2}]")


@pytest.mark.parametrize("activation, depth", [("gelu", 3), ("relu", 2)])
def test_traced_last_hidden_layer_from_one_row_per_example_matches_brute_force(activation, depth):
    """The trace of the last hidden layer's kernel from one row v = φ' ⊙ |R_{·k}| per example: GeLU's
    φ' < 0 somewhere (the sign comes from R), a readout column of zeros (|R_{·k}| = 0), x2 = x1 in
    blocks with mirrors and x2 ≠ x1, also under jit and in float32."""
    model = MLP(4, 6, depth, 3, activation=activation, bias=True, output_scale=0.7, key=jax.random.key(5),
                dtype=jnp.float64)
    model = eqx.tree_at(lambda m: m.weights[-1], model, model.weights[-1].at[:, 2].set(0.0))
    x1, x2 = inputs(7, 4, 0), inputs(3, 4, 1)
    assert float(jnp.min(jax.vmap(jax.grad(jax.nn.gelu))(jnp.linspace(-3, 0, 7)))) < 0  # φ' < 0 for GeLU
    features = _traced_last_hidden(model, batched_layer_features(model, x1))
    assert features[1][-2].shape == (7, 1, 6)  # one row of n_{L-1} per example, not C = 3
    for second, other in ((None, x1), (x2, x2)):
        expected = reduced(brute_force_ntk(model, x1, other, last_hidden_layer(depth)), "trace")
        layers = empirical_ntk(model, x1, second, per_layer=True, outputs="trace", block_size=3)
        assert_close(layers[-2], expected, rtol=1e-12)
        assert_close(layers.sum(0), reduced(brute_force_ntk(model, x1, other), "trace"), rtol=1e-12)
        jitted = jax.jit(lambda m, a, b: empirical_ntk(m, a, b, per_layer=True, outputs="trace"))(model, x1, second)
        assert_close(jitted[-2], expected, rtol=1e-12)
        single = empirical_ntk(model, x1, second, per_layer=True, outputs="trace", dtype=jnp.float32)
        assert_close(single[-2], expected, rtol=1e-5)
