"""Mistakes that used to validate and then fail or mislead at run time: options larger than the data
they are drawn from, a network that does not take the data's inputs, a run that cannot fit the
machine's memory, a misspelt ``--config`` key; and the language's conveniences for cases that switch
``data.source`` and for YAML anchors (top-level ``x-`` keys)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import jax
import pytest

from ntkpipe.cli import main
from ntkpipe.data import input_shape, output_count
from ntkpipe.errors import ConfigError, SpecError
from ntkpipe.lang.schema import RunSpec
from ntkpipe.models import build_model, trainable
from ntkpipe.models.fixed import is_fixed
from ntkpipe.resources import (
    MIB,
    memory_limit,
    memory_mb,
    parameter_count,
    peak_memory_mb,
    run_memory_mb,
    state_bytes,
)
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from ntkpipe.train.optim import update_direction
from ntkpipe.workflow import CONFIG_KEYS, build_index, check_config, packing
from tests.conftest import run_snakemake

GIB = 2**30


def write(directory: Path, text: str, name: str = "study.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(path: Path, variant: str = "default", **kwargs) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_study(path, variant, **kwargs)
    return err.value.problems


def run_spec(model: dict, optimizer: dict, measure=("loss",), data=None, dtype="float32") -> RunSpec:
    return RunSpec.model_validate({
        "seed": 0, "data": data or {"source": "linear_teacher", "dim": 7, "n_train": 10, "n_test": 5},
        "model": model, "measure": [{"name": m} for m in measure],
        "train": {"optimizer": optimizer, "steps": 1, "dtype": dtype}})


# --- memory estimate --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["network", "linearized"])
@pytest.mark.parametrize("optimizer, dtype", [({"name": "adam", "lr": 1e-3}, "float32"),
                                              ({"name": "sgd", "lr": 0.1, "momentum": 0.9}, "float64"),
                                              ({"name": "gd", "lr": 0.1}, "float32")])
def test_parameter_and_optimizer_memory_equals_the_built_model_and_optax_state(kind, optimizer, dtype):
    """The estimate's parameters + optimizer state (Adam: two moments; momentum: one; a linearization
    also keeps θ₀) against the bytes of the built model's arrays and optax's initialized state."""
    run = run_spec({"depth": 3, "width": 13, "bias": True, "kind": kind}, optimizer, dtype=dtype)
    net = jax.tree.map(lambda a: a.astype(dtype) if isinstance(a, jax.Array) else a,
                       build_model(run.model, input_shape(run.data), output_count(run.data), run.seed),
                       is_leaf=is_fixed)  # the fixed scalars c_ℓ, κ are not cast, trained or counted
    params = trainable(net)[0]
    state = update_direction(run.train.optimizer).init(params)
    arrays = [leaf for leaf in jax.tree.leaves(net, is_leaf=is_fixed) + jax.tree.leaves(state)
              if isinstance(leaf, jax.Array) and jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact)]
    assert state_bytes(run) == sum(a.nbytes for a in arrays)
    assert parameter_count(run) == (7 * 13 + 13) + (13 * 13 + 13) + (13 + 1)


def test_memory_counts_only_the_grams_the_measurements_hold():
    """A run measuring only the loss holds no Gram; kernel_norm one over the training points,
    kernel_predictors one over train ∪ test: 3·8·(n·C)² bytes each (the Gram and an eigendecomposition)."""
    model, opt = {"depth": 2, "width": 8}, {"name": "gd", "lr": 0.1}
    loss_only = run_spec(model, opt)
    assert run_memory_mb(loss_only) == memory_mb(loss_only, 0)
    assert run_memory_mb(run_spec(model, opt, ("loss", "kernel_norm"))) == memory_mb(loss_only, 10)
    assert run_memory_mb(run_spec(model, opt, ("kernel_predictors",))) == memory_mb(loss_only, 15)
    big = run_spec({"depth": 2, "width": 8}, opt, ("kernel_norm",),
                   {"source": "gaussian_mixture", "dim": 10, "clusters": 10, "n_train": 3000})
    gram = 3 * 8 * (3000 * 10) ** 2
    assert math.isclose(run_memory_mb(big), 1024 + gram / MIB, rel_tol=1e-3)


def test_a_labels_stage_gram_counts_for_the_run():
    """Eigenvector-sign labels read a stage that holds the Gram over train ∪ test."""
    data = {"source": "digits", "n_train": 1000, "n_test": 500, "labels": {"kind": "eigenvector_sign", "stage": "e",
                                                                      "eigen_index": 1}}
    run = run_spec({"depth": 2, "width": 8}, {"name": "gd", "lr": 0.1}, data=data)
    assert run_memory_mb(run) == memory_mb(run, 0) < peak_memory_mb(run) == memory_mb(run, 1500)


WIDE = """\
data: {source: linear_teacher, dim: 5, n_train: 20}
model: {depth: 3, width: 8}
train: {optimizer: {name: adam, lr: 0.001}, steps: 10}
measure: [loss]
sweep: {width: [8, 10000000]}
variants:
  paper: {sweep: {width: [20000000]}}
"""


def test_a_run_that_cannot_fit_is_refused_with_its_sweep_point_and_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NTKPIPE_MEMORY_LIMIT", raising=False)
    path = write(tmp_path, WIDE)
    found = problems(path, memory_limit=24 * GIB)
    params = 5 * 10**7 + 10**7 + 10**14 + 10**7 + 10**7 + 1     # three weight layers, no bias
    need = 1024 * MIB + 4 * 4 * params                            # θ, gradient and Adam's two moments, float32
    assert found == [f"line 2: model: a run (sweep point {{'width': 10000000}}) would need about "
                     f"{need / 2**40:,.0f} TiB of memory (parameters, optimizer state, NTK Grams), more than the "
                     "24 GiB a job may use on this machine: use a smaller model.width or fewer data points, or run "
                     "it on a bigger node and say how much memory a job may use there (NTKPIPE_MEMORY_LIMIT=512G); "
                     "snakemake --config memory_check=0 or ntkpipe validate --no-memory-check skips this check"]
    assert len(load_study(path).runs) == 2                       # without the check it validates

    monkeypatch.setenv("NTKPIPE_MEMORY_LIMIT", "8G")
    assert memory_limit() == 8 * GIB
    small = write(tmp_path, WIDE.replace("10000000]", "16]"), "small.yaml")
    # the default variant must fit (an error), a named variant is a note unless it is the one validated
    assert main(["validate", str(small)]) == 0
    out = capsys.readouterr()
    assert out.out == f"ok {small} (default: 2 runs; paper: 1 run)\n"
    assert f"note: [variant paper] {small}: too large for this machine, refused when this variant runs here:" in out.err
    assert main(["validate", "--variant", "paper", str(small)]) == 1
    assert "would need about" in capsys.readouterr().err
    assert main(["validate", "--variant", "paper", "--no-memory-check", str(small)]) == 0
    monkeypatch.setenv("NTKPIPE_MEMORY_LIMIT", "10000T")
    assert main(["validate", "--variant", "paper", str(small)]) == 0
    monkeypatch.setenv("NTKPIPE_MEMORY_LIMIT", "lots")
    assert main(["validate", str(small)]) == 1
    assert "NTKPIPE_MEMORY_LIMIT = 'lots' is not an amount of memory; set it like NTKPIPE_MEMORY_LIMIT=256G" \
        in capsys.readouterr().err


def test_shipped_default_variants_fit_24_gib_and_the_paper_variants_that_do_not_truly_need_more(repo, monkeypatch):
    """Only kernel_specialization's cnn_paper variant exceeds a 24 GiB machine: its alignment holds the
    training NTK Gram over 9000 CIFAR-10 images × 10 outputs, 8·90000² bytes = 60 GiB on its own."""
    from ntkpipe.study import checks
    from ntkpipe.study.load import variant_names

    monkeypatch.setattr(checks, "data_file_problems", lambda spec, verify_checksums: [])
    limit, over = int(0.9 * 24 * GIB), set()
    for path in sorted((repo / "specs").glob("*.yaml")):
        for variant in variant_names(path):
            try:
                load_study(path, variant, memory_limit=limit)
            except SpecError as err:
                assert variant != "default" and all("would need about" in p for p in err.problems), err
                over.add((path.stem, variant))
    assert over == {("kernel_specialization", "cnn_paper")}
    assert 8 * (9000 * 10) ** 2 > 60 * GIB > limit


# --- options against data sizes, stages, architectures ------------------------------------------------

STUDY = """\
data: {source: linear_teacher, dim: 4, n_train: 20}
model: {depth: 2, width: 8}
train: {optimizer: {name: gd, lr: 0.1}, steps: 10}
measure: [loss, {name: energy_concentration, top_k: 10, subset: 20}]
"""


def test_option_sizes_are_checked_at_every_sweep_point(tmp_path):
    assert load_study(write(tmp_path, STUDY)).runs
    swept = write(tmp_path, STUDY + "sweep: {n_train: [20, 12, 6]}\n")
    assert problems(swept) == [
        "line 4: measure.1.subset: energy_concentration: subset 20 exceeds data.n_train 12: the kernel is taken on "
        "the first subset training points; use subset <= 20 (sweep point {'n_train': 12})".replace("<= 20", "<= 12")]
    teachers = write(tmp_path, STUDY.replace("n_train: 20}", "n_train: 20, teachers: 3}")
                     .replace("top_k: 10, subset: 20", "top_k: 45, subset: 15"))
    assert load_study(teachers).runs                            # 15 points × 3 outputs: 45 eigenvectors


def test_stage_top_k_and_label_index_are_checked_against_the_gram(tmp_path):
    text = """\
    data: {source: digits, classes: [0, 1], n_train: 20, n_test: 5,
           labels: {kind: eigenvector_sign, stage: eig, eigen_index: 3}}
    model: {depth: 2, width: 8}
    train: {optimizer: {name: gd, lr: 0.1}, steps: 10}
    stages:
      gram: {compute: ntk_gram}
      eig: {compute: eigendecomposition, input: gram, top_k: 25}
    measure: [loss, {name: rotation, top_k: 25}]
    """
    assert load_study(write(tmp_path, text)).runs
    found = problems(write(tmp_path, text + "sweep: {n_train: [20, 19]}\n"))
    assert found == ["line 7: stages.eig.top_k: top_k 25 exceeds the 24 eigenpairs of the Gram over train ∪ test "
                     "((n_train 19 + n_test 5) × 1 output(s)); use top_k <= 24 or null (all) (sweep point "
                     "{'n_train': 19})",
                     "line 8: measure.1.top_k: rotation: top_k 25 exceeds the 24 eigenvectors of the init NTK over "
                     "train ∪ test ((n_train + n_test) × outputs); use top_k <= 24 (sweep point {'n_train': 19})"]
    found = problems(write(tmp_path, text.replace("eigen_index: 3", "eigen_index: 9").replace("top_k: 25}\n", "top_k: 8}\n")
                           .replace("rotation, top_k: 25", "rotation, top_k: 8")))
    assert found == ["line 2: data.labels: data.labels.eigen_index 9 exceeds the 8 eigenvectors of stage 'eig' (its top_k)"]
    found = problems(write(tmp_path, text.replace("rotation, top_k: 25", "rotation, top_k: 9")
                           .replace("top_k: 25}\n", "top_k: 8}\n")))
    assert found == ["line 8: measure.1.top_k: rotation: top_k 9 exceeds the 8 eigenpairs stage 'eig' keeps (its top_k); "
                     "use top_k <= 8 or raise the stage's top_k"]


def test_architecture_and_data_agree_on_the_input_shape(tmp_path):
    lenet = """\
    data: {source: digits, classes: [0, 1], n_train: 20}
    model: {architecture: cnn, preset: lenet5}
    train: {optimizer: {name: gd, lr: 0.1}, steps: 10}
    measure: [loss]
    """
    assert load_study(write(tmp_path, lenet)).runs                    # 8×8 → 4×4 → 2×2
    found = problems(write(tmp_path, lenet + "sweep: {image_size: [8, 3]}\n"))
    assert len(found) == 1 and found[0].startswith("line 2: model.architecture: the conv layers and pools of this "
                                                   "cnn shrink the inputs of shape (3, 3, 1)")
    assert found[0].endswith("(sweep point {'image_size': 3})")
    vectors = write(tmp_path, lenet.replace("source: digits, classes: [0, 1]", "source: linear_teacher, dim: 5"))
    assert problems(vectors)[0].startswith("line 2: model.architecture: a cnn needs image inputs (H, W, channels); "
                                           "data.source 'linear_teacher' gives inputs of shape (5,)")
    mlp = write(tmp_path, lenet.replace("architecture: cnn, preset: lenet5", "depth: 2, width: 4"))
    assert load_study(mlp).runs                                       # an MLP flattens the images


# --- --config keys ---------------------------------------------------------------------------------------

def test_unknown_config_keys_and_unusable_values_are_refused():
    with pytest.raises(ConfigError, match=r"--config varaint=paper: unknown key \(did you mean 'variant'\?\); "
                                          r"the workflow reads:\n  specs: "):
        check_config({"varaint": "paper"})
    for config, message in [({"pack": 2}, "give pack=0 or pack=1"), ({"gpus": -1}, "whole number of GPUs"),
                            ({"gpus": "two"}, "whole number of GPUs"), ({"memory_check": "no"}, "memory_check=0"),
                            ({"runtime_minutes": {"trian": 10}}, "rules: train, final")]:
        with pytest.raises(ConfigError, match=message):
            check_config(config)
    check_config({"specs": "s", "results": "r", "variant": "paper", "studies": "a,b", "max_runs": 5, "pack": 1,
                  "gpus": 1, "memory_check": 0, "runtime_minutes": {"train": 30}})
    assert set(CONFIG_KEYS) >= {"specs", "results", "variant", "studies", "max_runs", "pack", "gpus"}


def test_packing_is_on_by_default_only_where_jobs_get_a_gpu():
    """Packs pay on a GPU (1.5x on an H200) and not on CPU (benchmarks/README.md): the default follows
    ``gpus``; an explicit ``pack`` wins either way."""
    assert not packing({}) and not packing({"gpus": 0}) and packing({"gpus": 1}) and packing({"gpus": 2})
    assert packing({"pack": 1}) and not packing({"pack": 0, "gpus": 1})


def test_snakemake_stops_at_a_misspelt_config_key_and_an_undeclared_variant(tmp_path):
    (tmp_path / "specs").mkdir()
    write(tmp_path / "specs", STUDY + "variants:\n  paper: {model: {width: 9}}\n")
    with pytest.raises(Exception, match=r"--config varaint=paper: unknown key \(did you mean 'variant'\?\)"):
        run_snakemake(tmp_path, config={"varaint": "paper"})
    with pytest.raises(SpecError, match=r"no spec declares the variant 'papr' \(did you mean 'paper'\?\)"):
        build_index(tmp_path / "specs", tmp_path / "results", "papr")
    assert not (tmp_path / "results").exists()


# --- cases that switch data.source; x- keys ----------------------------------------------------------------

SWITCH = """\
data: {source: linear_teacher, dim: 4, n_train: 20, n_test: 6, teacher_scale: 2.0}
model: {depth: 2, width: 8}
train: {optimizer: {name: gd, lr: 0.1}, steps: 10}
measure: [loss]
sweep:
  cases:
    task:
      teacher: {}
      digits: {data: {source: digits, classes: [0, 1]}}
"""


def test_a_case_that_switches_the_data_source_drops_the_keys_it_does_not_take(tmp_path):
    study = load_study(write(tmp_path, SWITCH))
    teacher, digits = (run.data for run in study.runs)
    assert (teacher.source, teacher.dim, teacher.teacher_scale) == ("linear_teacher", 4, 2.0)
    assert (digits.source, digits.dim, digits.classes, digits.n_train, digits.n_test) == ("digits", None, [0, 1], 20, 6)
    assert digits.teacher_scale == 1.0                            # the default: not carried over from the teacher
    found = problems(write(tmp_path, SWITCH.replace("classes: [0, 1]}", "classes: [0, 1], dim: 4}")))
    assert found == ["line 9: sweep.cases.task.digits.data.dim: case task='digits': 'dim' does not apply to source "
                     "'digits'; remove it"]
    # keys the new source takes carry over (classes from digits to MNIST, as the shipped MNIST variants need)
    images = SWITCH.replace("source: linear_teacher, dim: 4,", "source: digits, classes: [3, 5],") \
        .replace(", teacher_scale: 2.0", "").replace("{source: digits, classes: [0, 1]}", "{source: mnist}")
    mnist = load_study(write(tmp_path, images), data_files=False).runs[1].data
    assert (mnist.source, mnist.classes, mnist.n_train) == ("mnist", [3, 5], 20)


ANCHORED = """\
x-net: &net {depth: 2, width: 8, activation: linear}
x-notes: anything, never validated
data: {source: linear_teacher, dim: 4, n_train: 20}
model: *net
train: {optimizer: {name: gd, lr: 0.1}, steps: 10}
measure: [loss]
sweep:
  cases:
    net:
      narrow: {}
      wide: {model: {<<: *net, width: 16}}
"""

EXPANDED = """\
data: {source: linear_teacher, dim: 4, n_train: 20}
model: {depth: 2, width: 8, activation: linear}
train: {optimizer: {name: gd, lr: 0.1}, steps: 10}
measure: [loss]
sweep:
  cases:
    net:
      narrow: {}
      wide: {model: {depth: 2, width: 16, activation: linear}}
"""


def test_x_keys_hold_anchors_and_change_no_run(tmp_path):
    anchored = plan_study(load_study(write(tmp_path, ANCHORED)), tmp_path / "results")
    expanded = plan_study(load_study(write(tmp_path, EXPANDED)), tmp_path / "results")
    assert [r.id for r in anchored.runs] == [r.id for r in expanded.runs]
    assert [r.spec.model.width for r in anchored.runs] == [8, 16]
    assert "x-net" not in anchored.study.spec.model_dump_json()
    found = problems(write(tmp_path, ANCHORED.replace("x-notes", "y-notes")))
    assert found[0].startswith("line 2: y-notes: unknown key")
