"""The study table of real tiny studies of every sweep shape (none, product, zip, union, cases):
one row per sweep point without seed, each the mean over seeds of the run stores' values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from ntkpipe.jobs.aggregate import aggregate_study
from ntkpipe.jobs.table import study_table, sweep_table
from ntkpipe.report import table_caption, table_rows
from tests.conftest import run_study_jobs

BASE = """\
data: {source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}
model: {depth: 2, width: 8, activation: linear, sigma: 0.5}
train: {optimizer: {name: gd, lr: 0.1}, max_time: 2, checkpoints: {per_decade: 3}}
measure: [loss, weight_norm]
summaries:
  - {name: loss_ends, kind: endpoints, y: loss}
"""

SWEEPS = {
    "none": "",
    "product": "sweep: {sigma: [0.3, 0.6], seed: [0, 1]}\n",
    "zip": "sweep: {zip: {sigma: [0.3, 0.6], width: [4, 8]}}\n",
    "union": "sweep:\n  union:\n    - {depth: [2], sigma: [0.3, 0.6]}\n    - {depth: [3], sigma: [0.5]}\n",
    "cases": "sweep:\n  cases:\n    act:\n      linear: {}\n      relu: {model: {activation: relu}}\n",
}


@pytest.mark.parametrize("shape", SWEEPS)
def test_table_has_the_seed_mean_of_every_sweep_point(shape, tmp_path):
    plan, stores = run_study_jobs(BASE + SWEEPS[shape], tmp_path)
    aggregate_study(plan, plan.dataset_path)
    table = pd.read_csv(study_table(plan, tmp_path / "table.csv"), index_col=list(range(max(
        1, len([a for a in plan.study.axes if a != "seed"])))))
    expected: dict[tuple, list] = {}
    for key, store in stores.items():
        point = dict(zip(plan.study.axes, key))
        expected.setdefault(tuple(v for a, v in point.items() if a != "seed"), []).append(store)
    assert len(table) == len(expected) == table_rows(plan)
    assert f"({len(expected)} row{'s' if len(expected) > 1 else ''})" in table_caption(plan)
    assert {"diverged", "weight_norm", "weight_norm_init", "loss_final"} <= set(table.columns)
    assert not {"loss", "loss_ends", "seconds_train"} & set(table.columns)  # series (their final values are), summaries, timings
    rows = table.to_dict("index")
    for point, runs in expected.items():
        row = rows[point if len(point) > 1 else point[0] if point else 0]
        for name in ("weight_norm", "weight_norm_init", "diverged"):
            np.testing.assert_allclose(row[name], np.mean([float(run[name]) for run in runs]), rtol=1e-3)


def test_a_long_sweep_keeps_every_row():
    """60 σ values × 2 seeds: 60 rows (no truncation), in sweep order, each the mean over seeds."""
    sigma = np.geomspace(0.01, 1.0, 60)
    values = np.random.default_rng(0).standard_normal((60, 2))
    ds = xr.Dataset({"t_half": (("sigma", "seed"), values), "loss": (("sigma", "seed", "time"), np.zeros((60, 2, 3)))},
                    coords={"sigma": sigma, "seed": [0, 1]})
    table = sweep_table(ds, ["sigma", "seed"])
    assert table.index.tolist() == sigma.tolist() and table.columns.tolist() == ["t_half", "loss_final"]
    np.testing.assert_allclose(table["t_half"].values, values.mean(1))


def test_the_table_keeps_string_columns_and_the_final_value_of_each_series():
    """phase_diagram's predicted and measured phases (strings) and the final test accuracy (the last
    finite time of a series, averaged over seeds) are columns; run ids are not."""
    accuracy = np.array([[[0.5, 0.8, np.nan], [0.5, 0.7, 0.9]], [[0.4, 0.6, 0.7], [0.5, 0.5, 0.5]]])
    ds = xr.Dataset({"predicted_phase": (("d", "seed"), [["kernel", "kernel"], ["rich", "rich"]]),
                     "measured_phase": (("d", "seed"), [["kernel", "rich"], ["rich", "rich"]]),
                     "run_id": (("d", "seed"), [["a", "b"], ["c", "d"]]),
                     "test_accuracy": (("d", "seed", "time"), accuracy)},
                    coords={"d": [1.0, 4.0], "seed": [0, 1], "time": [0.0, 1.0, 2.0]})
    table = sweep_table(ds, ["d", "seed"])
    assert table["predicted_phase"].tolist() == ["kernel", "rich"]
    assert table["measured_phase"].tolist() == ["kernel / rich", "rich"]
    np.testing.assert_allclose(table["test_accuracy_final"].values, [(0.8 + 0.9) / 2, (0.7 + 0.5) / 2])
    assert "run_id" not in table.columns


def test_a_variable_with_one_short_dimension_gets_a_column_per_value():
    """nad_tasks' Stein check (stein_relerr over the test vectors v1…v3 and a random one) is in the
    table, one column per test vector; a variable with a long dimension of its own is not."""
    relerr = np.array([[0.017, 0.040, 0.043, 0.063], [0.030, 0.028, 0.012, 0.065]])
    ds = xr.Dataset({"stein_relerr": (("architecture", "stein_vector"), relerr),
                     "spectrum": (("architecture", "k"), np.ones((2, 20)))},
                    coords={"architecture": ["mlp", "lenet"], "stein_vector": [1, 2, 3, 4]})
    table = sweep_table(ds, ["architecture"])
    names = [f"stein_relerr[stein_vector={v}]" for v in ("v1", "v2", "v3", "random")]
    assert table.columns.tolist() == names
    np.testing.assert_allclose(table[names].values, relerr)
