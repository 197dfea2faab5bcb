"""Layer alignment of two-layer nets through the run job, against the solvable model's closed form
(docs/papers.md §6.2): per-layer learning rates, near-parallel inits, data on a line."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import run_study_jobs

STUDY = """\
data: {source: linear_teacher, inputs: line, dim: 6, n_train: 4, teacher_scale: 0.3}
model: {depth: 2, width: 30, activation: linear, layer_variance: [0.1, 0.02]}
train:
  optimizer: {name: gd, lr: 0.003}
  dtype: float64
  max_time: 120
  checkpoints: {per_decade: 8}
measure: [loss, kernel_norm, layer_alignment, solvable_theory]
sweep:
  lr_ratio: [0.2, 5.0]
  cases:
    start:
      gaussian: {}
      parallel: {model: {init: near_parallel, disturbance: 0.2}}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return run_study_jobs(STUDY, tmp_path_factory.mktemp("layer_alignment"))[1]   # by (lr_ratio, start)


@pytest.mark.computes("layer_alignment", "solvable_theory", "init:near_parallel", "kernel_norm", "loss")
def test_gd_with_small_steps_follows_the_closed_form(runs):
    """cos θ(t), |u|, |w|, the loss and ‖K‖_F of the network against the gradient-flow closed form,
    with unequal layer rates η_u/η_W = 0.2 and 5, P = 4 points on a line (reduced to one)."""
    for run in runs.values():
        np.testing.assert_allclose(run["layer_alignment"], run["layer_alignment_theory"], atol=2e-3)
        np.testing.assert_allclose(run["readout_norm"], run["readout_norm_theory"], rtol=2e-3)
        np.testing.assert_allclose(run["hidden_norm"], run["hidden_norm_theory"], rtol=2e-3)
        np.testing.assert_allclose(run["kernel_norm"], run["kernel_norm_theory"], rtol=5e-3)
        np.testing.assert_allclose(run["loss"][:5], run["loss_theory"][:5], rtol=1e-2)
        assert float(run["layer_alignment_theory_error"]) < 2e-3


@pytest.mark.computes("layer_alignment", "init:near_parallel")
def test_alignment_rises_below_the_target_and_falls_above_it(runs):
    for ratio in (0.2, 5.0):
        gaussian, parallel = runs[(ratio, "gaussian")], runs[(ratio, "parallel")]
        assert np.all(np.diff(gaussian["layer_alignment"].values) > -1e-9)   # f₀ < y: the layers align
        assert np.all(np.diff(parallel["layer_alignment"].values) < 1e-9)    # f₀ > y: they disalign
        assert parallel["readout_norm"].values[-1] < parallel["readout_norm"].values[0]  # and shrink


@pytest.mark.computes("layer_alignment", "solvable_theory")
def test_final_alignment_is_the_invariant_whatever_the_rate_ratio(runs):
    for start in ("gaussian", "parallel"):
        ends = [float(runs[(ratio, start)]["layer_alignment"].values[-1]) for ratio in (0.2, 5.0)]
        invariant = float(runs[(0.2, start)]["layer_alignment_invariant"])
        assert float(runs[(5.0, start)]["layer_alignment_invariant"]) == pytest.approx(invariant, rel=1e-12)
        np.testing.assert_allclose(ends, invariant, atol=3e-3)
