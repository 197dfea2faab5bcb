"""A union sweep stored per run (no NaN holes), selected and summarized per sub-grid, and drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ntkpipe import open_dataset
from ntkpipe.errors import ResultError
from ntkpipe.lang.schema import SweepFigure, TimeSeriesFigure
from ntkpipe.layout import index_runs, is_full_grid, sub_grid
from ntkpipe.plots.sweep import plot_sweep
from ntkpipe.plots.time_series import plot_time_series
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from tests.conftest import run_snakemake

UNION = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 40
  checkpoints: {per_decade: 6}
measure: [loss, t_half]
sweep:
  seed: [0, 1]
  union:
    - {depth: [2], sigma: [0.05, 0.1]}
    - {depth: [3], sigma: [0.1, 0.2]}
summaries:
  - {name: t_half_exponent, kind: power_law, x: sigma, y: t_half, by: depth}
figures:
  - {name: t_half, kind: sweep, x: sigma, y: t_half, hue: depth, logx: true, logy: true}
  - {name: curves, kind: time_series, variables: [loss], hue: sigma, col: depth, logy: [loss]}
"""
SIGMAS = {2: [0.05, 0.1], 3: [0.1, 0.2]}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The plan of the tiny union study, its dataset path and each run's t½ read from its own store."""
    work = tmp_path_factory.mktemp("union")
    (work / "specs").mkdir()
    (work / "specs" / "tiny_union.yaml").write_text(UNION)
    run_snakemake(work)
    plan = plan_study(load_study(work / "specs" / "tiny_union.yaml"), work / "results")
    t_half = {(p["seed"], p["depth"], p["sigma"]): float(xr.open_zarr(job.path)["t_half"])
              for job, p in zip(plan.runs, plan.study.points)}
    return plan, work / "results/tiny_union/tiny_union.zarr", t_half


def test_union_is_stored_along_run_without_holes(study):
    plan, path, _ = study
    assert not is_full_grid(plan.study.axes, plan.study.points)
    ds = xr.open_zarr(path)  # as stored: plain coordinates along run, no index
    assert dict(ds.sizes) == {"run": 8, "time": ds.sizes["time"]} and "run" not in ds.variables
    assert ds["t_half"].dims == ("run",) and bool(ds["t_half"].notnull().all())
    assert ds["run_id"].values.tolist() == [job.id for job in plan.runs]
    for axis in ("seed", "depth", "sigma"):
        assert ds[axis].values.tolist() == [p[axis] for p in plan.study.points]


def test_selecting_a_sub_grid_gives_its_runs_and_no_nan(study):
    _, path, t_half = study
    ds = open_dataset(path)
    assert all(ds[name].attrs.get("long_name") and ds[name].attrs.get("description") for name in [*ds.variables])
    for depth, sigmas in SIGMAS.items():
        sub = ds.sel(depth=depth)
        assert sub["t_half"].sizes == {"run": 4} and bool(sub["t_half"].notnull().all())
        assert bool((sub["run_id"] != "").all())
        grid = sub["t_half"].unstack("run").transpose("seed", "sigma")
        assert grid["sigma"].values.tolist() == sigmas
        expected = [[t_half[(seed, depth, s)] for s in sigmas] for seed in (0, 1)]
        np.testing.assert_array_equal(grid.values, expected)
        np.testing.assert_array_equal(sub_grid(ds, {"depth": depth})["t_half"].values, expected)


@pytest.mark.computes("summary:power_law", "t_half")
def test_summary_is_the_fit_over_its_sub_grid(study):
    _, path, t_half = study
    ds = open_dataset(path)
    exponents = ds["t_half_exponent"].groupby("depth").first()
    for depth, sigmas in SIGMAS.items():
        x = np.log([s for s in sigmas for _ in (0, 1)])
        y = np.log([t_half[(seed, depth, s)] for s in sigmas for seed in (0, 1)])
        assert float(exponents.sel(depth=depth)) == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-10)
        assert np.unique(ds["t_half_exponent"].sel(depth=depth).values).size == 1  # one value per group


@pytest.mark.computes("figure:sweep", "figure:time_series")
def test_figures_draw_each_sub_grid(study):
    _, path, t_half = study
    assert {p.name for p in (path.parent / "figures").glob("*.png")} == {"t_half.png", "curves.png"}
    ds = open_dataset(path).load()
    spec = SweepFigure.model_validate({"name": "t", "kind": "sweep", "x": "sigma", "y": "t_half", "hue": "depth"})
    ax = plot_sweep(ds, spec, "t½").axes[0]
    means = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    for line, (depth, sigmas) in zip(means, SIGMAS.items()):
        assert line.get_xdata().tolist() == sigmas
        np.testing.assert_allclose(line.get_ydata(), [np.mean([t_half[(seed, depth, s)] for seed in (0, 1)])
                                                      for s in sigmas])
    curves = TimeSeriesFigure.model_validate({"name": "c", "kind": "time_series", "variables": ["loss"],
                                              "hue": "sigma", "col": "depth"})
    fig = plot_time_series(ds, curves, "loss")
    drawn = [[line.get_label() for line in ax.get_lines()  # the seed bands' and t = 0 markers' artists aside
              if not line.get_label().startswith("_") and "left edge" not in line.get_label()] for ax in fig.axes[:2]]
    assert drawn == [["σ = 0.05", "σ = 0.1"], ["σ = 0.1", "σ = 0.2"]]


def test_sub_grid_keeps_label_order_and_marks_holes():
    """A selection that is not a full product leaves NaN holes with run id "" (like a grid dataset)."""
    ds = xr.Dataset({"v": ("run", [1.0, 2.0, 3.0]), "run_id": ("run", ["a", "b", "c"])},
                    coords={"task": ("run", ["rotation", "table", "rotation"]), "j": ("run", [2, 0, 5])})
    grid = sub_grid(index_runs(ds))
    assert grid["task"].values.tolist() == ["rotation", "table"] and grid["j"].values.tolist() == [0, 2, 5]
    np.testing.assert_array_equal(grid["v"].values, [[np.nan, 1.0, 3.0], [2.0, np.nan, np.nan]])
    assert grid["run_id"].values.tolist() == [["", "a", "c"], ["b", "", ""]]
    twice = ds.assign_coords(j=("run", [2, 2, 2]), task=("run", ["rotation", "rotation", "table"]))
    with pytest.raises(ResultError, match=r"x.zarr: two runs share the axis values .*'rotation'.*; delete it"):
        index_runs(twice, Path("x.zarr"))


def test_show_names_the_layout_and_its_index(study, capsys):
    from ntkpipe.cli import main

    _, path, _ = study
    assert main(["show", str(path)]) == 0
    assert ("8 runs along 'run' (a union of sub-grids), indexed by (depth, seed, sigma): select a sub-grid with "
            "ds.sel(depth=...), its grid with .unstack('run')") in capsys.readouterr().out
