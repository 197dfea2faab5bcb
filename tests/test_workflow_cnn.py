"""Tiny convolutional studies end to end through Snakemake: every stage kind (Gram →
eigendecomposition, NADs, pretraining) feeding CNN and MLP runs, kernel-rotation measurements and
the new figure kinds, checked against what the math says they must give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ntkpipe import open_dataset
from ntkpipe.jobs.plot import draw_figure
from ntkpipe.plots.checks import figure_defects
from ntkpipe.workflow import build_index
from tests.conftest import run_snakemake

pytestmark = pytest.mark.workflow

TINY_CNN = "{architecture: cnn, conv: [{channels: 3, kernel_size: 3, pool: avg}], dense: [8], sigma: 1.4, bias: true}"

ROTATION = f"""\
data:
  source: digits
  n_train: 48
  n_test: 24
  labels: {{kind: two_groups}}
model: {TINY_CNN}
train:
  optimizer: {{name: sgd, lr: 0.05, momentum: 0.9}}
  loss: bce
  batch_size: 16
  epochs: 4
  checkpoints: {{spacing: linear, count: 4}}
stages:
  gram: {{compute: ntk_gram}}
  eig: {{compute: eigendecomposition, input: gram, top_k: 12}}
  pre: {{compute: pretrain}}
measure: [loss, test_accuracy, {{name: energy_concentration, top_k: 5, subset: 30}}, {{name: rotation, top_k: 12}},
          param_distance, steps_to_threshold]
sweep:
  union:
    - cases: {{task: {{two_groups: {{}}}}}}
      model_kind: [network]
    - cases: {{task: {{eigenfunction: {{data: {{labels: {{kind: eigenvector_sign, stage: eig}}}}}}}}}}
      eigen_index: [2, 3]
      model_kind: [network, linearized]
    - cases: {{task: {{pretrained: {{data: {{labels: {{kind: eigenvector_sign, stage: eig}}}},
                                    model: {{origin: {{stage: pre}}}}}}}}}}
      eigen_index: [3]
      model_kind: [linearized]
      pretrain_epochs: [0, 2]
summaries:
  - {{name: energy_table, kind: endpoints, y: energy_concentration}}
figures:
  - {{name: energy, kind: sweep, x: checkpoint, y: energy_table, where: {{task: two_groups}}}}
  - {{name: rotation, kind: sweep, x: eigenfunction, y: rotation, hue: model_kind, where: {{task: eigenfunction, eigen_index: 3, pretrain_epochs: 0}}, logy: true}}
  - {{name: pretrained, kind: sweep, x: pretrain_epochs, y: test_accuracy, where: {{task: pretrained}},
     reference: {{task: eigenfunction, eigen_index: 3, model_kind: network}}}}
"""

NADS = f"""\
data:
  source: nad
  shape: [4, 4, 1]
  n_train: 64
  n_test: 64
  directions: {{stage: nads, nad_index: 1}}
model: {{depth: 2, width: 16, activation: gelu, bias: true}}
train:
  optimizer: {{name: sgd, lr: 0.05}}
  loss: bce
  batch_size: 32
  epochs: 3
  checkpoints: {{spacing: linear, count: 2}}
stages:
  nads: {{compute: nad, stein_samples: 2048, stein_vectors: 2}}
measure: [loss, test_accuracy, nad_alignment, stein_check, {{name: nad_directions, count: 4}}]
sweep:
  nad_index: [1, 8, 16]
  model_kind: [network, linearized]
  cases:
    architecture:
      mlp: {{}}
      cnn: {{model: {TINY_CNN.replace("sigma: 1.4, bias: true", "activation: gelu, sigma: 1.4, bias: true")}}}
figures:
  - {{name: accuracy, kind: sweep, x: nad_index, y: test_accuracy, hue: model_kind, where: {{architecture: cnn}}}}
  - {{name: nads, kind: images, variable: nad_directions, rows: architecture, count: 4}}
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("cnn_study")
    (work / "specs").mkdir()
    (work / "specs" / "tiny_rotation.yaml").write_text(ROTATION)
    (work / "specs" / "tiny_nads.yaml").write_text(NADS)
    run_snakemake(work)
    return work


@pytest.mark.computes("stage:ntk_gram", "stage:eigendecomposition", "stage:nad", "stage:pretrain")
def test_every_stage_kind_ran_and_every_figure_exists(workdir):
    stages = {p.parent.name for p in (workdir / "results/stages").glob("*/*.zarr")}
    assert stages == {"ntk_gram", "eigendecomposition", "nad", "pretrain"}
    figures = sorted(p.name for p in (workdir / "results").glob("*/figures/*.png"))
    assert figures == ["accuracy.png", "energy.png", "nads.png", "pretrained.png", "rotation.png"]


@pytest.mark.computes("rotation", "energy_concentration", "param_distance", "summary:endpoints", "architecture:cnn",
                      "model_kind:linearized", "stage:eigendecomposition", "source:digits", "loss:bce", "optimizer:sgd")
def test_rotation_study(workdir):
    """A union of sub-grids is stored along ``run`` (no holes); open_dataset indexes it by its axes."""
    ds = open_dataset(workdir / "results/tiny_rotation/tiny_rotation.zarr")
    assert ds["rotation"].dims == ("run", "eigenfunction") and ds.sizes["run"] == 7
    assert set(ds.indexes["run"].names) == {"task", "eigen_index", "model_kind", "pretrain_epochs"}
    assert ds["eigenfunction"].values.tolist() == list(range(1, 13))
    # A linearization's Jacobian never moves: α_T(φ_i) = α_0(φ_i) = λ_i for every i.
    lin = ds["rotation"].sel(task="eigenfunction", model_kind="linearized", pretrain_epochs=0)
    assert lin.dims == ("eigen_index", "eigenfunction") and lin["eigen_index"].values.tolist() == [2, 3]
    np.testing.assert_allclose(lin.values, 1.0, rtol=1e-4)
    net = ds["rotation"].sel(task="eigenfunction", model_kind="network", pretrain_epochs=0).values
    assert np.all(np.isfinite(net)) and np.abs(net - 1).max() > 1e-3  # the network's kernel rotates
    table = ds["energy_table"].sel(task="two_groups", eigen_index=0, model_kind="network", pretrain_epochs=0)
    assert table["checkpoint"].values.tolist() == ["init", "end"]
    assert np.all((table.values > 0) & (table.values <= 1))
    assert float(ds["param_distance"].sel(task="eigenfunction", model_kind="network").max()) > 0


@pytest.mark.computes("stage:pretrain", "rotation", "model_kind:linearized")
def test_linearization_around_the_untrained_network_is_the_centered_init_linearization(workdir):
    ds = open_dataset(workdir / "results/tiny_rotation/tiny_rotation.zarr")
    at_init = ds["rotation"].sel(task="pretrained", eigen_index=3, model_kind="linearized", pretrain_epochs=0)
    np.testing.assert_allclose(at_init.values, 1.0, rtol=1e-4)  # θ_0 of the pretrain stage is the init
    pre = xr.open_zarr(next((workdir / "results/stages/pretrain").glob("*.zarr")))
    assert pre["epoch"].values.tolist() == [0, 1, 2, 3, 4]
    assert np.linalg.norm(pre["params"].sel(epoch=4) - pre["params"].sel(epoch=0)) > 0


@pytest.mark.computes("stage:nad", "source:nad", "nad_alignment", "stein_check", "nad_directions", "activation:gelu",
                      "architecture:cnn")
def test_nad_study(workdir):
    ds = xr.open_zarr(workdir / "results/tiny_nads/tiny_nads.zarr")
    assert set(ds["test_accuracy"].dims) >= {"nad_index", "model_kind", "architecture"}
    sigma_sq = ds["nad_alignment"].sel(model_kind="network")
    assert np.all(np.diff(sigma_sq.values, axis=sigma_sq.dims.index("nad_index")) <= 0)  # descending σ_j²
    assert ds["stein_relerr"].dims[-1] == "stein_vector" and float(ds["stein_relerr"].max()) < 0.25
    assert ds["nad_directions"].shape[-4:] == (4, 4, 4, 1)
    nads = ds["nad_directions"].sel(architecture="cnn", nad_index=1, model_kind="network").values
    np.testing.assert_allclose(np.einsum("ixyc,jxyc->ij", nads, nads), np.eye(4), atol=1e-8)  # orthonormal


@pytest.mark.computes("figure:images")
def test_images_figure_shows_stored_nads_and_their_spectra(workdir):
    """Per architecture a row of NADs, each one of the stored nad_directions (one channel), and under it
    |FFT|: the magnitude of its centred 2-D Fourier transform; the figure passes the figure checks."""
    plan = build_index(workdir / "specs", workdir / "results").plans["tiny_nads"]
    fig = draw_figure(plan, "nads")
    assert figure_defects(fig) == []
    ds = xr.open_zarr(workdir / "results/tiny_nads/tiny_nads.zarr")
    shown = [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]
    assert len(shown) == 2 * 2 * 4  # (image, |FFT|) rows per architecture, 4 NADs each
    for row, architecture in enumerate(["mlp", "cnn"]):
        stored = ds["nad_directions"].sel(architecture=architecture).values[..., 0].reshape(-1, 4, 4, 4)
        for j in range(4):
            image, spectrum = shown[8 * row + j], shown[8 * row + 4 + j]
            assert any(np.allclose(image, run[j]) for run in stored), (architecture, j)
            np.testing.assert_allclose(spectrum, np.abs(np.fft.fftshift(np.fft.fft2(image))), rtol=1e-6, atol=1e-9)
