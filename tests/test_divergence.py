"""Diverged runs end to end: detection (non-finite or exploding loss, down to one step; a blow-up past
``train.divergence_factor`` that later looks finite; non-finite parameters), in the unpacked and packed
training paths, aggregation of a study whose every run diverged, and figures that leave diverged runs
out and say so."""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe import open_dataset
from ntkpipe.data.digits import digits_pool
from ntkpipe.errors import SpecError
from ntkpipe.lang.schema import SweepFigure, TimeSeriesFigure, TrainSpec
from ntkpipe.models import MLP, trainable
from ntkpipe.plots.sweep import plot_sweep
from ntkpipe.plots.time_series import plot_time_series
from ntkpipe.study.load import load_study
from ntkpipe.train import train
from ntkpipe.train.driver import EXPLOSION_FACTOR, blew_up, exploded
from ntkpipe.train.packed import train_packed
from tests.conftest import run_snakemake

BASE = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 2, width: 8, activation: linear, sigma: 1.0}
"""
# every run overflows to a non-finite loss within 20 steps (its final measurements are never taken)
ALL_DIVERGE = BASE + """\
train: {optimizer: {name: gd, lr: 50.0}, steps: 20, checkpoints: {spacing: linear, count: 5}}
measure: [loss, alignment, t_half]
sweep: {seed: [0, 1], lr: [50.0, 80.0]}
summaries:
  - {name: t_half_trend, kind: power_law, x: lr, y: t_half}
figures:
  - {name: t_half, kind: sweep, x: lr, y: t_half, logx: true}
  - {name: curves, kind: time_series, variables: [loss, alignment], hue: lr, logy: [loss]}
"""
# lr = 3 blows the loss up (one seed: 0.27 → 1.4 → 6·10² → 7·10¹⁰ in three steps): finite (float64), but past
# divergence_factor (10⁶) times its initial before the fourth and last step
HALF_DIVERGE = BASE + """\
train: {optimizer: {name: gd, lr: 0.05}, steps: 4, dtype: float64, checkpoints: {spacing: linear, count: 4}}
measure: [loss, alignment, relative_kernel_change]
sweep: {seed: [0, 1], lr: [0.05, 3.0]}
figures:
  - {name: final_loss, kind: sweep, x: lr, y: loss, logx: true, logy: true}
  - {name: curves, kind: time_series, variables: [loss], logy: [loss]}
"""
CURVES = TimeSeriesFigure.model_validate({"name": "curves", "kind": "time_series", "variables": ["loss"],
                                          "logx": False, "logy": ["loss"]})
NOTE = "2 of 4 runs diverged, not drawn:\nseed=0, η=3; seed=1, η=3"  # which runs, by their axes' values


def one_step(lr: float):
    """A two-layer linear net trained for max_time = lr, i.e. a single GD step."""
    x = np.random.default_rng(0).normal(size=(16, 8))
    y = x[:, :1].copy()
    model = MLP(8, 8, 2, 1, activation="linear", dtype=jnp.float64, key=jax.random.PRNGKey(0))
    spec = TrainSpec.model_validate({"optimizer": {"name": "gd", "lr": lr}, "max_time": lr, "dtype": "float64"})
    return train(model, x, y, spec, key=jax.random.PRNGKey(1), label="one step",
                 measure=lambda m, i, last: {"loss": float(0.5 * np.mean((np.asarray(jax.vmap(m)(x)) - y) ** 2))})


def test_one_step_with_a_huge_learning_rate_is_diverged():
    huge, small = one_step(20.0), one_step(0.05)
    assert huge.steps.tolist() == [0, 1] and small.steps.tolist() == [0, 1]
    loss = huge.series["loss"]
    assert np.all(np.isfinite(loss)) and loss[1] > EXPLOSION_FACTOR * loss[0]  # finite, but exploded
    assert huge.diverged and not small.diverged
    assert small.series["loss"][1] < small.series["loss"][0]


def test_exploded_compares_the_last_loss_with_the_initial():
    assert exploded(1.0, 10.5) and not exploded(1.0, 9.5) and not exploded(0.5, 0.01)
    assert not exploded(float("nan"), 1.0) and not exploded(1.0, float("nan"))


def digits_zero_one() -> tuple[np.ndarray, np.ndarray]:
    """The first 40 digits 0 and 1 of scikit-learn's set (64 pixels in [0, 1]) with targets ±1."""
    x, labels = digits_pool()
    keep = labels < 2
    x, labels = x[keep].reshape(-1, 64)[:40], labels[keep][:40]
    return x, np.where(labels == 1, 1.0, -1.0)[:, None]


def relu_net(seed: int) -> MLP:
    """A bias-free two-layer ReLU net of width 16, standard parameterization, σ = 1."""
    return MLP(64, 16, 2, 1, activation="relu", sigma=1.0, dtype=jnp.float64, key=jax.random.PRNGKey(seed))


def gd_every_step(steps: int, **train) -> TrainSpec:
    return TrainSpec.model_validate({"optimizer": {"name": "gd", "lr": 1.0}, "steps": steps, "dtype": "float64",
                                     "checkpoints": {"spacing": "linear", "count": steps}, **train})


def mse(outputs, y) -> float:
    return float(0.5 * np.mean(np.sum((np.asarray(outputs) - y) ** 2, axis=-1)))


def relu_run(lr: float, seed: int, spec: TrainSpec):
    x, y = digits_zero_one()
    return train(relu_net(seed), x, y, spec, key=jax.random.PRNGKey(1), label="relu", lr_scale=lr,
                 measure=lambda m, i, last: {"loss": mse(jax.vmap(m)(x), y)})


DEAD = (4.0, 0)
"""(lr, seed): the loss goes 0.59 → 1.6·10² → 4.6·10⁹ in two steps, which kill every ReLU: then f = 0."""
CATAPULT = (0.5, 2)
"""(lr, seed): the loss rises 5.3-fold at step 2, then falls back and ends below its initial value."""


def test_a_relu_net_dead_after_a_blow_up_is_diverged():
    x, y = digits_zero_one()
    unchecked = relu_run(*DEAD, gd_every_step(6, divergence_factor=1e300))
    loss = unchecked.series["loss"]
    assert np.all(np.isfinite(loss)) and loss[2] > 1e9 * loss[0]
    assert np.all(np.asarray(jax.vmap(unchecked.model)(x)) == 0)  # every ReLU dead: the output is 0
    np.testing.assert_array_equal(loss[3:], 0.5 * np.mean(y ** 2))  # = 0.5, below L_0: it looks healthy
    assert not unchecked.diverged
    run = relu_run(*DEAD, gd_every_step(6))  # divergence_factor 10⁶: it stops at the blow-up
    assert run.diverged and run.series["loss"][2] == loss[2] and np.isnan(run.series["loss"][3:]).all()
    np.testing.assert_array_equal(run.series["loss"][:3], loss[:3])


def test_a_loss_that_rises_moderately_is_healthy_unless_the_factor_says_so():
    run = relu_run(*CATAPULT, gd_every_step(20))
    loss = run.series["loss"]
    assert not run.diverged and np.all(np.isfinite(loss))
    assert 3 * loss[0] < loss.max() < 10 * loss[0] and loss[-1] < loss[0]
    strict = relu_run(*CATAPULT, gd_every_step(20, divergence_factor=3.0))
    stop = int(np.argmax(loss > 3 * loss[0]))  # the first checkpoint above 3 L_0
    assert strict.diverged and np.isnan(strict.series["loss"][stop + 1:]).all()
    np.testing.assert_array_equal(strict.series["loss"][:stop + 1], loss[:stop + 1])


def test_a_packed_member_dead_after_a_blow_up_diverges_alone():
    x, y = digits_zero_one()
    spec = gd_every_step(6)
    (lr_dead, seed_dead), (lr_ok, seed_ok) = DEAD, CATAPULT
    packed = train_packed([relu_net(seed_dead), relu_net(seed_ok)], [x, x], [y, y], [x, x], spec,
                          keys=[jax.random.PRNGKey(1)] * 2, etas=[lr_dead, lr_ok], lr_scales=[1.0, 1.0],
                          measures=[lambda cp, i, index, last: {"loss": mse(cp["f_train"][i], y)}] * 2)
    unpacked = [relu_run(1.0, seed_dead, gd_every_step(6, optimizer={"name": "gd", "lr": lr_dead})),
                relu_run(1.0, seed_ok, gd_every_step(6, optimizer={"name": "gd", "lr": lr_ok}))]
    assert [t.diverged for t in packed] == [t.diverged for t in unpacked] == [True, False]
    assert np.isnan(packed[0].series["loss"][3:]).all() and np.isfinite(packed[1].series["loss"]).all()
    for p, u in zip(packed, unpacked):
        np.testing.assert_allclose(p.series["loss"], u.series["loss"], rtol=1e-12)


def test_non_finite_parameters_are_diverged_though_the_loss_is_finite():
    """A weight at −∞ into a unit whose inputs are all positive keeps that unit dead (relu(−∞) = 0, zero
    gradient): outputs and loss stay finite while the run trains, but its parameters are not."""
    x, y = digits_zero_one()
    pixel = int(np.argmax(x.min(axis=0)))
    assert x[:, pixel].min() > 0
    model = relu_net(0)
    model = eqx.tree_at(lambda m: m.weights[0], model, model.weights[0].at[0, pixel].set(-jnp.inf))
    spec = gd_every_step(4, optimizer={"name": "gd", "lr": 0.05})
    run = train(model, x, y, spec, key=jax.random.PRNGKey(1), label="inf",
                measure=lambda m, i, last: {"loss": mse(jax.vmap(m)(x), y)})
    healthy = relu_run(1.0, 0, spec)  # the same net without the −∞ weight
    params, rest = trainable(model)  # the weights, not the fixed scalars c_ℓ, κ
    grads = jax.grad(lambda p: 0.5 * jnp.mean((jax.vmap(eqx.combine(p, rest))(x) - y) ** 2))(params)
    stepped = eqx.combine(jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), rest)  # one GD step by hand
    assert np.isfinite(mse(jax.vmap(model)(x), y)) and np.isfinite(mse(jax.vmap(stepped)(x), y))
    assert np.isneginf(stepped.weights[0][0, pixel])
    assert run.diverged and not healthy.diverged
    assert np.isfinite(run.series["loss"][0]) and np.isnan(run.series["loss"][1:]).all()


def test_blew_up_and_the_divergence_factor_is_validated(tmp_path):
    assert blew_up(1.0, 1e6 + 1, 1e6) and not blew_up(1.0, 1e6, 1e6) and blew_up(1.0, float("nan"), 1e6)
    assert blew_up(1.0, float("inf"), 1e300) and not blew_up(0.5, 0.4, 1.01)
    path = tmp_path / "s.yaml"
    path.write_text(HALF_DIVERGE.replace("dtype: float64,", "dtype: float64, divergence_factor: 1,"))
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert err.value.problems == ["line 3: train.divergence_factor: Input should be greater than 1 (got 1)"]
    path.write_text(HALF_DIVERGE.replace("dtype: float64,", "dtype: float64, divergence_factor: 1e12,"))
    study = load_study(path)
    assert study.runs[0].train.divergence_factor == 1e12 and '"divergence_factor":' in study.runs[0].model_dump_json()
    path.write_text(HALF_DIVERGE.replace("dtype: float64,", "dtype: float64, divergence_factor: 1e6,"))
    assert "divergence_factor" not in load_study(path).runs[0].model_dump_json()  # the default: run ids unchanged


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("divergence")
    (work / "specs").mkdir()
    (work / "specs" / "all_diverge.yaml").write_text(ALL_DIVERGE)
    (work / "specs" / "half_diverge.yaml").write_text(HALF_DIVERGE)
    run_snakemake(work)
    return work / "results"


def test_a_study_whose_every_run_diverged_aggregates_and_draws(results):
    ds = open_dataset(results / "all_diverge/all_diverge.zarr")
    assert ds["diverged"].values.tolist() == [[1, 1], [1, 1]]
    assert ds["t_half"].dims == ("seed", "lr") and bool(ds["t_half"].isnull().all())  # recorded as NaN
    assert np.isnan(float(ds["t_half_trend"])) and np.isnan(float(ds["t_half_trend_stderr"]))
    for name in ("t_half", "curves"):
        assert (results / f"all_diverge/figures/{name}.png").stat().st_size > 0
    fig = plot_time_series(ds.load(), CURVES, "every run diverged")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "4 of 4 runs diverged, not drawn:\nseed=0, η=50; seed=0, η=80; …"]
    assert not [line for line in fig.axes[0].get_lines() if len(line.get_xdata())]


def test_exploding_runs_are_diverged_and_a_grid_keeps_its_layout(results):
    ds = open_dataset(results / "half_diverge/half_diverge.zarr")
    assert ds["loss"].dims == ("seed", "lr", "time") and "run" not in ds.dims
    assert ds["diverged"].values.tolist() == [[0, 1], [0, 1]]
    for seed in (0, 1):  # flagged by the blow-up, not an overflow: the run stopped at its first checkpoint past it
        loss = ds["loss"].sel(lr=3.0, seed=seed).dropna("time").values
        assert len(loss) < 5 and loss[-1] > 1e6 * loss[0] and np.all(loss[:-1] <= 1e6 * loss[0])
    change = ds["relative_kernel_change"]  # a final measurement: NaN for the runs that stopped
    assert np.isnan(change.sel(lr=3.0).values).all() and np.isfinite(change.sel(lr=0.05).values).all()


@pytest.mark.computes("figure:time_series")
def test_time_series_y_range_comes_from_the_runs_that_did_not_diverge(results):
    ds = open_dataset(results / "half_diverge/half_diverge.zarr").load()
    fig = plot_time_series(ds, CURVES, "half diverged")
    only_stable = plot_time_series(ds.sel(lr=[0.05]), CURVES, "stable runs")
    ax, ref = fig.axes[0], only_stable.axes[0]
    assert ax.get_ylim() == ref.get_ylim() and ax.get_ylim()[1] < 1.0
    [line] = [line for line in ax.get_lines() if len(line.get_xdata())]
    np.testing.assert_allclose(line.get_ydata(), ds["loss"].sel(lr=0.05).mean("seed").dropna("time").values)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [NOTE, "mean ± sd over 2 seeds (band)"]
    assert [t.get_text() for t in ref.get_legend().get_texts()] == ["mean ± sd over 2 seeds (band)"]


@pytest.mark.computes("figure:sweep")
def test_sweep_means_leave_diverged_runs_out(results):
    ds = open_dataset(results / "half_diverge/half_diverge.zarr").load()
    spec = SweepFigure.model_validate({"name": "final_loss", "kind": "sweep", "x": "lr", "y": "loss",
                                       "logx": True, "logy": True})
    ax = plot_sweep(ds, spec, "final loss").axes[0]
    mean, dots = ax.get_lines()[0], ax.get_lines()[1]
    assert mean.get_xdata().tolist() == [0.05]
    final = ds["loss"].sel(lr=0.05).dropna("time").isel(time=-1)  # each seed's loss after its 4 steps
    np.testing.assert_allclose(mean.get_ydata(), [float(final.mean())])
    assert np.isnan(np.asarray(dots.get_ydata())[np.asarray(dots.get_xdata()) == 3.0]).all()
    assert ax.get_ylim()[1] < 1.0
    assert NOTE in [t.get_text() for t in ax.get_legend().get_texts()]
