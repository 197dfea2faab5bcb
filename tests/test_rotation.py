"""Kernel-rotation measurements (linearized-networks Sec. 4) against planted answers and
independent computations: energy concentration, the single-axis rotation, weight distances,
steps to a loss threshold."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest
import xarray as xr
from jax.flatten_util import ravel_pytree

from ntkpipe.data import Dataset
from ntkpipe.lang.schema import MeasureItem, RunSpec
from ntkpipe.measure.context import ModelView, RunContext
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.measure.rotation import energy_concentration, parameter_distances
from ntkpipe.models import CNN, MLP, ConvLayer, Linearized, trainable
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.train.driver import Trajectory

RNG = np.random.default_rng(1)


def _gram(n: int) -> np.ndarray:
    a = RNG.standard_normal((n, n))
    return a @ a.T


def test_energy_concentration_of_a_planted_eigenvector_is_one():
    k = _gram(40)
    _, vectors = top_eigenpairs(k, 40)
    for j in (0, 4, 9):
        assert energy_concentration(k, 3.0 * vectors[:, j], top_k=10) == pytest.approx(1.0, abs=1e-12)
    assert energy_concentration(k, vectors[:, 20], top_k=10) == pytest.approx(0.0, abs=1e-12)
    y = RNG.choice([-1.0, 1.0], size=(40, 1))  # against the definition with numpy's eigh
    u = np.linalg.eigh(k)[1][:, ::-1][:, :7]
    assert energy_concentration(k, y, top_k=7) == pytest.approx(np.linalg.norm(u.T @ y) / np.linalg.norm(y))


def test_parameter_distances():
    a, b = RNG.standard_normal(50), RNG.standard_normal(50)
    distance, cosine = parameter_distances(a, b)
    assert distance == pytest.approx(np.sqrt(np.sum((a - b) ** 2)))
    assert cosine == pytest.approx(1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert parameter_distances(2 * a, a)[1] == pytest.approx(0.0, abs=1e-15)


def _run(model, n_train=24, n_test=8, top_k=None, shape=(6,)):
    """A run context on random inputs, with the exact init-Gram eigenpairs as the label stage."""
    x = RNG.standard_normal((n_train + n_test, *shape))
    values, vectors = top_eigenpairs(np.asarray(flatten_gram(empirical_ntk(model, x))), top_k)
    y = np.where(vectors[:, 1] >= 0, 1.0, -1.0)[:, None]
    data = Dataset(x[:n_train], y[:n_train], x[n_train:], y[n_train:])
    eigen = xr.Dataset({"eigenvalues": ("eigen_index", values), "eigenvectors": (("point", "eigen_index"), vectors)})
    spec = RunSpec.model_validate({
        "seed": 0, "data": {"source": "linear_teacher", "dim": 6, "n_train": n_train, "n_test": n_test,
                            "labels": {"kind": "eigenvector_sign", "stage": "s", "eigen_index": 2}},
        "model": {"depth": 2, "width": 8}, "train": {"optimizer": {"name": "gd", "lr": 0.1}, "steps": 1},
        "measure": []})
    return RunContext(spec, data, model, {"labels": eigen})


def _scaled(model, factor: float):
    return jax.tree.map(lambda a: a * factor if eqx.is_inexact_array(a) else a, model)


def _trajectory(model, loss=(1.0, 0.5)) -> Trajectory:
    steps = np.arange(len(loss)) * 10
    return Trajectory(steps, steps * 0.1, steps / 10.0, {"loss": np.asarray(loss)}, False, model)


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_rotation_of_an_untrained_network_is_one_everywhere(arch):
    if arch == "mlp":
        model, shape = MLP(6, 16, 3, 1, bias=True, key=jax.random.PRNGKey(0)), (6,)
    else:
        model, shape = CNN((4, 4, 1), [ConvLayer(3, 3, pool="avg")], [8], 1, bias=True,
                           key=jax.random.PRNGKey(0)), (4, 4, 1)
    run = _run(model, top_k=12, shape=shape)
    item = MeasureItem(name="rotation", top_k=12)
    out = REGISTRY["rotation"].compute(run, _trajectory(model), item)
    np.testing.assert_allclose(out["rotation"], np.ones(12), rtol=1e-9)
    # A linearization's Jacobian never moves: its rotation is 1 however far it trains.
    moved = eqx.tree_at(lambda m: m.params, Linearized(model), _scaled(model, 1.7))
    np.testing.assert_allclose(REGISTRY["rotation"].compute(run, _trajectory(moved), item)["rotation"], np.ones(12), rtol=1e-9)


def test_rotation_of_a_moved_network_matches_the_final_gram():
    model = MLP(6, 16, 3, 1, bias=True, key=jax.random.PRNGKey(0))
    run = _run(model, top_k=10)
    trained = _scaled(model, 1.3)
    out = REGISTRY["rotation"].compute(run, _trajectory(trained), MeasureItem(name="rotation", top_k=10))
    gram_t = np.asarray(flatten_gram(empirical_ntk(trained, run.data.x_all)))
    values, vectors = run.label_eigenpairs(10)
    expected = np.einsum("ni,nm,mi->i", vectors, gram_t, vectors) / values
    np.testing.assert_allclose(out["rotation"], expected, rtol=1e-9)
    assert out["rotation_peak"] == int(np.argmax(expected)) + 1


def test_energy_measurement_is_taken_at_init_end_and_every_kth_checkpoint():
    model = MLP(6, 16, 3, 1, bias=True, key=jax.random.PRNGKey(0))
    run = _run(model)
    item = MeasureItem(name="energy_concentration", top_k=5, subset=10, every=3)
    gram = np.asarray(flatten_gram(empirical_ntk(model, run.data.x_train[:10])))
    expected = energy_concentration(gram, run.data.y_train[:10], 5)
    taken = [REGISTRY["energy_concentration"].compute(ModelView(model, run, i, i == 7), item)["energy_concentration"] for i in range(8)]
    assert [np.isfinite(v) for v in taken] == [True, False, False, True, False, False, True, True]
    assert taken[0] == pytest.approx(expected, rel=1e-12)


def test_training_metrics():
    model = MLP(6, 8, 2, 1, key=jax.random.PRNGKey(0))
    run = _run(model)
    traj = Trajectory(np.array([0, 10, 20]), np.array([0.0, 1.0, 2.0]), np.zeros(3),
                      {"loss": np.array([1.0, 0.1, 0.001])}, False, model)
    item = MeasureItem(name="steps_to_threshold", threshold=0.01)
    assert REGISTRY["steps_to_threshold"].compute(run, traj, item)["steps_to_threshold"] == pytest.approx(10 + 10 * 0.09 / 0.099)
    moved = jax.tree.map(lambda a: a + 0.5 if eqx.is_inexact_array(a) else a, model)
    out = REGISTRY["param_distance"].compute(run, _trajectory(moved), None)
    theta0, _ = ravel_pytree(trainable(model)[0])
    assert out["param_distance"] == pytest.approx(0.5 * np.sqrt(theta0.size), rel=1e-6)
