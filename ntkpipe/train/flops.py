"""FLOPs of a run's training, the leading terms: 3·B·[FP] per step of B examples (a forward and a
backward pass; [FP] the FLOPs of one example's forward pass), twice that for a linearization (its step
takes a jvp too), none for a kernel model kind (its dynamics are on its Gram). The cost model
(:mod:`ntkpipe.study.cost`) charges seconds to them, with [FP] from a run's spec; a run's training
program picks its compile options by them (:func:`ntkpipe.train.loop.training_compile_options`), with
[FP] from its network."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.models import MLP, Linearized
from ntkpipe.ntk.cost import forward_flops, parameter_count
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.train.driver import Run, total_steps


def step_flops(steps: int, batch: int, example_flops: float, linearized: bool) -> float:
    """3·(1 + linearized)·steps·B·[FP]: ``steps`` optimizer steps over batches of ``batch`` examples of
    ``example_flops`` each."""
    return 3.0 * (1 + linearized) * steps * batch * example_flops


def training_flops(run: Run) -> float:
    """:func:`step_flops` of ``run``'s training (B all training points for full-batch steps; none for a
    kernel model kind)."""
    spec = run.spec
    kind = MODEL_KINDS[spec.model.kind]
    if kind.kernel:
        return 0.0
    network = run.model0.params if isinstance(run.model0, Linearized) else run.model0
    return step_flops(total_steps(spec.train, spec.data.n_train), spec.train.batch_size or spec.data.n_train,
                      network_flops(network, np.asarray(run.data.x_train[0])), kind.linearized)


def network_flops(network: eqx.Module, example: np.ndarray) -> float:
    """[FP] of ``network`` on ``example``: 2·P for an MLP (P trainable parameters); for other
    architectures XLA's cost analysis of the forward pass (:func:`ntkpipe.ntk.cost.forward_flops`) in
    float32, as the cost model counts it, whatever the dtypes of the network and the example; cached by
    the network's structure and shapes (σ, seed and the like do not change it)."""
    if isinstance(network, MLP):
        return 2.0 * parameter_count(network)
    leaves, treedef = jax.tree.flatten(eqx.filter(network, eqx.is_array))
    key = (treedef, tuple((leaf.shape, str(leaf.dtype)) for leaf in leaves), example.shape, str(example.dtype))
    if key not in _FLOPS:
        _FLOPS[key] = forward_flops(cast_floats(network, jnp.float32), jnp.asarray(example, jnp.float32))
    return _FLOPS[key]


_FLOPS: dict[tuple, float] = {}
"""[FP] by (network structure, its arrays' shapes and dtypes, the example's shape and dtype)."""
