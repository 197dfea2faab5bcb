"""Snakemake ``resources:`` of each job, estimated from its shapes.

Memory is the largest arrays a job holds, in float64: a Gram over n (example, output) rows takes n²·8
bytes and an eigendecomposition or a regression a few more of those; a block of per-example
Jacobians takes block·C·#params·8 bytes. A 1 GiB allowance covers the JAX runtime. Runtimes are
generous bounds (a cluster kills a job that exceeds its request), overridable with the config key
``runtime_minutes``.
"""

from __future__ import annotations

import math

import jax

from ntkpipe.data import output_count
from ntkpipe.models import build_model
from ntkpipe.spec.schema import DataSpec, RunSpec

MIB = 2**20
BASELINE_MB = 1024
JACOBIAN_BLOCK = 64
IMAGE_SHAPES = {"digits": (8, 8, 1), "mnist": (28, 28, 1), "cifar10": (32, 32, 3)}
RUNTIME_MINUTES = {"train": 120, "final": 120, "stage": 120, "aggregate": 15, "plot": 5}


def input_shape(data: DataSpec) -> tuple[int, ...]:
    """The shape of one input of ``data``, without loading it."""
    if data.source == "nad":
        return tuple(data.shape)
    if data.source in IMAGE_SHAPES:
        height, width, channels = IMAGE_SHAPES[data.source]
        if data.image_size is not None:
            height = width = data.image_size
        return height, width, 1 if data.grayscale else channels
    return (data.dim,)


def parameter_count(run: RunSpec) -> int:
    """Trainable parameters of the run's network (built abstractly: no arrays are allocated)."""
    model = run.model.model_copy(update={"init": "gaussian"}) if hasattr(run.model, "init") else run.model
    shapes = jax.eval_shape(lambda: build_model(model, input_shape(run.data), output_count(run.data), run.seed))
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(shapes)
               if isinstance(leaf, jax.ShapeDtypeStruct) and jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact))


def memory_mb(run: RunSpec, examples: int) -> int:
    """Memory of a job holding the NTK Gram of ``run``'s network over ``examples`` inputs: three Grams
    (the Gram, an eigendecomposition's workspace and its vectors), a Jacobian block and the data."""
    outputs = output_count(run.data)
    params = parameter_count(run)
    gram = 3 * (examples * outputs) ** 2
    jacobian = 2 * min(examples, JACOBIAN_BLOCK) * outputs * params + 4 * params
    data = examples * math.prod(input_shape(run.data))
    return BASELINE_MB + math.ceil(8 * (gram + jacobian + data) / MIB)


def run_memory_mb(run: RunSpec) -> int:
    """A training run measures Grams on its training points (test points for kernel regression)."""
    return memory_mb(run, run.data.n_train + run.data.n_test)


def pack_memory_mb(runs: list[RunSpec]) -> int:
    """A packed training job (:mod:`ntkpipe.train.packed`): one member's measurements (members
    measure one at a time) plus what a checkpoint holds for all k members at once, on the device
    and on the host: k training Grams of (P·C)² and k outputs on train ∪ test."""
    run = runs[0]
    outputs = output_count(run.data)
    shared = 2 * len(runs) * ((run.data.n_train * outputs) ** 2 + (run.data.n_train + run.data.n_test) * outputs)
    return max(run_memory_mb(r) for r in runs) + math.ceil(8 * shared / MIB)


def stage_memory_mb(run: RunSpec) -> int:
    """A stage holds a Gram (or its eigendecomposition, or NADs) over the run's train ∪ test points."""
    return memory_mb(run, run.data.n_train + run.data.n_test)


def runtime_minutes(rule: str, config: dict) -> int:
    """The runtime a ``rule``'s jobs request: ``config['runtime_minutes'][rule]`` or the default."""
    return int(config.get("runtime_minutes", {}).get(rule, RUNTIME_MINUTES[rule]))
