"""Diverged runs end to end: detection (non-finite or exploding loss, down to one step), aggregation of
a study whose every run diverged, and figures that leave diverged runs out and say so."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe import open_dataset
from ntkpipe.models import MLP
from ntkpipe.plots import plot_sweep, plot_time_series
from ntkpipe.spec.schema import SweepFigure, TimeSeriesFigure, TrainSpec
from ntkpipe.train import train
from ntkpipe.train.loop import EXPLOSION_FACTOR, exploded
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
# lr = 3 multiplies the loss by ~10¹¹ per step: finite (float64) after 4 steps, but exploding
HALF_DIVERGE = BASE + """\
train: {optimizer: {name: gd, lr: 0.05}, steps: 4, dtype: float64, checkpoints: {spacing: linear, count: 4}}
measure: [loss, alignment]
sweep: {seed: [0, 1], lr: [0.05, 3.0]}
figures:
  - {name: final_loss, kind: sweep, x: lr, y: loss, logx: true, logy: true}
  - {name: curves, kind: time_series, variables: [loss], logy: [loss]}
"""
CURVES = TimeSeriesFigure.model_validate({"name": "curves", "kind": "time_series", "variables": ["loss"],
                                          "logx": False, "logy": ["loss"]})
NOTE = "2 of 4 runs diverged, not drawn"


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
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["4 of 4 runs diverged, not drawn"]
    assert not [line for line in fig.axes[0].get_lines() if len(line.get_xdata())]


def test_exploding_runs_are_diverged_and_a_grid_keeps_its_layout(results):
    ds = open_dataset(results / "half_diverge/half_diverge.zarr")
    assert ds["loss"].dims == ("seed", "lr", "time") and "run" not in ds.dims
    assert ds["diverged"].values.tolist() == [[0, 1], [0, 1]]
    last = ds["loss"].sel(lr=3.0).isel(time=-1).values
    assert np.all(np.isfinite(last)) and np.all(last > 1e20)  # flagged by the explosion, not an overflow


@pytest.mark.computes("figure:time_series")
def test_time_series_y_range_comes_from_the_runs_that_did_not_diverge(results):
    ds = open_dataset(results / "half_diverge/half_diverge.zarr").load()
    fig = plot_time_series(ds, CURVES, "half diverged")
    only_stable = plot_time_series(ds.sel(lr=[0.05]), CURVES, "stable runs")
    ax, ref = fig.axes[0], only_stable.axes[0]
    assert ax.get_ylim() == ref.get_ylim() and ax.get_ylim()[1] < 1.0
    [line] = [line for line in ax.get_lines() if len(line.get_xdata())]
    np.testing.assert_allclose(line.get_ydata(), ds["loss"].sel(lr=0.05).mean("seed").dropna("time").values)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [NOTE]
    assert ref.get_legend() is None


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
