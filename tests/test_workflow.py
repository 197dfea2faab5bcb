"""End to end through Snakemake's Python API in a temporary directory: both DAG shapes (plain
sweep; NTK Gram → eigendecomposition → training), incremental reruns, variants, bad specs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ntkpipe.jobs.plot import draw_figure
from ntkpipe.plots.checks import figure_defects
from ntkpipe.workflow import build_index
from tests.conftest import run_snakemake

pytestmark = pytest.mark.workflow

SCALING = """\
description: Tiny depth scaling
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 60
  checkpoints: {per_decade: 10}
measure: [loss, alignment, first_layer_alignment, t_half, t_align, t_half_theory]
sweep:
  sigma: [0.1, 0.15]
figures:
  - {name: t_half, kind: sweep, x: sigma, y: t_half, theory: t_half_theory, logx: true, logy: true}
  - {name: curves, kind: time_series, variables: [loss, alignment], hue: sigma}
variants:
  paper:
    sweep: {sigma: [0.1, 0.15, 0.2]}
"""

EIGEN = """\
data:
  source: digits
  n_train: 60
  n_test: 40
  labels: {kind: eigenvector_sign, stage: eig, eigen_index: 2}
model: {depth: 2, width: 16, activation: relu, sigma: 1.4, bias: true}
train:
  optimizer: {name: sgd, lr: 0.05, momentum: 0.9, schedule: linear_decay}
  loss: bce
  batch_size: 32
  epochs: 3
  checkpoints: {spacing: linear, count: 3}
stages:
  gram: {compute: ntk_gram}
  eig: {compute: eigendecomposition, input: gram, top_k: 10}
measure: [loss, test_accuracy, eigenvalue, alignment_init]
sweep:
  model_kind: [network, linearized]
  eigen_index: [2, 3]
figures:
  - {name: accuracy, kind: sweep, x: eigen_index, y: test_accuracy, hue: model_kind}
"""


SILENT = """\
data: {source: digits, classes: [0, 1], n_train: 40, n_test: 20, gamma: 0.0}
model: {depth: 2, width: 16, activation: relu, sigma: 0.05}
train:
  optimizer: {name: gd, lr: 0.1}
  max_time: 20
  checkpoints: {per_decade: 5}
measure: [loss, kernel_norm, alignment, alignment_theory, kernel_predictors, input_spectrum]
sweep:
  cases:
    dataset:
      digits: {}
      synthetic: {data: {source: linear_teacher, classes: null, dim: 8}}
figures:
  - {name: dynamics, kind: time_series, variables: [loss, kernel_norm, alignment], overlay: true,
     normalize: {loss: initial, kernel_norm: final}, theory: {alignment: alignment_theory}, col: dataset}
  - {name: predictions, kind: scatter, x: prediction_network, y: [prediction_final_ntk, prediction_init_ntk],
     col: dataset}
  - {name: spectra, kind: sweep, x: spectrum_index, y: input_spectrum, hue: dataset, logy: true}
"""


def _kinds(updated: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"runs": [], "stages": [], "datasets": [], "tables": [], "figures": [], "indexes": []}
    for path in updated:
        parts = Path(path).parts
        if parts[1] == "runs":
            out["runs"].append(path)
        elif parts[1] == "stages":
            out["stages"].append(path)
        elif parts[-2] == "figures":
            out["figures"].append(path)
        elif path.endswith("_summary.csv"):
            out["tables"].append(path)
        elif path.endswith("/index.md"):
            out["indexes"].append(path)
        else:
            out["datasets"].append(path)
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("study")
    (work / "specs").mkdir()
    (work / "specs" / "tiny_scaling.yaml").write_text(SCALING)
    (work / "specs" / "tiny_eigen.yaml").write_text(EIGEN)
    (work / "specs" / "tiny_silent.yaml").write_text(SILENT)
    return work


@pytest.fixture(scope="module")
def first_run(workdir) -> dict[str, list[str]]:
    return _kinds(run_snakemake(workdir))


def test_first_run_makes_every_job(first_run):
    assert len(first_run["runs"]) == 2 + 4 + 2
    assert len(first_run["stages"]) == 2  # one Gram and one eigendecomposition shared by 4 runs
    assert sorted(first_run["datasets"]) == ["results/tiny_eigen/tiny_eigen.zarr",
                                             "results/tiny_scaling/tiny_scaling.zarr",
                                             "results/tiny_silent/tiny_silent.zarr"]
    assert len(first_run["figures"]) == 3 + 3
    assert sorted(first_run["tables"]) == [f"results/{t}/{t}_summary.csv" for t in ("tiny_eigen", "tiny_scaling", "tiny_silent")]
    assert sorted(first_run["indexes"]) == [f"results/{t}/index.md" for t in ("tiny_eigen", "tiny_scaling", "tiny_silent")]


@pytest.mark.computes("t_half", "t_half_theory", "source:linear_teacher", "activation:linear")
def test_scaling_dataset_contents(workdir, first_run):
    ds = xr.open_zarr(workdir / "results/tiny_scaling/tiny_scaling.zarr")
    assert ds["t_half"].dims == ("sigma",) and ds["loss"].dims == ("sigma", "time")
    t_half, theory = ds["t_half"].values, ds["t_half_theory"].values
    assert np.all(np.isfinite(t_half)) and t_half[0] > t_half[1]  # smaller σ learns later
    # the ODE's σ-scaling matches the simulation (its offset depends on c₀'s approximation)
    np.testing.assert_allclose(t_half[0] / t_half[1], theory[0] / theory[1], rtol=0.05)
    np.testing.assert_allclose(t_half, theory, rtol=0.4)
    assert ds.attrs["ntkpipe_version"] and "sigma" in ds.attrs["config"]
    run = xr.open_zarr(workdir / "results/runs" / f"{ds['run_id'].values[0]}.zarr")
    assert '"sigma":0.1' in run.attrs["config"].replace(" ", "")


@pytest.mark.computes("eigenvalue", "alignment_init", "stage:ntk_gram", "stage:eigendecomposition",
                      "model_kind:linearized", "source:digits")
def test_eigen_dataset_alignment_is_eigenvalue(workdir, first_run):
    ds = xr.open_zarr(workdir / "results/tiny_eigen/tiny_eigen.zarr")
    assert set(ds["test_accuracy"].dims) >= {"model_kind", "eigen_index"}
    np.testing.assert_allclose(ds["alignment_init"].values, ds["eigenvalue"].values, rtol=1e-5)
    lam = ds["eigenvalue"].sel(model_kind="network").values
    assert lam[0] > lam[1] > 0


@pytest.mark.computes("kernel_predictors", "input_spectrum", "source:digits")
def test_case_axis_and_per_point_arrays(workdir, first_run):
    ds = xr.open_zarr(workdir / "results/tiny_silent/tiny_silent.zarr")
    assert ds["dataset"].values.tolist() == ["digits", "synthetic"]
    assert ds["prediction_network"].dims == ("dataset", "test_point", "output")
    spectrum = ds["input_spectrum"].sel(dataset="synthetic").values
    np.testing.assert_allclose(spectrum[np.isfinite(spectrum)], 1.0, rtol=1e-10)  # whitened: XᵀX/P = I
    assert np.all(ds["pred_relerr_final"].values < ds["pred_relerr_init"].values)


def test_every_variable_and_coordinate_is_described(workdir, first_run):
    from ntkpipe.measure.registry import TIME_UNITS

    for tag in ("tiny_scaling", "tiny_eigen", "tiny_silent"):
        ds = xr.open_zarr(workdir / f"results/{tag}/{tag}.zarr")
        for name in [*ds.data_vars, *ds.coords]:
            assert ds[name].attrs.get("long_name") and ds[name].attrs.get("description"), (tag, name)
        assert ds["time"].attrs["units"] == TIME_UNITS == "gradient-flow time t = η₀·step"
        assert ds.attrs["study"] == tag and ds.attrs["variant"] == "default" and ds.attrs["created"]
        run = xr.open_zarr(workdir / "results/runs" / f"{ds['run_id'].values.ravel()[0]}.zarr")
        for name in [*run.data_vars, *run.coords]:
            assert run[name].attrs.get("long_name") and run[name].attrs.get("description"), (tag, "run", name)
    ds = xr.open_zarr(workdir / "results/tiny_scaling/tiny_scaling.zarr")
    assert ds["t_half"].attrs["units"] == TIME_UNITS and ds["t_half"].attrs["long_name"] == "t½"
    assert ds["sigma"].attrs["long_name"] == "init scale σ" and "model.sigma" in ds["sigma"].attrs["description"]
    assert "deep linear net" in ds["t_half_theory"].attrs["assumptions"]
    assert ds["seconds_job"].attrs["units"] == "s"
    assert json.loads(ds.attrs["run_versions"])  # the runs' versions (their ntkpipe_version without them)


@pytest.mark.computes("t_half_theory", "alignment_theory")
def test_theory_residual_is_the_relative_error(workdir, first_run):
    ds = xr.open_zarr(workdir / "results/tiny_scaling/tiny_scaling.zarr")
    t_half, theory = ds["t_half"].values, ds["t_half_theory"].values
    np.testing.assert_allclose(ds["t_half_theory_residual"].values, (theory - t_half) / np.abs(t_half), rtol=1e-12)
    assert ds["t_half_theory_residual"].attrs["theory_of"] == "t_half"
    silent = xr.open_zarr(workdir / "results/tiny_silent/tiny_silent.zarr")
    final = silent["alignment"].isel(time=-1).values
    np.testing.assert_allclose(silent["alignment_theory_residual"].values,
                               (silent["alignment_theory"].values - final) / np.abs(final), rtol=1e-12)


def test_show_prints_time_series(workdir, first_run, capsys):
    from ntkpipe.cli import main

    assert main(["show", str(workdir / "results/tiny_scaling/tiny_scaling.zarr")]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("loss — training loss: "))
    assert re.search(r": [▁▂▃▄▅▆▇█]{20,24} \(log\)  range \[", line), line
    ds = xr.open_zarr(workdir / "results/tiny_scaling/tiny_scaling.zarr")
    final = ds["loss"].isel(time=-1).values
    assert line.endswith(f"final sigma=0.1 {final[0]:.4g}; sigma=0.15 {final[1]:.4g}")
    assert "t = 0 … 60 [gradient-flow time t = η₀·step]" in out
    assert "first_layer_alignment — cos(W₁ᵀW₁, ββᵀ): " in out


@pytest.mark.computes("figure:sweep", "figure:time_series", "figure:scatter")
def test_figures_of_the_first_run_have_no_defects(workdir, first_run):
    """Every figure the workflow drew (sweeps over σ and over the integer eigen_index, time series,
    overlays, scatter) passes the figure checks; untitled figures carry the study's description."""
    index = build_index(workdir / "specs", workdir / "results")
    for tag, plan in index.plans.items():
        for name in plan.figure_paths:
            fig = draw_figure(plan, name)
            assert figure_defects(fig) == [], f"{tag}/{name}"
            if tag == "tiny_scaling":
                assert fig.texts[0].get_text() == "Tiny depth scaling"


def test_rerun_without_change_does_nothing(workdir, first_run):
    assert run_snakemake(workdir) == []


def test_one_more_sweep_value_runs_only_the_new_run(workdir, first_run):
    spec = workdir / "specs" / "tiny_scaling.yaml"
    spec.write_text(SCALING.replace("sigma: [0.1, 0.15]\nfigures", "sigma: [0.1, 0.15, 0.12]\nfigures"))
    changed = _kinds(run_snakemake(workdir))
    assert len(changed["runs"]) == 1 and changed["stages"] == []
    assert changed["datasets"] == ["results/tiny_scaling/tiny_scaling.zarr"]
    assert sorted(changed["figures"]) == ["results/tiny_scaling/figures/curves.png",
                                          "results/tiny_scaling/figures/t_half.png"]
    ds = xr.open_zarr(workdir / "results/tiny_scaling/tiny_scaling.zarr")
    assert ds["sigma"].values.tolist() == [0.1, 0.12, 0.15]


def test_figure_edit_reruns_no_run(workdir, first_run):
    """A figure edit rewrites the dataset (its stored spec) and so redraws the study's figures; no run."""
    spec = workdir / "specs" / "tiny_scaling.yaml"
    spec.write_text(spec.read_text().replace("hue: sigma}", "hue: sigma, logx: false}"))
    assert run_snakemake(workdir) == ["results/tiny_scaling/figures/curves.png",
                                      "results/tiny_scaling/figures/t_half.png",
                                      "results/tiny_scaling/index.md",
                                      "results/tiny_scaling/tiny_scaling.zarr",
                                      "results/tiny_scaling/tiny_scaling_summary.csv"]


def test_title_and_description_edits_keep_the_stored_spec_current(workdir, first_run):
    spec = workdir / "specs" / "tiny_silent.yaml"
    dataset = workdir / "results/tiny_silent/tiny_silent.zarr"
    figures = [f"results/tiny_silent/figures/{f}.png" for f in ("dynamics", "predictions", "spectra")]
    spec.write_text("description: Silent alignment, tiny\n" + spec.read_text().replace(
        "col: dataset}\n  - {name: spectra", "col: dataset, title: Tiny predictions}\n  - {name: spectra"))
    assert run_snakemake(workdir) == figures + ["results/tiny_silent/index.md", "results/tiny_silent/tiny_silent.zarr",
                                                "results/tiny_silent/tiny_silent_summary.csv"]
    stored = json.loads(xr.open_zarr(dataset).attrs["study_spec"])
    assert stored["description"] == "Silent alignment, tiny"
    assert [f["title"] for f in stored["figures"]] == [None, "Tiny predictions", None]


def test_variant_reuses_identical_runs(workdir, first_run):
    changed = _kinds(run_snakemake(workdir, config={"variant": "paper", "studies": "tiny_scaling"}))
    assert len(changed["runs"]) == 1  # σ = 0.2; σ = 0.1 and 0.15 are the default variant's runs
    assert changed["datasets"] == ["results/tiny_scaling-paper/tiny_scaling-paper.zarr"]


def test_invalid_spec_stops_before_anything_is_written(workdir, first_run, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(workdir / "specs", bad / "specs")
    (bad / "specs" / "tiny_scaling.yaml").write_text(SCALING.replace("width: 8", "widht: 8"))
    with pytest.raises(Exception, match=r"line 3: model.widht: unknown key \(did you mean 'width'\?\)"):
        run_snakemake(bad)
    assert not (bad / "results").exists()
