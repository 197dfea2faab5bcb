r"""Time cost model of the generic NTK implementations.

Following Novak et al. 2022 ("Fast Finite Width Neural Tangent Kernel", Sec. 3), for N1 × N2
examples, C outputs, P trainable parameters and [FP] the FLOPs of one forward pass on one example:

    Jacobian contraction:    (N1 + N2)·C·[FP] + N1·N2·C²·P    (N1·C·[FP] + … when x2 is x1)
    NTK-vector products:     N1·N2·C·[FP]

Constant factors (a vjp or jvp is a small multiple of [FP]) and the halving of the symmetric case,
common to both, are left out.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import equinox as eqx
import jax
from jaxtyping import Array, Float

from ntkpipe.models import trainable


class GenericCosts(NamedTuple):
    """Modelled FLOPs of the two generic implementations for one kernel (module docstring)."""

    jacobian: float
    vector_products: float


def forward_flops(model: eqx.Module, example: Float[Array, "..."]) -> float:
    """[FP]: FLOPs of ``model`` on one ``example``, from XLA:CPU's cost analysis of the forward pass
    lowered (or, where JAX analyses only compiled programs, compiled) for the CPU on every backend: a
    GPU's compiled convolutions are library calls that its analysis does not count (a conv-heavy
    CNN's [FP] came out 8,206 on an H200 against 440,528 on XLA:CPU).

    Only shapes and dtypes are used, so ``model`` and ``example`` may be tracers (inside ``jax.jit``).
    """
    arrays, rest = eqx.partition(model, eqx.is_array)
    on_cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False),
                                                           sharding=on_cpu), (arrays, example))
    lowered = jax.jit(lambda a, x: eqx.combine(a, rest)(x)).lower(*abstract)
    analysis = lowered.cost_analysis() or lowered.compile().cost_analysis()
    assert analysis is not None, "XLA:CPU analyses the costs of a compiled program"
    return float(analysis["flops"])


def parameter_count(model: eqx.Module) -> int:
    """P: the number of trainable parameters (:func:`ntkpipe.models.trainable`)."""
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(trainable(model)[0]))


def generic_costs(model: eqx.Module, example: Float[Array, "..."], n1: int, n2: int | None) -> GenericCosts:
    """Modelled FLOPs of the NTK of ``model`` on ``n1`` × ``n2`` examples shaped like ``example``.

    ``n2=None`` means x2 is x1, whose Jacobian is counted once (N1·C·[FP]).
    """
    fp = forward_flops(model, example)
    (num_outputs,) = jax.eval_shape(model, example).shape  # pyright: ignore[reportArgumentType]  # eqx.Module: no __call__
    jacobians = n1 if n2 is None else n1 + n2
    n2 = n1 if n2 is None else n2
    return GenericCosts(
        jacobian=jacobians * num_outputs * fp + n1 * n2 * num_outputs**2 * parameter_count(model),
        vector_products=n1 * n2 * num_outputs * fp,
    )
