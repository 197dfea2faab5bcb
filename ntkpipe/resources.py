"""Snakemake ``resources:`` of each job, estimated from its shapes, and the memory check of validation.

Memory is the largest arrays a job holds: the parameters, their gradient and the optimizer's state
(Adam: two more copies, momentum one, a linearization its origin θ₀) in the training dtype; in
float64, the NTK Gram its measurements hold (over n (example, output) rows: n²·8 bytes, and an
eigendecomposition or a regression a few more of those: ``Measurement.gram_points``), a block of
per-example Jacobians (block·C·#params·8 bytes) and the data. A 1 GiB allowance covers the JAX
runtime. The same estimate is each job's ``mem_mb`` and what validation compares with the machine's
memory (:func:`memory_limit`). Runtimes are generous bounds (a cluster kills a job that exceeds its
request), overridable with the config key ``runtime_minutes``.
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING

from ntkpipe.errors import ConfigError
from ntkpipe.lang.model_kinds import MODEL_KINDS

if TYPE_CHECKING:  # JAX, the data and the models are imported by the estimates, not by the rules
    from ntkpipe.lang.schema import RunSpec

MIB = 2**20
BASELINE_MB = 1024
JACOBIAN_BLOCK = 64
RUNTIME_MINUTES = {"train": 120, "final": 120, "stage": 120, "aggregate": 15, "plot": 5}


def parameter_count(run: RunSpec) -> int:
    """Trainable parameters of the run's network (built abstractly: no arrays are allocated; a
    linearization trains as many). Raises ValueError when the network does not take the data's
    inputs (e.g. a CNN on vectors, or images too small for its convolutions and pools)."""
    from ntkpipe.data import input_shape, output_count

    model = run.model.model_copy(update={"kind": "network", "origin": None, "gamma": 1.0}
                                 | ({"init": "gaussian"} if hasattr(run.model, "init") else {}))
    key = (model.model_dump_json(), input_shape(run.data), output_count(run.data))
    if key not in _PARAMETERS:
        _PARAMETERS[key] = _count_parameters(model, *key[1:])
    return _PARAMETERS[key]


_PARAMETERS: dict[tuple, int] = {}
"""Parameter counts by (model section, input shape, outputs): a study's runs share a few networks."""


def _count_parameters(model, shape: tuple[int, ...], outputs: int) -> int:
    import jax

    from ntkpipe.models import build_model
    from ntkpipe.models.fixed import is_fixed

    shapes = jax.eval_shape(lambda: build_model(model, shape, outputs, 0))
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(shapes, is_leaf=is_fixed)  # c_ℓ, κ: not trained
               if isinstance(leaf, jax.ShapeDtypeStruct) and jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact))


def optimizer_copies(run: RunSpec) -> int:
    """Arrays of the parameters' size the optimizer keeps: Adam's two moments, heavy-ball momentum's one."""
    opt = run.train.optimizer
    return 2 if opt.name == "adam" else 1 if opt.momentum > 0 else 0


def state_bytes(run: RunSpec) -> int:
    """The parameters and the optimizer's state, in the training dtype (a linearization also keeps its
    origin θ₀, a copy of the parameters)."""
    import numpy as np

    copies = 1 + optimizer_copies(run) + MODEL_KINDS[run.model.kind].linearized
    return copies * parameter_count(run) * np.dtype(run.train.dtype).itemsize


def memory_mb(run: RunSpec, examples: int) -> int:
    """Memory of a job holding the NTK Gram of ``run``'s network over ``examples`` inputs: three Grams
    (the Gram, an eigendecomposition's workspace and its vectors), a Jacobian block, the parameters
    with their gradient and the optimizer's state, and the data (float64, and the training set as the
    training program reads it: in the training dtype, its rows padded for minibatches)."""
    import numpy as np

    from ntkpipe.data import input_shape, output_count
    from ntkpipe.train.minibatch_shapes import padded_rows

    outputs = output_count(run.data)
    params = parameter_count(run)
    gram = 3 * (examples * outputs) ** 2
    jacobian = 2 * min(examples, JACOBIAN_BLOCK) * outputs * params
    itemsize = np.dtype(run.train.dtype).itemsize
    gradient = params * itemsize
    per_example = math.prod(input_shape(run.data))
    data = (run.data.n_train + run.data.n_test) * per_example
    rows = run.data.n_train if run.train.batch_size is None else padded_rows(run.data.n_train)
    training = rows * (per_example + outputs) * itemsize
    return BASELINE_MB + math.ceil((8 * (gram + jacobian + data) + training + state_bytes(run) + gradient) / MIB)


def gram_points(run: RunSpec) -> int:
    """Examples in the largest NTK Gram a run's job holds: its measurements' (``Measurement.gram_points``),
    over train ∪ test for a kernel kind (it evolves the initial Gram)."""
    from ntkpipe.measure.registry import REGISTRY

    kernel = run.data.n_train + run.data.n_test if MODEL_KINDS[run.model.kind].kernel else 0
    return max([kernel] + [REGISTRY[m.name].gram_points(m.options, run) for m in run.measure if m.name in REGISTRY])


def run_memory_mb(run: RunSpec) -> int:
    """A training run (and its final job) holds the Grams its measurements take."""
    return memory_mb(run, gram_points(run))


def pack_memory_mb(runs: list[RunSpec]) -> int:
    """A packed training job (:mod:`ntkpipe.train.packed`): one member's measurements (members
    measure one at a time) plus what a checkpoint holds for all k members at once, on the device
    and on the host: k training Grams of (P·C)² and k outputs on train ∪ test."""
    from ntkpipe.data import output_count

    run = runs[0]
    outputs = output_count(run.data)
    shared = 2 * len(runs) * ((run.data.n_train * outputs) ** 2 + (run.data.n_train + run.data.n_test) * outputs)
    return max(run_memory_mb(r) for r in runs) + math.ceil(8 * shared / MIB)


def stage_memory_mb(run: RunSpec) -> int:
    """A stage holds a Gram (or its eigendecomposition, or NADs) over the run's train ∪ test points."""
    return memory_mb(run, run.data.n_train + run.data.n_test)


MEMORY_LIMIT_ENV = "NTKPIPE_MEMORY_LIMIT"
MEMORY_MARGIN = 0.9
"""Share of the machine's memory a job may plan to use (the rest: the OS, Snakemake, other jobs)."""
_UNITS = {"M": 2**20, "G": 2**30, "T": 2**40}


def memory_limit() -> int:
    """Bytes one job may use: ``$NTKPIPE_MEMORY_LIMIT`` (e.g. ``256G``, ``512000M``: a cluster node
    bigger than the machine that plans), else 90 % of this machine's physical memory."""
    given = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if not given:
        return int(MEMORY_MARGIN * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([MGT])i?B?", given, re.IGNORECASE)
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"{MEMORY_LIMIT_ENV} = {given!r} is not an amount of memory; set it like "
                          f"{MEMORY_LIMIT_ENV}=256G (units M, G, T)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def human_bytes(n_bytes: float) -> str:
    """``21.2 GiB``, ``1,455 TiB``."""
    gib = n_bytes / 2**30
    return f"{gib:.3g} GiB" if gib < 1024 else f"{gib / 1024:,.0f} TiB"


def peak_memory_mb(run: RunSpec) -> int:
    """The largest job a run needs: its training (and final) job, or the eigendecomposition stage its
    eigenvector-sign labels read (a Gram over train ∪ test). Validation compares it with :func:`memory_limit`."""
    labels = stage_memory_mb(run) if run.data.labels.stage is not None else 0
    return max(run_memory_mb(run), labels)


def runtime_minutes(rule: str, config: dict) -> int:
    """The runtime a ``rule``'s jobs request: ``config['runtime_minutes'][rule]`` or the default."""
    return int(config.get("runtime_minutes", {}).get(rule, RUNTIME_MINUTES[rule]))
