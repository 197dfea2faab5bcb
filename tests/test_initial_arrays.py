"""Initial arrays made on the host: the same numbers as JAX's own draws and products, bit for bit."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkpipe.models import MLP
from ntkpipe.models.cnn import init_weight
from ntkpipe.models.initial_arrays import SMALLEST_DRAW, draw_size, filled, standard_normal

SHAPES = st.lists(st.integers(1, 40), min_size=1, max_size=4).map(tuple)


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2**31 - 1), dtype=st.sampled_from([jnp.float32, jnp.float64]))
def test_standard_normal_is_jax_draw_bit_for_bit(shape, seed, dtype):
    key = jax.random.key(seed)
    with jax.enable_x64(True):
        expected = np.asarray(jax.random.normal(key, shape, dtype))
        drawn = standard_normal(key, shape, dtype)
    assert drawn.dtype == expected.dtype and drawn.shape == expected.shape
    assert np.array_equal(drawn, expected)


@pytest.mark.parametrize(("size", "drawn"), [(1, SMALLEST_DRAW), (SMALLEST_DRAW + 1, 2 * SMALLEST_DRAW),
                                             (4096, 4096), (4097, 8192), (500 * 500, 2**18)])
def test_draw_size_is_the_next_power_of_two(size, drawn):
    assert draw_size(size) == drawn


def test_mlp_weights_are_the_scaled_jax_draws():
    """W_ℓ = (σ/√n_{ℓ-1})·N(0, 1) as JAX computes it (a float32 product), and zero biases."""
    key = jax.random.key(7)
    net = MLP(13, 37, 3, 2, sigma=1.3, bias=True, key=key)
    for k, w in zip(jax.random.split(key, 3), net.weights):
        expected = jax.random.normal(k, w.shape, jnp.float32) * (1.3 / math.sqrt(w.shape[1]))
        assert w.dtype == jnp.float32 and np.array_equal(np.asarray(w), np.asarray(expected))
    assert all(b.dtype == jnp.float32 and not np.any(np.asarray(b)) for b in net.biases or ())


def test_conv_weight_is_the_scaled_jax_draw():
    key = jax.random.key(8)
    w, c = init_weight(key, (3, 3, 4, 6), 36, "standard", 2**0.5, jnp.float32)
    assert c == 1.0
    assert np.array_equal(np.asarray(w), np.asarray(jax.random.normal(key, (3, 3, 4, 6), jnp.float32) * (2**0.5 / 6)))


def test_filled_is_jnp_full():
    made = filled((5,), 1.0, jnp.float32)
    assert made.dtype == jnp.float32 and np.array_equal(np.asarray(made), np.ones(5, np.float32))


def test_networks_build_under_tracing():
    """``jax.eval_shape`` of a network (its parameter count, before a run) draws traced weights."""
    net = jax.eval_shape(lambda: MLP(13, 37, 3, 2, bias=True, key=jax.random.fold_in(jax.random.key(0), 1)))
    assert [w.shape for w in net.weights] == [(37, 13), (37, 37), (2, 37)]


def test_drawn_directly_where_threefry_is_not_counter_based():
    key = jax.random.key(9)
    with jax.threefry_partitionable(False):
        expected = np.asarray(jax.random.normal(key, (5, 7), jnp.float32))
        assert np.array_equal(np.asarray(standard_normal(key, (5, 7), jnp.float32)), expected)
