"""The scale-parameter language (``scaling``), the phase diagram of λ² (solvable-model Table 1),
``relative_kernel_change`` and a tiny phase-diagram study end to end."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np
import pandas as pd
import pytest

from ntkpipe import train_run
from ntkpipe.errors import SpecError
from ntkpipe.jobs import aggregate_study
from ntkpipe.jobs.plot import draw_figure
from ntkpipe.jobs.table import phase_table_file
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.models.fixed import is_fixed
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.plots.checks import figure_defects
from ntkpipe.stages import run_context
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from ntkpipe.theory.phases import Exponents, exponent_phase, exponents_from_powers, predicted_phase, stable_lr

# Table 1 columns: (width, κ, var_W, var_u) exponents
COLUMNS = {"ntk": (1, -0.5, 0, 0), "mean_field": (1, -1, 0, 0), "xavier": (1, 0, -1, -1),
           "kaiming": (1, 0, 0, -1), "lazy": (0, 1, 0, 0)}
# rows: (learning-rate exponents, κ exponents or None = the column's), phases as the seed prints them
ROWS = [((0, 0, 0, 0, 0), None, ("kernel", "frozen", "learning", "unstable", "unstable")),
        ((0, 1, 0, -1, -2), None, ("kernel", "learning", "learning", "kernel", "kernel")),
        ((1, 1, 0, 1, 0), (-1, -1, 0, -1, 0), ("learning",) * 5),
        ((0, 0, -2, -1, -2), (-0.5, -0.5, 1, 0, 1), ("kernel",) * 5)]


@pytest.mark.parametrize("lrs, kappas, expected", ROWS)
def test_predicted_phase_reproduces_table_1(lrs, kappas, expected):
    for i, (n, k, v_w, v_u) in enumerate(COLUMNS.values()):
        k = k if kappas is None else kappas[i]
        assert predicted_phase(Exponents(n, k, v_w, v_u, lrs[i], lrs[i])) == expected[i]


def test_corollary_1_stable_lr_and_the_powers_of_a_spec():
    assert [stable_lr(n, k, v_w, v_u) for n, k, v_w, v_u in COLUMNS.values()] == [0, 1, 0, -1, -2]
    e = exponents_from_powers({"width": 1, "output_scale": -1, "lr": 1})  # standard init: var_u = σ²/N
    assert (e.variance_w, e.variance_u, e.lr_w, e.lr_u) == (0, -1, 1, 1)
    assert predicted_phase(e) == "learning"
    e = exponents_from_powers({"width": 1, "lr": 0, "layer_lr": [0, -1]}, layer_variance=True)
    assert (e.lr_w, e.lr_u, e.variance_u) == (0, -1, 0)


# A stable scaling outside Table 1: N ∝ d, κ ∝ d^(−3/4), η ∝ d^(1/2), so T = −1/2, I = 0: kernel, p = −1/2
QUOTED = {"width": 1, "output_scale": -0.75, "layer_variance": [0, 0], "lr": 0.5}
# (b, s, p, phase): fitted exponents ± stderr of the relative NTK change in specs/phase_diagram.yaml's default
# study (seed 0) for each distinct (task, scaling), the predicted p = min(T − I, 0) and the measured phase
# its runs were given by the former threshold (b < −0.5) and agree with the predicted one
SHIPPED = [(-1.0125, 0.0561, -1, "kernel"), (0.0149, 0.0250, 0, "learning"), (-1.4384, 0.3445, -2, "kernel"),
           (-1.7472, 0.1431, -2, "kernel"), (0.2080, 0.0999, 0, "learning"), (-1.9883, 0.0060, -2, "kernel"),
           (-9.49e-17, 4.46e-17, 0, "learning"),  # linear: identical runs (lazy_corollary2)
           (-0.8847, 0.0313, -1, "kernel"), (0.1323, 0.0270, 0, "learning"), (-1.1856, 0.2455, -2, "kernel"),
           (-1.6943, 0.0625, -2, "kernel"), (0.3075, 0.0686, 0, "learning"), (-1.3795, 0.1076, -2, "kernel")]  # digits


def test_a_stable_scaling_outside_table_1_is_measured_kernel():
    e = exponents_from_powers(QUOTED, layer_variance=True)
    assert (e.target_term, e.init_term, e.kernel_change, predicted_phase(e)) == (-0.5, 0.0, -0.5, "kernel")
    # its fit at d = 1, 4, 16 (phase_diagram's linear task): above the former threshold −0.5, 2.7 s from p
    assert exponent_phase(-0.3661, 0.0503, e.kernel_change) == "kernel"
    assert exponent_phase(-0.3661, 0.0503, 0.0) == "kernel"  # significantly below 0 whatever the prediction
    assert exponent_phase(-0.3661, 0.0503, 0.0, stderrs=8.0) == "learning"  # 0 within 8 s, none predicted
    assert exponent_phase(-0.3661, 0.0503, e.kernel_change, stderrs=8.0) == "kernel"  # both within 8 s: p nearer


@pytest.mark.parametrize("b, s, p, phase", SHIPPED)
def test_table_1_cells_of_the_shipped_study_keep_their_measured_phase(b, s, p, phase):
    assert exponent_phase(b, s, p) == phase


def test_exponent_phase_weighs_the_two_hypotheses_in_standard_errors():
    assert exponent_phase(-0.08, 0.03, -0.1) == "kernel"  # a slow predicted decay, measured
    assert exponent_phase(-0.4, 0.25, -0.5) == "kernel"  # 0 and p both within 2 s: p is nearer
    assert exponent_phase(-0.2, 0.25, -0.5) == "learning"  # both within 2 s: 0 is nearer
    assert exponent_phase(-0.4, 0.25, 0.0) == "learning"  # predicted learning, 0 within 2 s
    assert exponent_phase(0.3, 0.01, -1.0) == "learning"  # a growing change
    assert exponent_phase(float("nan"), float("nan"), -1.0) == "learning"


STUDY = """\
data: {source: linear_teacher, inputs: line, dim: 3, n_train: 1}
model: {depth: 2, width: 8, activation: linear, layer_variance: [0.125, 0.125]}
train:
  optimizer: {name: gd, lr: 0.25}
  steps: 30
  dtype: float64
  checkpoints: {spacing: linear, count: 3}
measure: [loss, relative_kernel_change]
scaling:
  d: [1, 4, 16]
  powers: {width: 1}
sweep:
  cases:
    scaling:
      ntk: {scaling: {powers: {width: 1, output_scale: -0.5}}}
      mean_field: {scaling: {powers: {width: 1, output_scale: -1, lr: 1}}}
summaries:
  - {name: kernel_change_exponent, kind: power_law, x: d, y: relative_kernel_change, by: scaling}
  - {name: predicted_phase, kind: predicted_phase, by: scaling}
  - {name: measured_phase, kind: measured_phase, x: d, y: relative_kernel_change, by: scaling,
     exponent: kernel_change_exponent}
"""
FIGURE = """\
figures:
  - {name: phases, kind: phases, measured: measured_phase, predicted: predicted_phase, rows: scaling}
"""


def _load(tmp_path, text):
    path = tmp_path / "phase.yaml"
    path.write_text(text)
    return load_study(path)


def _problems(tmp_path, text) -> list[str]:
    with pytest.raises(SpecError) as err:
        _load(tmp_path, text)
    return err.value.problems


def test_scaling_derives_each_parameter_from_d(tmp_path):
    study = _load(tmp_path, STUDY)
    assert study.axes == ["scaling", "d"] and len(study.runs) == 6
    by = {(p["scaling"], p["d"]): r for p, r in zip(study.points, study.runs)}
    mf = by[("mean_field", 16)]
    assert mf.model.width == 128 and mf.model.output_scale == pytest.approx(1 / 16)
    assert mf.train.optimizer.lr == pytest.approx(4.0) and mf.model.layer_variance == [0.125, 0.125]
    assert by[("ntk", 4)].model.output_scale == pytest.approx(0.5) and by[("ntk", 4)].train.optimizer.lr == 0.25
    assert by[("ntk", 1)] == by[("mean_field", 1)]  # every scaling is the spec itself at d = reference
    lists = _load(tmp_path, STUDY.replace("powers: {width: 1}\n", "powers: {width: 1, layer_variance: [0, -1]}\n"))
    assert lists.runs[2].model.layer_variance == [0.125, pytest.approx(0.125 / 16)]


def test_scaling_errors_are_located(tmp_path):
    found = _problems(tmp_path, STUDY.replace("powers: {width: 1}\n", "powers: {widht: 1}\n"))
    assert found[0].startswith("line 11: scaling.powers.widht: unknown parameter 'widht' (did you mean 'width'?)")
    found = _problems(tmp_path, STUDY.replace("powers: {width: 1}\n", "powers: {activation: 1}\n"))
    assert "line 11: scaling.powers.activation: 'activation' (model.activation) is not numeric" in found[0]
    found = _problems(tmp_path, STUDY.replace("width: 1, output_scale: -0.5}", "width: -2, output_scale: -0.5}"))
    assert found[0] == ("line 15: sweep.cases.scaling.ntk.scaling.powers.width: at d = 4 it gives model.width = 0: "
                        "Input should be greater than or equal to 1")
    found = _problems(tmp_path, STUDY.replace("ntk: {scaling: {powers:", "ntk: {scaling: {d: [2], powers:"))
    assert "line 15: sweep.cases.scaling.ntk.scaling.d: case scaling='ntk': the values of d are the study's" in found[0]
    found = _problems(tmp_path, STUDY.replace("  d: [1, 4, 16]", "  d: [0, 4]"))
    assert found == ["line 10: scaling.d: the scale parameter d must be positive numbers (got 0)"]
    found = _problems(tmp_path, STUDY.replace("scaling:\n  d: [1, 4, 16]\n  powers: {width: 1}\n", "")
                      .replace("      ntk:", "      ntk_x:").replace("summaries:\n", "summaries: []\nx:\n"))
    assert any("unknown key" in p for p in found)


def test_relative_kernel_change_is_the_frobenius_change_of_the_train_gram(tmp_path):
    run = _load(tmp_path, STUDY).runs[1]
    ctx = run_context(run, {})
    moved = jax.tree.map(lambda a: a * 1.3 if hasattr(a, "shape") else a, ctx.model0, is_leaf=is_fixed)  # not κ
    k0 = np.asarray(flatten_gram(empirical_ntk(ctx.model0, ctx.data.x_train)))
    kt = np.asarray(flatten_gram(empirical_ntk(moved, ctx.data.x_train)))
    value = REGISTRY["relative_kernel_change"].compute(ctx, SimpleNamespace(model=moved), None)["relative_kernel_change"]
    assert value == pytest.approx(np.linalg.norm(kt - k0) / np.linalg.norm(k0), rel=1e-12)
    assert value == pytest.approx(1.3 ** 2 - 1, rel=1e-6)  # K = κ²(|Wx|² + |u|²|x|²) scales as the weights squared


@pytest.mark.computes("summary:predicted_phase", "summary:measured_phase", "summary:power_law",
                      "relative_kernel_change", "figure:phases")
def test_phase_study_end_to_end(tmp_path):
    plan = plan_study(_load(tmp_path, STUDY + FIGURE), tmp_path / "results")
    for job in plan.runs:
        if not job.path.exists():
            train_run(job, job.path)
    ds = read_store(aggregate_study(plan, plan.dataset_path)).load()
    assert ds["relative_kernel_change"].dims == ("scaling", "d")
    assert list(ds["predicted_phase"].values) == ["kernel", "learning"]
    assert list(ds["measured_phase"].values) == ["kernel", "learning"]
    assert ds["kernel_change_exponent"].sel(scaling="ntk") < -0.7
    assert abs(float(ds["kernel_change_exponent"].sel(scaling="mean_field"))) < 0.35
    assert list(ds["predicted_phase_kernel_change"].values) == [-1.0, 0.0]
    assert list(ds["measured_phase_predicted_exponent"].values) == [-1.0, 0.0]
    np.testing.assert_array_equal(ds["measured_phase_exponent"].values, ds["kernel_change_exponent"].values)
    np.testing.assert_array_equal(ds["measured_phase_exponent_stderr"].values, ds["kernel_change_exponent_stderr"].values)
    # the phase table (Table 1): one row per scaling, every column, and its figure without defects
    table = pd.read_csv(phase_table_file(plan, tmp_path / "phases.csv"))
    assert list(table.columns) == ["scaling", "predicted_phase", "predicted_exponent", "measured_exponent",
                                   "measured_exponent_stderr", "measured_phase", "agree"]
    assert table["scaling"].tolist() == ["ntk", "mean_field"] and table["agree"].tolist() == [True, True]
    np.testing.assert_allclose(table["measured_exponent"], ds["kernel_change_exponent"].values, rtol=1e-3)
    fig = draw_figure(plan, "phases")
    assert figure_defects(fig) == []
    (right,) = [ax for ax in fig.axes if ax.get_ylabel() == "predicted / measured phase"]
    assert [t.get_text() for t in right.get_yticklabels()] == ["kernel / kernel ✓", "learning / learning ✓"]
    assert "agree in 2 of 2" in fig.axes[0].get_title()


# specs/phase_diagram.yaml's linear task at d ≤ 16, with the scaling QUOTED beside Table 1's NTK column
QUOTED_STUDY = """\
data: {source: linear_teacher, inputs: line, dim: 4, n_train: 1, teacher_scale: 1.0}
model: {depth: 2, width: 16, activation: linear, output_scale: 1.0, layer_variance: [0.0625, 0.0625]}
train:
  optimizer: {name: gd, lr: 0.25}
  steps: 40
  dtype: float64
  checkpoints: {spacing: linear, count: 8}
measure: [loss, relative_kernel_change]
scaling:
  d: [1, 4, 16]
  powers: {width: 1}
sweep:
  cases:
    scaling:
      ntk: {scaling: {powers: {width: 1, output_scale: -0.5, layer_variance: [0, 0], lr: 0}}}
      quoted: {scaling: {powers: {width: 1, output_scale: -0.75, layer_variance: [0, 0], lr: 0.5}}}
summaries:
  - {name: kernel_change_exponent, kind: power_law, x: d, y: relative_kernel_change, by: scaling}
  - {name: predicted_phase, kind: predicted_phase, by: scaling}
  - {name: measured_phase, kind: measured_phase, x: d, y: relative_kernel_change, by: scaling,
     exponent: kernel_change_exponent}
"""


def test_the_quoted_scaling_is_measured_kernel_end_to_end(tmp_path):
    plan = plan_study(_load(tmp_path, QUOTED_STUDY), tmp_path / "results")
    for job in plan.runs:
        if not job.path.exists():
            train_run(job, job.path)
    ds = read_store(aggregate_study(plan, tmp_path / "study.zarr")).load()
    quoted = ds.sel(scaling="quoted")
    b, s = float(quoted["measured_phase_exponent"]), float(quoted["measured_phase_exponent_stderr"])
    assert -0.5 < b < -0.25 and 0 < s < 0.1  # above the former threshold −0.5: it was called learning
    assert float(quoted["measured_phase_predicted_exponent"]) == -0.5
    assert list(ds["predicted_phase"].values) == list(ds["measured_phase"].values) == ["kernel", "kernel"]
    assert "b + 2.0·s < 0" in ds["measured_phase"].attrs["description"]


def test_measured_phase_rules_are_validated(tmp_path):
    found = _problems(tmp_path, STUDY.replace("exponent: kernel_change_exponent}", "exponent: kernel_change_exponent, "
                                                                                  "kernel_below: -0.3}"))
    assert found == ["line 21: summaries.2.kernel_below: 'kernel_below' was removed: a measured_phase now judges the "
                     "fitted exponent against the predicted T − I within 'stderrs' (default 2) standard errors; "
                     "delete 'kernel_below'"]
    found = _problems(tmp_path, STUDY.replace("exponent: kernel_change_exponent}", "exponent: kernel_change_exponent, "
                                                                                  "stderrs: 0}"))
    assert found[0].startswith("line 21: summaries.2.stderrs: Input should be greater than 0")
    no_scaling = (STUDY.replace("scaling:\n  d: [1, 4, 16]\n  powers: {width: 1}\n", "")
                  .replace("    scaling:\n      ntk: {scaling: {powers: {width: 1, output_scale: -0.5}}}\n"
                           "      mean_field: {scaling: {powers: {width: 1, output_scale: -1, lr: 1}}}\n",
                           "    scaling: {ntk: {}, mean_field: {train: {optimizer: {lr: 1.0}}}}\n")
                  .replace("x: d,", "x: scaling,").replace("  - {name: predicted_phase, kind: predicted_phase, by: scaling}\n", ""))
    assert "a measured_phase needs the study's 'scaling' (hyperparameters as powers of d)" in " ".join(_problems(tmp_path, no_scaling))
