"""Job resources estimated from shapes, and the workflow's lint."""

from __future__ import annotations

import math
from pathlib import Path

from jax.flatten_util import ravel_pytree

from ntkpipe.data import input_shape, load_dataset, output_count
from ntkpipe.lang.schema import RunSpec
from ntkpipe.models import build_model, trainable
from ntkpipe.resources import MIB, memory_mb, pack_memory_mb, parameter_count, run_memory_mb
from tests.conftest import snakemake_workflow

ROOT = Path(__file__).resolve().parents[1]


def run(data: dict, model: dict) -> RunSpec:
    return RunSpec.model_validate({"seed": 0, "data": data, "model": model, "measure": [{"name": "loss"}],
                                   "train": {"optimizer": {"name": "gd", "lr": 0.1}, "steps": 1}})


def test_parameter_count_and_input_shape_match_the_built_network():
    for spec in (run({"source": "digits", "classes": [0, 1], "n_train": 10}, {"depth": 3, "width": 7, "bias": True}),
                 run({"source": "digits", "n_train": 10, "image_size": 12},
                     {"architecture": "cnn", "conv": [{"channels": 3, "kernel_size": 3, "pool": "avg"}], "dense": [5]}),
                 run({"source": "linear_teacher", "dim": 6, "n_train": 4}, {"depth": 2, "width": 9})):
        data = load_dataset(spec.data)
        assert input_shape(spec.data) == data.input_shape
        net = build_model(spec.model, data.input_shape, output_count(spec.data), spec.seed)
        assert parameter_count(spec) == ravel_pytree(trainable(net)[0])[0].size


def test_memory_grows_with_the_square_of_the_gram_rows():
    spec = run({"source": "digits", "n_train": 10}, {"depth": 2, "width": 8})   # ten outputs
    small, large = memory_mb(spec, 100), memory_mb(spec, 1000)
    gram_bytes = 3 * 8 * ((1000 * 10) ** 2 - (100 * 10) ** 2)
    assert abs((large - small) - gram_bytes / MIB) < 2 + 8 * 1000 * 64 / MIB
    assert math.isclose(large, 1024 + 3 * 8 * (1000 * 10) ** 2 / MIB, rel_tol=0.01)


def test_a_pack_adds_its_members_training_grams_on_device_and_host():
    spec = run({"source": "digits", "n_train": 100, "n_test": 20}, {"depth": 2, "width": 8})   # ten outputs
    grams = 2 * 4 * 8 * (100 * 10) ** 2 / MIB
    assert 0 <= pack_memory_mb([spec] * 4) - run_memory_mb(spec) - grams < 1


def test_every_rule_has_a_log_and_passes_lint():
    # `snakemake --lint --config studies=silent_alignment pack=1` (pack: also the train_pack_<id> rules)
    with snakemake_workflow(ROOT, config={"studies": "silent_alignment", "pack": 1}) as workflow:
        assert workflow.lint() is False, "Snakemake printed lints (above)"
