"""Defects the generated studies (tests/test_generated_studies.py) found, each pinned by a fast test
of its own; their shrunk studies are kept in tests/generated_regressions/ and run end to end there."""

from __future__ import annotations

import json
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
import xarray as xr
from jax.flatten_util import ravel_pytree

from ntkpipe.errors import SpecError
from ntkpipe.labels import CLASS
from ntkpipe.lang.schema import MatrixFigure
from ntkpipe.models import build_model, trainable
from ntkpipe.plots import PLOTTERS
from ntkpipe.plots.checks import drawn_tick_labels, figure_defects
from ntkpipe.stages import run_stage
from ntkpipe.stages.network import stage_data
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study

REGRESSIONS = Path(__file__).parent / "generated_regressions"

NEAR_PARALLEL_EIGEN = """\
data:
  source: digits
  classes: [0, 1]
  n_train: 8
  n_test: 4
  labels: {kind: eigenvector_sign, stage: eigen, eigen_index: 1}
model: {depth: 2, width: 4, activation: relu, init: near_parallel, disturbance: 0.1}
train: {optimizer: {name: gd, lr: 0.05}, steps: 2}
stages:
  gram: {compute: ntk_gram}
  eigen: {compute: eigendecomposition, input: gram}
measure: [loss]
"""


def _ntk(model, x: np.ndarray) -> np.ndarray:
    """J Jᵀ with J = ∂f/∂θ of a one-output network, by jax.jacobian of the flattened parameters."""
    params, rest = trainable(model)
    flat, unravel = ravel_pytree(params)

    def f(theta):
        net = eqx.combine(unravel(theta), rest)
        return jax.vmap(net)(x).reshape(-1)
    jac = np.asarray(jax.jacobian(f)(flat), np.float64)
    return jac @ jac.T


def test_ntk_gram_stage_of_a_near_parallel_network_is_the_runs_initial_ntk(tmp_path):
    """The stage built its network without the inputs' direction and failed ("init 'near_parallel'
    needs the direction of the training inputs"); its Gram is now that of the run's own θ₀."""
    path = tmp_path / "study.yaml"
    path.write_text(NEAR_PARALLEL_EIGEN)
    plan = plan_study(load_study(path), tmp_path / "results")
    job = next(j for j in plan.stages.values() if j.compute == "ntk_gram")
    gram = read_store(run_stage(job, tmp_path / "gram.zarr"))["gram"].values
    run = plan.runs[0].spec
    data = stage_data(job)
    model0 = build_model(run.model, data.input_shape, 1, run.seed, data.principal_direction)
    np.testing.assert_allclose(gram, _ntk(model0, np.asarray(data.x_all, np.float32)), rtol=1e-4, atol=1e-6)


def test_near_parallel_init_on_nad_data_is_a_validation_error(tmp_path):
    """nad data are built from the stage's network, so a readout aligned with those data is circular."""
    path = tmp_path / "study.yaml"
    path.write_text("""\
data: {source: nad, shape: [6], n_train: 8, directions: {stage: nads, nad_index: 1}}
model: {depth: 2, width: 4, init: near_parallel}
train: {optimizer: {name: gd, lr: 0.05}, steps: 2}
stages: {nads: {compute: nad, samples: 4, stein_samples: 16}}
measure: [loss]
""")
    with pytest.raises(SpecError, match=r"line 2: model.init: model.init 'near_parallel' aligns the readout"):
        load_study(path)


def test_near_parallel_init_with_several_outputs_is_a_validation_error(tmp_path):
    """The train job failed ("a near-parallel readout needs one output") on ten-class MNIST; now
    validation says so at model.init, before any job."""
    path = tmp_path / "study.yaml"
    path.write_text("""\
data: {source: digits, n_train: 9, n_test: 6}
model: {depth: 2, width: 16, init: near_parallel, disturbance: 0.1}
train: {optimizer: {name: gd, lr: 0.01}, epochs: 1}
measure: [loss]
""")
    with pytest.raises(SpecError, match=r"line 2: model.init: init 'near_parallel' aligns one readout vector with "
                                         r"the inputs; this task has 10 outputs"):
        load_study(path)
    path.write_text(path.read_text().replace("n_train: 9, n_test: 6", "classes: [0, 1], n_train: 9, n_test: 6"))
    assert load_study(path).runs[0].model.init == "near_parallel"  # two classes: one ±1 output


def test_a_run_error_is_not_blamed_on_a_case_that_does_not_set_its_key(tmp_path):
    """batch_size > n_train was reported at ``sweep.cases.setting.base.batch_size`` (a case that
    sets nothing); it belongs at train.batch_size, where the spec sets it."""
    path = tmp_path / "study.yaml"
    path.write_text("""\
data: {source: linear_teacher, dim: 3, n_train: 9}
model: {depth: 1, width: 4}
train: {optimizer: {name: sgd, lr: 0.1}, steps: 2, batch_size: 12}
measure: [loss]
sweep:
  cases:
    setting: {base: {}, changed: {model: {sigma: 0.5}}}
""")
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert "line 3: train.batch_size: train.batch_size 12 exceeds data.n_train 9" in str(err.value)
    assert "sweep.cases" not in str(err.value)


def test_an_unknown_architecture_is_reported_at_its_key(tmp_path):
    """``architecture: 7`` was reported at ``model`` with pydantic's words about ``_architecture()``."""
    path = tmp_path / "study.yaml"
    path.write_text("""\
data: {source: linear_teacher, dim: 3, n_train: 9}
model:
  architecture: 7
  depth: 1
  width: 4
train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
measure: [loss]
""")
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert "line 3: model.architecture: unknown architecture '7'; use one of 'mlp', 'cnn'" in str(err.value)
    assert "_architecture()" not in str(err.value)


def test_energy_concentration_of_a_non_finite_gram_is_nan():
    """An ofe_fit run that no γ̂ ≥ 0 fits has NaN kernels; their energy concentration is NaN, not a
    crash in the eigendecomposition (generated_regressions/ofe_fit_without_gamma_hat.yaml)."""
    from ntkpipe.measure.rotation import energy_concentration

    y = np.array([1.0, -1.0, 1.0])
    gram = np.diag([3.0, 2.0, 1.0])
    assert energy_concentration(gram, y, 1) == pytest.approx(1 / np.sqrt(3))
    assert np.isnan(energy_concentration(np.full((3, 3), np.nan), y, 1))


def test_growth_ratios_are_nan_where_the_reference_did_not_grow():
    """component_growth's ratios: growth over a reference growth, NaN (no warning) where it is 0
    (generated_regressions/component_growth_without_growth.yaml)."""
    from ntkpipe.measure.specialization import growth_ratio

    np.testing.assert_array_equal(growth_ratio(np.array([2.0, 3.0]), np.array([4.0, 0.0])), [0.5, np.nan])
    assert np.isnan(growth_ratio(0.0, 0.0))


def test_kv_target_growth_is_nan_without_a_warning_where_no_output_measured_it():
    """component_growth's per-target K_V growth is a mean over outputs of the finite values only, NaN
    (no warning) where there are none (found by the long generated run: a linearized Wide ResNet with
    kernel_components every 3rd checkpoint failed its train job on numpy's 'Mean of empty slice')."""
    from ntkpipe.measure.specialization import finite_mean

    growth = np.array([[1.0, np.nan, np.nan], [3.0, 4.0, np.nan]])  # (output c, target d)
    np.testing.assert_array_equal(finite_mean(growth, axis=0), [2.0, 4.0, np.nan])


def test_mode_strength_theory_is_nan_for_a_mode_that_starts_above_its_target():
    """A mode whose initial strength c_k(0) is not below its target s_k (a large init) is outside the
    small-init ODE: NaN there, the others integrated (found by the long generated run: a scaling
    σ ∝ 1/d with d = 1 gave c₀ = 0.64 > s = 0.39 and the train job failed)."""
    from ntkpipe.theory.deep_linear import gain_trajectory
    from ntkpipe.theory.final_kernel import mode_strength_trajectories

    times = np.array([0.0, 1.0, 5.0])
    out = mode_strength_trajectories(times, [0.01, 0.64], [1.0, 0.39], 3)
    np.testing.assert_array_equal(out[0], gain_trajectory(times, 0.01, 1.0, 3))
    assert np.isnan(out[1]).all()


def test_gram_stage_of_a_frozen_ofe_is_the_unscaled_networks_initial_ntk(tmp_path):
    """An OFE with a frozen kernel (γ = 0) and eigenvector labels: the Gram stage rebuilt its network with
    γ = 0 and failed validation; an OFE's K₀ is the unscaled network's (γ enters its dynamics), so the
    stage's Gram is that network's NTK, the same for every γ."""
    text = (REGRESSIONS / "frozen_ofe_with_eigen_labels.yaml").read_text()
    grams = []
    for name, gamma in (("frozen", "0"), ("rescaled", "2.0")):
        path = tmp_path / f"study_{name}.yaml"
        path.write_text(text.replace("gamma: 0}", f"gamma: {gamma}}}"))
        plan = plan_study(load_study(path), tmp_path / "results")
        job = next(j for j in plan.stages.values() if j.compute == "ntk_gram")
        grams.append(read_store(run_stage(job, tmp_path / f"gram_{name}.zarr"))["gram"].values)
        run = plan.runs[0].spec
        data = stage_data(job)
        unscaled = build_model(run.model.model_copy(update={"kind": "network", "gamma": 1.0}), data.input_shape, 1,
                               run.seed)
        np.testing.assert_allclose(grams[-1], _ntk(unscaled, np.asarray(data.x_all, np.float32)), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(grams[0], grams[1])


CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def test_a_tall_matrix_of_long_class_names_fits_its_figure_with_every_label():
    """A KSM of CIFAR-10's ten outputs against three measured targets (kernel_specialization with a
    subset; the other targets NaN): its long row names took the width its y label needed ('output'
    8 px beyond the figure), and its narrow columns lost a name to overlap. The figure grows to its
    texts, and columns are as wide as their names."""
    rng = np.random.default_rng(0)
    ksm = np.full((10, 10), np.nan)
    ksm[:, [1, 4, 6]] = rng.uniform(0.6, 1.7, (10, 3))
    ds = xr.Dataset({"ksm_init": (("output", "target"), ksm), "run_id": "r0", "diverged": 0},
                    coords={"output": np.arange(1, 11), "target": np.arange(1, 11)},
                    attrs={CLASS: json.dumps({"r0": CIFAR_CLASSES})})
    spec = MatrixFigure.model_validate({"name": "matrix_1", "kind": "matrix", "variable": "ksm_init"})
    fig = PLOTTERS["matrix"](ds, spec, "figure 1")
    assert figure_defects(fig) == []
    ax = fig.axes[0]
    assert [t.get_text() for _, t in drawn_tick_labels(ax.yaxis)] == CIFAR_CLASSES
    assert [t.get_text() for _, t in drawn_tick_labels(ax.xaxis)] == ["automobile", "deer", "frog"]


def test_a_matrix_of_diverged_runs_says_so_across_its_panel():
    """A matrix of final-NTK predictions (4 test points × 1 output) whose runs all diverged: its panel kept
    the one-column image's narrow box, and the note "no finite values to draw (…)" overflowed it onto the
    'test point' label, beside a colour bar with no values to scale. The empty panel now takes its
    width for the note, and a figure without a finite cell has no colour bar."""
    ds = xr.Dataset({"prediction_final_ntk": (("setting", "test_point", "output"), np.full((2, 4, 1), np.nan)),
                     "run_id": ("setting", ["r0", "r1"]), "diverged": ("setting", [1, 1])},
                    coords={"setting": ["base", "changed"], "test_point": np.arange(4), "output": [1]})
    spec = MatrixFigure.model_validate({"name": "matrix_1", "kind": "matrix", "variable": "prediction_final_ntk"})
    fig = PLOTTERS["matrix"](ds, spec, "figure 1")
    assert figure_defects(fig) == []
    (ax,) = fig.axes  # no colour bar
    note = next(t.get_text() for t in ax.texts)
    assert note.startswith("no finite values to draw") and "2 of 2 runs diverged" in note
