"""``ntkpipe.filter_jit``: ``eqx.filter_jit``'s programs (array leaves traced, other leaves static) with
one flatten per call; the same numbers bit for bit."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.filter_jit import Static, filter_jit, merge, split
from ntkpipe.models.mlp import MLP


def test_array_leaves_are_traced_and_the_others_static():
    traces = []

    def scaled(x, scale, *, power: int, label: str):
        traces.append((power, label))
        return {"value": scale * x**power, "label": label}

    f = filter_jit(scaled)
    x = jnp.arange(3, dtype=jnp.float32)
    out = f(x, np.float32(2.0), power=2, label="a")
    np.testing.assert_array_equal(out["value"], [0.0, 2.0, 8.0])
    assert out["label"] == "a"  # a non-array output leaf comes back as it went in
    f(np.arange(1, 4, dtype=np.float32), np.float32(3.0), power=2, label="a")  # new values, NumPy: no new trace
    f(x, np.float32(2.0), power=3, label="a")  # a new static: traced again
    f(x, np.float32(2.0), power=3, label="b")
    f(jnp.arange(4, dtype=jnp.float32), np.float32(2.0), power=3, label="b")  # a new shape: traced again
    assert traces == [(2, "a"), (3, "a"), (3, "b"), (3, "b")]


def test_a_network_and_its_training_step_equal_equinox_bit_for_bit():
    """Outputs and one SGD step of a tanh MLP through both wrappers; the module comes back as a module."""
    net = MLP(8, 32, 3, 2, activation="tanh", sigma=1.5, dtype=jnp.float32, key=jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (20, 8), jnp.float32)

    def step(model, x, lr):
        def loss(m):
            return jnp.mean(jax.vmap(m)(x) ** 2)

        grads = eqx.filter_grad(loss)(model)
        return eqx.apply_updates(model, jax.tree.map(lambda g: -lr * g, grads)), loss(model)

    ours, theirs = filter_jit(step)(net, x, 0.1), eqx.filter_jit(step)(net, x, 0.1)
    assert isinstance(ours[0], MLP) and ours[0].activation == net.activation
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_array_equal(a, b)
    assert float(ours[1]) > 0.0


def test_inside_jit_and_vmap_it_is_part_of_the_enclosing_program():
    f = filter_jit(lambda x, k: jnp.sin(x) * k)
    x = jnp.linspace(0.0, 1.0, 5, dtype=jnp.float32)
    np.testing.assert_allclose(jax.jit(lambda x: f(x, 2.0) + 1.0)(x), 2.0 * np.sin(x) + 1.0, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(lambda x: f(x, 2.0))(x[:, None])[:, 0], 2.0 * np.sin(x), rtol=1e-6)


def test_split_and_merge_are_inverse_and_static_compares_by_value():
    tree = {"w": jnp.ones(2), "act": jnp.tanh, "n": 3, "nested": (np.zeros(1), "s")}
    arrays, static = split(tree)
    assert len(arrays) == 2
    rebuilt = merge(arrays, static)
    assert rebuilt["act"] is jnp.tanh and rebuilt["n"] == 3 and rebuilt["nested"][1] == "s"
    assert split({"w": jnp.zeros(2), "act": jnp.tanh, "n": 3, "nested": (np.ones(1), "s")})[1] == static
    assert split({**tree, "n": 4})[1] != static
    assert Static(("a", 1)) == Static(("a", 1)) and hash(Static(("a", 1))) == hash(("a", 1))


def test_an_unhashable_static_leaf_is_refused():
    with pytest.raises(TypeError, match="unhashable"):
        filter_jit(lambda x, s: x)(jnp.ones(1), {1, 2})
