"""The study language: YAML numbers, sweeps, identity hashing, validation errors, variants, plans."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from ntkpipe.errors import SpecError
from ntkpipe.lang.axes import AXES
from ntkpipe.lang.identity import canonical_json, content_id
from ntkpipe.lang.sweep import SweepError, check_unique, expand, fill_unset_axes
from ntkpipe.lang.yaml_lines import LibyamlLoader, Loader, load_with_lines
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study

BASE = """\
data: {source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}
model: {depth: 3, width: 5, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 1e-3}
  max_time: 1
measure: [loss, t_half]
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(tmp_path: Path, text: str, variant: str = "default") -> list[str]:
    with pytest.raises(SpecError) as err:
        load_study(write(tmp_path, text), variant)
    return err.value.problems


# --- YAML -----------------------------------------------------------------------------------

def test_yaml_12_floats_and_lines(tmp_path):
    data, lines = load_with_lines(write(tmp_path, "a: 1e-3\nb:\n  c: [1E+2, .5, -2e-1, 7]\n"))
    assert data == {"a": 0.001, "b": {"c": [100.0, 0.5, -0.2, 7]}}
    assert isinstance(data["b"]["c"][3], int)
    assert lines[("a",)] == 1 and lines[("b", "c")] == 3


def _node_tree(node):
    """A composed YAML node as nested tuples: kind, tag, line, value (the style, which only emitting
    reads, left out)."""
    if isinstance(node, yaml.MappingNode):
        return "map", node.tag, node.start_mark.line, [(_node_tree(k), _node_tree(v)) for k, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return "seq", node.tag, node.start_mark.line, [_node_tree(v) for v in node.value]
    return None if node is None else ("scalar", node.tag, node.start_mark.line, node.value)


@pytest.mark.parametrize("path", sorted({*Path("specs").rglob("*.yaml"), *Path("tests").rglob("*.yaml")}),
                         ids=str)
def test_libyaml_composes_what_pyyaml_composes(path):
    """Specs are composed by libyaml (fast) with the language's resolvers: the same tags (YAML 1.2
    floats), values and lines as PyYAML's own parser, for every shipped and test spec."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        expected = _node_tree(yaml.compose(text, Loader=Loader))
    except yaml.YAMLError:
        expected = "syntax error"
    try:
        got = _node_tree(yaml.compose(text, Loader=LibyamlLoader))
    except yaml.YAMLError:
        got = "syntax error"
    assert got == expected


# --- sweeps -------------------------------------------------------------------------------------

def test_sweep_product_zip_union_and_generators():
    points = expand({
        "seed": [0, 1],
        "union": [{"depth": [2], "sigma": {"logspace": [-2, -1, 2]}},
                  {"zip": {"depth": [3, 4], "sigma": {"geomspace": [0.1, 0.4, 2]}}}],
    })
    assert len(points) == 2 * (2 + 2)
    assert points[:2] == [{"seed": 0, "depth": 2, "sigma": 0.01}, {"seed": 0, "depth": 2, "sigma": 0.1}]
    assert {"seed": 1, "depth": 4, "sigma": 0.4} in points
    assert expand({"width": {"range": [8, 20, 4]}}) == [{"width": w} for w in (8, 12, 16)]
    assert expand({"lr": {"linspace": [0.1, 0.3, 3]}})[1] == {"lr": 0.2}
    assert expand({}) == [{}]


@pytest.mark.parametrize("node,message", [
    ({"sigmaa": [1]}, "unknown sweep axis 'sigmaa' (did you mean 'sigma'?)"),
    ({"zip": {"depth": [2, 3], "sigma": [1]}}, "zip needs equal lengths"),
    ({"sigma": 0.1}, "write a single value as [value]"),
    ({"sigma": {"logspce": [0, 1, 2]}}, "did you mean 'logspace'"),
    ({"sigma": [1], "product": [{"sigma": [2]}]}, "axis 'sigma' is set twice"),
])
def test_sweep_errors(node, message):
    with pytest.raises(SweepError) as err:
        expand(node)
    assert message in str(err.value)


def test_sweep_points_must_be_unique_and_unset_axes_are_filled():
    with pytest.raises(SweepError, match="twice"):
        check_unique(expand({"union": [{"sigma": [1]}, {"sigma": [1]}]}))
    points = expand({"union": [{"sigma": [0.5], "activation": ["relu"]}, {"depth": [2, 3]}]})
    assert fill_unset_axes(points) == [{"sigma": 0.5, "activation": "relu", "depth": 0},
                                       {"sigma": 0, "activation": "none", "depth": 2},
                                       {"sigma": 0, "activation": "none", "depth": 3}]
    with pytest.raises(SweepError, match="sits at its coordinate 0"):
        fill_unset_axes(expand({"union": [{"sigma": [1], "depth": [0, 2]}, {"sigma": [1]}]}))


def test_axis_names_cover_the_schema():
    assert AXES["sigma"] == ("model", "sigma") and AXES["model_kind"] == ("model", "kind")
    assert AXES["data_seed"] == ("data", "seed") and AXES["lr"] == ("train", "optimizer", "lr")
    assert [AXES[a] for a in ("inputs", "teachers", "clusters", "noise")] == [
        ("data", "inputs"), ("data", "teachers"), ("data", "clusters"), ("data", "noise")]


# --- identity -------------------------------------------------------------------------------------

def test_ids_normalize_numbers_and_key_order():
    assert content_id({"a": 1e-3, "b": [1, 2]}) == content_id({"b": [1, 2], "a": 0.001})
    assert content_id({"a": 0.1}) == content_id({"a": 10 ** -1 + 1e-17})
    assert content_id({"a": 0.1}) != content_id({"a": 0.1000001})
    assert canonical_json({"b": 1, "a": 2.0}) == '{"a":2.0,"b":1}'


def test_run_ids_are_stable_and_change_with_the_config(tmp_path):
    one = plan_study(load_study(write(tmp_path, BASE + "sweep: {sigma: [0.1, 0.2]}\n", "a.yaml")))
    reordered = BASE.replace("{depth: 3, width: 5, activation: linear, sigma: 0.1}",
                             "{sigma: 0.1, activation: linear, width: 5, depth: 3}").replace("1e-3", "0.001")
    two = plan_study(load_study(write(tmp_path, reordered + "sweep: {sigma: [0.2, 0.1]}\n", "b.yaml")))
    assert {r.id for r in one.runs} == {r.id for r in two.runs}
    three = plan_study(load_study(write(tmp_path, BASE.replace("width: 5", "width: 6") + "sweep: {sigma: [0.1]}\n",
                                        "c.yaml")))
    assert three.runs[0].id not in {r.id for r in one.runs}


# --- validation -----------------------------------------------------------------------------------

def test_valid_study_expands(tmp_path):
    study = load_study(write(tmp_path, BASE + "sweep: {depth: [2, 3], seed: [0, 1]}\n"))
    assert study.axes == ["depth", "seed"] and len(study.runs) == 4
    assert study.runs[3].model.depth == 3 and study.runs[3].seed == 1
    assert study.runs[0].train.optimizer.lr == 0.001


@pytest.mark.parametrize("edit,expected", [
    (("width: 5", "widht: 5"), "line 2: model.widht: unknown key (did you mean 'width'?)"),
    (("activation: linear", "activation: linaer"), "line 2: model.activation: Input should be"),
    (("activation: linear", "activation: linaer"), "(did you mean 'linear'?)"),
    (("sigma: 0.1", "sigma: -0.1"), "line 2: model.sigma: Input should be greater than 0 (got -0.1)"),
    (("n_train: 8", "n_train: many"), "line 1: data.n_train: Input should be a valid integer"),
    (("max_time: 1", "steps: 3\n  max_time: 1"), "give exactly one of 'steps', 'epochs', 'max_time'"),
    (("[loss, t_half]", "[loss, t_halff]"), "line 6: measure.1: unknown measurement 't_halff' (did you mean 't_half'?)"),
    (("[loss, t_half]", "[t_half]"), "t_half is computed from 'loss': add loss to measure"),
    (("gamma: 0.0", "gamma: 0.5"), None),
    (("dim: 4, ", ""), "line 1: data: source 'linear_teacher' needs 'dim'"),
])
def test_each_validation_error_names_line_key_and_fix(tmp_path, edit, expected):
    text = BASE.replace(*edit)
    if expected is None:  # a valid edit
        load_study(write(tmp_path, text))
        return
    found = problems(tmp_path, text)
    assert any(expected in p for p in found), found


def test_yaml_syntax_error_has_line(tmp_path):
    found = problems(tmp_path, BASE + "sweep: {sigma: [0.1\n")
    assert found[0].startswith("line 8: sweep.sigma.0: YAML syntax error: expected ',' or ']'")


def test_sweep_value_errors_point_at_the_sweep(tmp_path):
    found = problems(tmp_path, BASE + "sweep:\n  sigma: [0.1, -2]\n")
    assert found == ["line 8: sweep.sigma: sweep value sigma=-2: Input should be greater than 0"]


def test_measurement_requirements_are_checked(tmp_path):
    found = problems(tmp_path, BASE.replace("[loss, t_half]", "[loss, test_accuracy, train_accuracy, t_half_theory]")
                     .replace("gamma: 0.0", "gamma: 0.5"))
    assert any("test_accuracy: needs test points: set data.n_test > 0" in p for p in found)
    assert any("needs class labels" in p for p in found)
    assert any("whitened data (data.gamma: 0)" in p for p in found)


def test_figure_and_summary_references_are_checked(tmp_path):
    found = problems(tmp_path, BASE + textwrap.dedent("""\
        sweep: {sigma: [0.1, 0.2]}
        summaries: [{name: slope, kind: power_law, x: sigma, y: loss}]
        figures:
          - {name: f, kind: sweep, x: sigmaa, y: t_half, where: {sigma: 0.3}}
          - {name: f, kind: time_series, variables: [t_half]}
        """))
    assert any("summaries.0.y: 'loss' is a series variable" in p for p in found)
    assert any("figures.0.x: x 'sigmaa' is neither a sweep axis nor a dimension of the plotted variables (did you mean 'sigma'?)" in p for p in found)
    assert any("sigma=0.3 is not in the sweep" in p for p in found)
    assert any("figure name 'f' is used twice" in p for p in found)
    assert any("figures.1.variables.0: 't_half' is a scalar variable" in p for p in found)


def test_matrix_figure_references_are_checked(tmp_path):
    found = problems(tmp_path, BASE + textwrap.dedent("""\
        sweep: {sigma: [0.1, 0.2]}
        figures:
          - {name: a, kind: matrix, variable: t_half}
          - {name: b, kind: matrix, variable: loss, col: sigmaa}
          - {name: c, kind: matrix, variable: ksmm}
        """))
    assert any("figures.0.variable: 't_half' is a scalar variable; this needs a array or series one" in p
               for p in found)
    assert any("figures.1.variable: 'loss' has dims (); a matrix figure needs a variable with two (rows, columns)"
               in p for p in found)
    assert any("figures.1.col: col 'sigmaa' is not a sweep axis (did you mean 'sigma'?)" in p for p in found)
    assert any("figures.2.variable: 'ksmm' is not measured" in p for p in found)


def test_default_data_fields_keep_run_ids_and_new_sources_sweep(tmp_path):
    """Writing the defaults of ``inputs``/``teachers`` gives the id of the spec without them;
    the synthetic sources' fields are sweep axes."""
    plain = plan_study(load_study(write(tmp_path, BASE, "plain.yaml"))).runs[0].id
    explicit = BASE.replace("dim: 4,", "dim: 4, inputs: gaussian, teachers: 1,")
    assert plan_study(load_study(write(tmp_path, explicit, "explicit.yaml"))).runs[0].id == plain
    mixture = BASE.replace("source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0",
                           "source: gaussian_mixture, dim: 4, clusters: 2, n_train: 8, noise: 0.1") + "sweep: {clusters: [2, 4]}\n"
    runs = plan_study(load_study(write(tmp_path, mixture, "mixture.yaml"))).runs
    assert [r.spec.data.clusters for r in runs] == [2, 4] and runs[0].id != runs[1].id
    teachers = BASE.replace("dim: 4,", "dim: 4, inputs: sphere,") + "sweep: {teachers: [1, 3]}\n"
    runs = plan_study(load_study(write(tmp_path, teachers, "teachers.yaml"))).runs
    assert [r.spec.data.teachers for r in runs] == [1, 3] and plain not in {r.id for r in runs}


def test_stage_references_are_checked(tmp_path):
    text = """\
    data:
      source: digits
      n_train: 20
      n_test: 10
      labels: {kind: eigenvector_sign, stage: eigs, eigen_index: 40}
    model: {depth: 2, width: 5}
    train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
    stages:
      gram: {compute: ntk_gram}
      eig: {compute: eigendecomposition, input: gramm}
    measure: [loss]
    """
    found = problems(tmp_path, text)
    assert any("line 5: data.labels.stage: no stage named 'eigs' (did you mean 'eig'?)" in p for p in found)
    assert any("stages.eig.input: 'gramm' is not a 'ntk_gram' stage (did you mean 'gram'?)" in p for p in found)
    fixed = problems(tmp_path, text.replace("stage: eigs", "stage: eig").replace("gramm", "gram"))
    assert any("eigen_index 40 exceeds the 30 eigenvectors" in p for p in fixed)


def test_variants_merge_and_report_their_own_lines(tmp_path):
    text = BASE + "sweep: {sigma: [0.1]}\nvariants:\n  paper:\n    sweep: {sigma: [0.1, 0.2]}\n" \
                  "    model: {width: 50}\n  broken:\n    model: {widht: 3}\n"
    paper = load_study(write(tmp_path, text), "paper")
    assert [r.model.width for r in paper.runs] == [50, 50] and len(paper.points) == 2
    assert load_study(write(tmp_path, text)).runs[0].model.width == 5
    assert problems(tmp_path, text, "broken") == ["line 13: model.widht: unknown key (did you mean 'width'?)"]
    assert "unknown variant 'papr' (did you mean 'paper'?)" in problems(tmp_path, text, "papr")[0]


def test_stage_is_shared_by_network_and_linearization(tmp_path):
    text = """\
    data:
      source: digits
      n_train: 20
      n_test: 10
      labels: {kind: eigenvector_sign, stage: eig, eigen_index: 2}
    model: {depth: 2, width: 5}
    train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
    stages:
      gram: {compute: ntk_gram}
      eig: {compute: eigendecomposition, input: gram, top_k: 5}
    measure: [loss]
    sweep: {model_kind: [network, linearized], eigen_index: [2, 3], seed: [0, 1]}
    """
    plan = plan_study(load_study(write(tmp_path, text)), tmp_path / "results")
    assert len(plan.runs) == 8 and len({r.id for r in plan.runs}) == 8
    computes = sorted(s.compute for s in plan.stages.values())
    assert computes == ["eigendecomposition"] * 2 + ["ntk_gram"] * 2  # one pair per seed
    assert all(r.stage_paths["labels"].parent.name == "eigendecomposition" for r in plan.runs)


# --- cases, variants and theory measurements ---------------------------------------------------

CASES = BASE.replace("measure: [loss, t_half]", "measure: [loss, t_half, t_half_theory]") + """\
sweep:
  sigma: [0.1, 0.2]
  cases:
    dataset:
      whitened: {}
      raw: {data: {gamma: null}, model: {width: 7}}
"""


def test_cases_axis_merges_overrides(tmp_path):
    study = load_study(write(tmp_path, CASES))
    assert study.axes == ["sigma", "dataset"] and len(study.runs) == 4
    by_point = {(p["sigma"], p["dataset"]): r for p, r in zip(study.points, study.runs)}
    assert by_point[(0.2, "raw")].data.gamma is None and by_point[(0.2, "raw")].model.width == 7
    assert by_point[(0.1, "whitened")].data.gamma == 0.0 and by_point[(0.1, "whitened")].model.width == 5


def test_theory_measurement_applies_where_its_assumptions_hold(tmp_path):
    """t_half_theory needs whitened data: NaN for the raw case, an error only if no run qualifies."""
    load_study(write(tmp_path, CASES))
    found = problems(tmp_path, CASES.replace("      whitened: {}\n", "      whitened: {data: {gamma: 0.5}}\n"))
    assert any("t_half_theory: applies only with whitened data" in p for p in found)


def test_case_errors_point_at_the_override(tmp_path):
    found = problems(tmp_path, CASES.replace("model: {width: 7}", "model: {width: -7}"))
    assert found == ["line 12: sweep.cases.dataset.raw.model.width: case dataset='raw': "
                     "Input should be greater than or equal to 1"]
    found = problems(tmp_path, CASES.replace("raw: {data:", "raw: {dta:"))
    assert "may override seed, data, model, train, scaling, not 'dta' (did you mean 'data'?)" in found[0]
    found = problems(tmp_path, CASES.replace("    dataset:\n", "    method:\n"))
    assert "case axis name 'method' is reserved" in found[0]
    found = problems(tmp_path, CASES.replace("    dataset:\n", "    sigma:\n"))
    assert "axis 'sigma' is set twice in one product" in found[0]
    found = problems(tmp_path, CASES.replace("  sigma: [0.1, 0.2]\n", "").replace("    dataset:\n", "    gamma:\n"))
    assert "'gamma' names several spec keys (data.gamma, model.gamma)" in found[0]


SPEC_AXIS_CASES = BASE.replace("measure: [loss, t_half]", "measure: [loss]") + """sweep:
  cases:
    activation:
      relu: {data: {gamma: null}, model: {depth: 2}}
      linear: {}
"""


def test_case_axis_named_like_a_spec_axis_sets_it(tmp_path):
    """A case axis named like a spec axis is that axis: each label is its value, set after the
    label's overrides (kernel_specialization: a ReLU net on digits vs a linear net on teachers)."""
    study = load_study(write(tmp_path, SPEC_AXIS_CASES))
    assert study.axes == ["activation"] and study.points == [{"activation": "relu"}, {"activation": "linear"}]
    relu, linear = study.runs
    assert (relu.model.activation, relu.model.depth, relu.data.gamma) == ("relu", 2, None)
    assert (linear.model.activation, linear.model.depth, linear.data.gamma) == ("linear", 3, 0.0)
    found = problems(tmp_path, SPEC_AXIS_CASES.replace("linear: {}", "linear: {model: {activation: relu}}"))
    assert "case activation='linear' sets model.activation, which the label sets" in found[0]
    found = problems(tmp_path, SPEC_AXIS_CASES.replace("linear: {}", "lenear: {}"))
    assert any("activation='lenear'" in p and "Input should be" in p for p in found)


def test_variant_sweep_replaces_the_base_sweep(tmp_path):
    text = CASES + "variants:\n  paper:\n    sweep: {sigma: [0.3]}\n"
    study = load_study(write(tmp_path, text), "paper")
    assert study.points == [{"sigma": 0.3}]


def test_measurement_options_are_checked(tmp_path):
    found = problems(tmp_path, BASE.replace("[loss, t_half]", "[loss, {name: t_half, ridge: 0.1}]"))
    assert any("option 'ridge' does not apply to 't_half'" in p for p in found)


def test_local_data_is_checked_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("NTKPIPE_DATA", raising=False)
    text = BASE.replace("{source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}",
                        f"{{source: mnist, path: {tmp_path / 'nowhere'}, n_train: 8}}")
    found = problems(tmp_path, text)
    assert any(f"line 1: data.path: {tmp_path / 'nowhere'}" in p for p in found), found
    assert any("train-images-idx3-ubyte" in p for p in found)


def test_shipped_specs_are_valid(repo, monkeypatch):
    """Every variant of every shipped spec validates (paper variants minus their local data files)."""
    from ntkpipe.study import checks
    from ntkpipe.study.load import variant_names

    monkeypatch.setattr(checks, "data_file_problems", lambda spec, verify_checksums: [])
    for path in sorted((repo / "specs").glob("*.yaml")):
        for variant in variant_names(path):
            assert load_study(path, variant).runs


# --- extension points: architectures, measurement options, stages ------------------------------

CNN_STUDY = """\
data: {source: digits, n_train: 20, n_test: 10, labels: {kind: two_groups}}
model: {architecture: cnn, conv: [{channels: 2, kernel_size: 3, pool: avg}], dense: [4]}
train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
measure: [loss]
"""


def test_architectures_are_a_union_with_their_own_fields(tmp_path):
    study = load_study(write(tmp_path, CNN_STUDY))
    assert study.runs[0].model.architecture == "cnn" and study.runs[0].model.conv[0].pool == "avg"
    found = problems(tmp_path, CNN_STUDY.replace("dense: [4]", "dense: [4], depth: 3"))
    assert found == ["line 2: model.depth: unknown key (allowed: activation, architecture, bias, conv, dense, gamma, "
                     "kind, origin, output_scale, parameterization, preset, sigma)"]
    found = problems(tmp_path, CNN_STUDY.replace("conv: [{channels: 2, kernel_size: 3, pool: avg}], dense: [4]",
                                                 "preset: lenet5, conv: []"))
    assert any("give either 'preset' (lenet5) or 'conv'" in p for p in found)
    found = problems(tmp_path, CNN_STUDY.replace("cnn,", "cnnn,"))
    assert any("line 2: model" in p and "'cnnn'" in p and "'mlp', 'cnn'" in p for p in found)


def test_measurements_declare_the_architectures_they_read(tmp_path):
    text = CNN_STUDY.replace("labels: {kind: two_groups}", "classes: [0, 1]").replace(
        "measure: [loss]", "measure: [loss, readout_norm_sq]")
    found = problems(tmp_path, text)
    assert found == ["line 4: measure.1: readout_norm_sq: reads mlp weights; model.architecture is 'cnn' "
                     "(applies to: mlp)"]


def test_a_case_that_changes_architecture_replaces_the_model_section(tmp_path):
    text = BASE + """\
sweep:
  cases:
    architecture:
      mlp: {}
      cnn: {data: {source: digits, dim: null, gamma: null, classes: [0, 1]},
            model: {architecture: cnn, preset: lenet5}}
"""
    study = load_study(write(tmp_path, text.replace("measure: [loss, t_half]", "measure: [loss]")))
    assert [r.model.architecture for r in study.runs] == ["mlp", "cnn"]
    assert study.runs[1].model.preset == "lenet5" and study.points[1] == {"architecture": "cnn"}


def test_measurement_options_are_declared_once_with_defaults(tmp_path):
    study = load_study(write(tmp_path, BASE.replace("measure: [loss, t_half]",
                                                    "measure: [loss, first_layer_alignment, t_align]")))
    assert study.runs[0].measure[2].options == {"threshold": 0.5}  # the declared default, in the run's config
    found = problems(tmp_path, BASE.replace("measure: [loss, t_half]",
                                            "measure: [loss, first_layer_alignment, {name: t_align, treshold: 0.3}]"))
    assert any("option 'treshold' does not apply to 't_align' (did you mean 'threshold'?)" in p for p in found)
    found = problems(tmp_path, BASE.replace("measure: [loss, t_half]",
                                            "measure: [loss, {name: kernel_predictors, rcond: 2.0}]").replace(
                                                "n_train: 8", "n_train: 8, n_test: 4"))
    assert any("measure.1.rcond: kernel_predictors: option 'rcond' must be < 1.0, got 2.0" in p for p in found)


def test_stage_references_must_provide_what_the_run_reads(tmp_path):
    text = """\
data:
  source: digits
  n_train: 20
  n_test: 10
  labels: {kind: eigenvector_sign, stage: nads, eigen_index: 2}
model: {depth: 2, width: 5}
train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
stages:
  nads: {compute: nad}
measure: [loss]
"""
    found = problems(tmp_path, text)
    assert any("line 5: data.labels.stage: stage 'nads' computes nad, which provides directions; data.labels "
               "needs a stage that provides labels (eigendecomposition)" in p for p in found)
    origin = text.replace("labels: {kind: eigenvector_sign, stage: nads, eigen_index: 2}", "classes: [0, 1]").replace(
        "model: {depth: 2, width: 5}", "model: {depth: 2, width: 5, kind: linearized, origin: {stage: pre, epochs: 3}}"
    ).replace("nads: {compute: nad}", "pre: {compute: pretrain}")
    found = problems(tmp_path, origin)
    assert any("give train.epochs (not steps or max_time)" in p for p in found)
    fixed = load_study(write(tmp_path, origin.replace("steps: 2", "epochs: 3")))
    assert fixed.runs[0].model.origin.epochs == 3


def test_a_batch_larger_than_the_training_set_is_stopped_at_the_key_that_sets_it(tmp_path):
    """At the sweep value of n_train that is too small, else at train.batch_size itself."""
    text = BASE.replace("  max_time: 1", "  max_time: 1\n  batch_size: 6") + "sweep:\n  n_train: [4, 8]\n"
    found = problems(tmp_path, text)
    assert found == ["line 9: sweep.n_train: sweep value n_train=4: train.batch_size 6 exceeds "
                     "data.n_train 4; lower the batch size or use more training points"]
    found = problems(tmp_path, BASE.replace("  max_time: 1", "  max_time: 1\n  batch_size: 9"))
    assert found == ["line 6: train.batch_size: train.batch_size 9 exceeds data.n_train 8; lower the batch size "
                     "or use more training points"]


def test_unknown_keys_inside_a_stage_kind_get_suggestions(tmp_path):
    text = CNN_STUDY.replace("labels: {kind: two_groups}", "labels: {kind: eigenvector_sign, stage: eig, eigen_index: 2}")
    text += "stages:\n  gram: {compute: ntk_gram}\n  eig: {compute: eigendecomposition, input: gram, topk: 3}\n"
    assert problems(tmp_path, text) == ["line 7: stages.eig.topk: unknown key (did you mean 'top_k'?)"]


@pytest.mark.parametrize("old, new, key", [
    ("lr: 1e-3", "lr: .inf", "train.optimizer.lr"),
    ("lr: 1e-3", "lr: 1e400", "train.optimizer.lr"),
    ("max_time: 1", "max_time: .inf", "train.max_time"),
    ("sigma: 0.1", "sigma: .nan", "model.sigma"),
])
def test_non_finite_numbers_are_rejected_at_their_key(tmp_path, old, new, key):
    found = problems(tmp_path, BASE.replace(old, new))
    assert any(key in p and "finite" in p for p in found), found


@pytest.mark.parametrize("classes, message", [
    ("[0, 11]", "source 'digits' has the classes 0 … 9"),
    ("[0, 0, 1]", "lists a class twice"),
])
def test_classes_must_exist_and_be_distinct(tmp_path, classes, message):
    text = BASE.replace("{source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}",
                        f"{{source: digits, classes: {classes}, n_train: 8}}")
    found = problems(tmp_path, text)
    assert any("data.classes" in p and message in p for p in found), found


def test_more_digits_than_the_pool_is_a_validation_error(tmp_path):
    text = BASE.replace("{source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}",
                        "{source: digits, classes: [0, 1], n_train: 300, n_test: 100}")
    found = problems(tmp_path, text)
    assert any("data.n_train" in p and "exceeds the 360 digits of classes [0, 1]" in p for p in found), found
