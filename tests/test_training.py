"""The compiled training loop against plain-numpy and plain-optax reference loops."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ntkpipe.lang.schema import CheckpointSpec, TrainSpec
from ntkpipe.models import MLP, Linearized, trainable
from ntkpipe.train import batches, checkpoint_steps, total_steps, train
from ntkpipe.train.batches import TrainingData, TrainingSet, batch_slots, epoch_orders
from ntkpipe.train.minibatch_shapes import epochs_to_cover, padded_rows

RNG = np.random.default_rng(0)
X = RNG.standard_normal((10, 3))
Y = RNG.standard_normal((10, 1))


def linear_model(dtype=jnp.float64):
    return MLP(3, 1, 1, 1, activation="linear", dtype=dtype, key=jax.random.PRNGKey(1))


def spec(**kw) -> TrainSpec:
    base = {"optimizer": {"name": "gd", "lr": 0.1}, "steps": 25, "dtype": "float64",
            "checkpoints": {"spacing": "linear", "count": 5}}
    base.update(kw)
    if "epochs" in kw or "max_time" in kw:
        base.pop("steps")
    return TrainSpec.model_validate(base)


def loss_only(model, index=0, last=True):
    dtype = jax.tree.leaves(model)[0].dtype  # the training dtype
    f = jax.vmap(model)(jnp.asarray(X, dtype))
    return {"loss": float(0.5 * jnp.mean(jnp.sum((f - jnp.asarray(Y, dtype)) ** 2, -1)))}


def run(model, train_spec, key=jax.random.PRNGKey(0)):
    return train(model, X, Y, train_spec, key=key, measure=loss_only)


def test_gd_matches_numpy_gradient_descent():
    model = linear_model()
    traj = run(model, spec())
    w = np.asarray(model.weights[0])[0].copy()
    for _ in range(25):
        w -= 0.1 * X.T @ (X @ w - Y[:, 0]) / len(X)
    np.testing.assert_allclose(np.asarray(traj.model.weights[0])[0], w, rtol=1e-12)
    assert traj.steps.tolist() == [0, 5, 10, 15, 20, 25]
    np.testing.assert_allclose(traj.time, traj.steps * 0.1)


def test_momentum_with_linear_decay_matches_heavy_ball():
    model = linear_model()
    opt = {"name": "sgd", "lr": 0.05, "momentum": 0.9, "schedule": "linear_decay"}
    traj = run(model, spec(optimizer=opt, steps=40))
    w = np.asarray(model.weights[0])[0].copy()
    buf = np.zeros_like(w)
    for step in range(40):
        g = X.T @ (X @ w - Y[:, 0]) / len(X)
        buf = 0.9 * buf + g
        w -= 0.05 * (1 - step / 40) * buf
    np.testing.assert_allclose(np.asarray(traj.model.weights[0])[0], w, rtol=1e-12)


def test_minibatches_cover_each_example_once_per_epoch():
    """Batches of 4 from 10 points: batches of 4, 4 and a last one of 2 (mean over its 2)."""
    model = linear_model()
    key = jax.random.PRNGKey(3)
    traj = run(model, spec(optimizer={"name": "sgd", "lr": 0.1}, batch_size=4, epochs=2), key)
    w = np.asarray(model.weights[0])[0].copy()
    for epoch in range(2):
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(key, epoch), 10))
        for idx in (perm[:4], perm[4:8], perm[8:]):
            w -= 0.1 * X[idx].T @ (X[idx] @ w - Y[idx, 0]) / len(idx)
    np.testing.assert_allclose(np.asarray(traj.model.weights[0])[0], w, rtol=1e-12)
    assert traj.steps[-1] == 6 and traj.epoch[-1] == 2


def test_adam_matches_optax_adam():
    model = MLP(3, 4, 2, 1, activation="tanh", dtype=jnp.float64, key=jax.random.PRNGKey(2))
    traj = run(model, spec(optimizer={"name": "adam", "lr": 0.01}, steps=30))
    opt = optax.adam(0.01)
    params, fixed = trainable(model)  # the weights; not the multipliers c_ℓ and κ
    state = opt.init(params)

    def loss(p):
        return 0.5 * jnp.mean(jnp.sum((jax.vmap(eqx.combine(p, fixed))(jnp.asarray(X)) - Y) ** 2, -1))

    with jax.numpy_dtype_promotion("standard"):  # optax promotes implicitly (Adam's bias correction)
        for _ in range(30):
            updates, state = opt.update(jax.grad(loss)(params), state, params)
            params = optax.apply_updates(params, updates)
    assert len(jax.tree.leaves(params)) == 2
    for a, b in zip(jax.tree.leaves(trainable(traj.model)[0]), jax.tree.leaves(params)):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_linearized_model_trains_only_its_params():
    base = MLP(3, 4, 2, 1, activation="relu", dtype=jnp.float64, key=jax.random.PRNGKey(4))
    traj = run(Linearized(base), spec(steps=5))
    np.testing.assert_array_equal(traj.model.origin.weights[0], base.weights[0])
    assert not np.allclose(traj.model.params.weights[0], base.weights[0])
    assert traj.series["loss"][-1] < traj.series["loss"][0]


def test_divergence_is_recorded_not_raised():
    traj = run(linear_model(), spec(optimizer={"name": "gd", "lr": 1e3}, steps=2000,
                                    checkpoints={"spacing": "log", "per_decade": 5}))
    assert traj.diverged
    assert np.isfinite(traj.series["loss"][0]) and np.isnan(traj.series["loss"][-1])


def test_float32_training_is_reproducible():
    model = MLP(3, 8, 3, 1, activation="relu", key=jax.random.PRNGKey(0))
    s = spec(optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9}, batch_size=4, epochs=3, dtype="float32")
    a, b = run(model, s), run(model, s)
    np.testing.assert_array_equal(a.series["loss"], b.series["loss"])
    assert a.model.weights[0].dtype == jnp.float32


def test_checkpoint_grid_is_shared_across_lengths():
    grid = CheckpointSpec(spacing="log", per_decade=4)
    short, long = checkpoint_steps(grid, 100), checkpoint_steps(grid, 1000)
    assert short[0] == 0 and short[-1] == 100 and long[-1] == 1000
    assert set(short[:-1]) <= set(long)
    assert short.tolist() == [0, 1, 2, 3, 6, 10, 18, 32, 56, 100]


@pytest.mark.parametrize("kw,expected", [
    ({"steps": 7}, 7),
    ({"epochs": 3, "batch_size": 4, "optimizer": {"name": "sgd", "lr": 0.1}}, 9),
    ({"max_time": 2.0}, 20),
])
def test_total_steps(kw, expected):
    assert total_steps(spec(**kw), 10) == expected


@pytest.mark.parametrize("optimizer", [{"name": "gd"}, {"name": "adam"}])
def test_per_layer_learning_rates_match_optax_with_a_multiplier_per_layer(optimizer):
    """θ_ℓ ← θ_ℓ − η m_ℓ u_ℓ with m = layer_lr, the readout's also times lr_ratio (solvable-model η_u, η_W)."""
    net = MLP(3, 8, 3, 1, activation="tanh", bias=True, dtype=jnp.float64, key=jax.random.PRNGKey(2))
    train_spec = spec(optimizer={**optimizer, "lr": 0.05, "layer_lr": [2.0, 0.5, 1.0], "lr_ratio": 3.0}, steps=7)
    got = run(net, train_spec).model
    multipliers = [2.0, 0.5, 3.0]
    direction = optax.scale_by_adam() if optimizer["name"] == "adam" else optax.identity()
    params = (net.weights, net.biases)
    state = direction.init(params)

    def loss(p):
        model = eqx.tree_at(lambda m: (m.weights, m.biases), net, p)
        f = jax.vmap(model)(jnp.asarray(X))
        return 0.5 * jnp.mean(jnp.sum((f - Y) ** 2, -1))

    for _ in range(7):
        with jax.numpy_dtype_promotion("standard"):  # optax promotes implicitly (Adam's bias correction)
            updates, state = direction.update(jax.grad(loss)(params), state, params)
        params = tuple(tuple(p - 0.05 * m * u for p, u, m in zip(ps, us, multipliers))
                       for ps, us in zip(params, updates))
    for mine, ref in zip(jax.tree.leaves((got.weights, got.biases)), jax.tree.leaves(params)):
        np.testing.assert_allclose(mine, ref, rtol=1e-12, atol=1e-14)


def test_epoch_orders_are_each_epochs_own_permutation():
    """The order table (drawn outside the training program) holds, row e, the permutation that
    ``jax.random.permutation(fold_in(key, e), n)`` draws alone; the epochs it covers round up."""
    key = jax.random.PRNGKey(5)
    orders = np.asarray(epoch_orders(key, 10, 4))
    assert orders.shape == (4, 10) and orders.dtype == np.int32
    for epoch in range(4):
        np.testing.assert_array_equal(orders[epoch], jax.random.permutation(jax.random.fold_in(key, epoch), 10))
    assert [epochs_to_cover(steps, 10, 4) for steps in (0, 1, 3, 4, 9)] == [1, 1, 1, 2, 3]


def test_last_partial_batch_wraps_to_the_epochs_start_masked():
    """n = 10, B = 4: the third batch of each epoch reads π[8], π[9], then π[0], π[1] masked out."""
    orders = np.asarray(epoch_orders(jax.random.PRNGKey(1), 10, 2))
    data = TrainingSet(jnp.zeros(10), jnp.zeros(10), jnp.asarray(orders), jnp.asarray(0), jnp.asarray(10))
    for step, (epoch, slots) in enumerate([(0, [0, 1, 2, 3]), (0, [4, 5, 6, 7]), (0, [8, 9, 0, 1]),
                                           (1, [0, 1, 2, 3])]):
        idx, inside = batch_slots(data, jnp.asarray(step), 4)
        np.testing.assert_array_equal(idx, orders[epoch, slots])
        np.testing.assert_array_equal(inside, [True] * 4 if step != 2 else [True, True, False, False])


def test_a_minibatch_training_set_is_padded_to_a_shared_shape():
    """Training sets of 75 and 1,000 points (a sample-size sweep) get the same shapes, so one compiled
    program trains both (15 epochs each); the rows past n are zeros and the orders' rows past the run's
    epochs too."""
    key = jax.random.PRNGKey(2)
    small = TrainingData(np.ones((75, 3)), np.ones((75, 1)), jnp.float32, key, batch_size=64, total_steps=30)
    large = TrainingData(np.ones((1000, 3)), np.ones((1000, 1)), jnp.float32, key, batch_size=64, total_steps=240)
    (_, end, first), = small.pieces(0, 30)
    (*_, other), = large.pieces(0, 240)
    assert end == 30 and jax.tree.map(jnp.shape, first) == jax.tree.map(jnp.shape, other)
    assert first.x.shape == (padded_rows(75), 3) == (1024, 3) and int(first.n) == 75
    assert not np.asarray(first.x[75:]).any() and np.asarray(first.x[:75]).all()
    assert first.orders.shape == (16, 1024)  # 30 steps of 2 batches: 15 epochs, padded to 16
    np.testing.assert_array_equal(first.orders[:15, :75], epoch_orders(key, 75, 15))
    assert [padded_rows(n) for n in (1, 1024, 1025, 5000)] == [1024, 1024, 2048, 8192]
    (*_, full), = TrainingData(np.ones((75, 3)), np.ones((75, 1)), jnp.float32, key, None, 30).pieces(0, 30)
    assert full.x.shape == (75, 3) and full.orders.shape == (0, 75)  # full batches read every row: no padding


def test_orders_in_windows_train_the_same_numbers(monkeypatch):
    """A run whose epoch orders do not fit one window (here 4 epochs of 1,024 rows at most) advances window
    by window, with the orders each window draws, to the same parameters bit for bit as in one window."""
    s = spec(optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9}, batch_size=4, epochs=11, dtype="float32")
    key = jax.random.PRNGKey(4)
    one = run(linear_model(), s, key)
    monkeypatch.setattr(batches, "ORDERS_BYTES", 4 * 4 * 1024)
    data = TrainingData(X, Y, jnp.float32, key, 4, 33)
    assert data.window == 4 and [(a, b) for a, b, _ in data.pieces(5, 33)] == [(5, 12), (12, 24), (24, 33)]
    windowed = run(linear_model(), s, key)
    for a, b in zip(jax.tree.leaves(one.model), jax.tree.leaves(windowed.model)):
        np.testing.assert_array_equal(a, b)
