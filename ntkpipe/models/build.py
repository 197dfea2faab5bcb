"""Instantiate the model a spec describes; the one place where a seed becomes initial weights.

:data:`ARCHITECTURES` maps ``model.architecture`` to the builder of its network; the spec of each
is its member of ``ntkpipe.lang.schema.ModelSpec``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import numpy as np

from ntkpipe.lang.schema import OFE_KINDS, CnnSpec, MlpSpec, ModelSpec
from ntkpipe.models.cnn import CNN, LENET5, ConvLayer
from ntkpipe.models.init import mirrored, near_parallel
from ntkpipe.models.linearized import Linearized
from ntkpipe.models.mlp import MLP


def run_keys(seed: int) -> tuple[jax.Array, jax.Array]:
    """(init key, batch-order key) of a run: fold_in(PRNGKey(seed), 0) and (…, 1)."""
    key = jax.random.PRNGKey(seed)
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


def output_rescaling(spec: ModelSpec) -> float:
    """γ of g = f/γ (kernel-alignment Sec. 4.2): ``model.gamma``, except for the OFE kinds, whose γ is
    that of Eq. 6 and whose K₀ is the NTK of the unscaled network."""
    return 1.0 if spec.kind in OFE_KINDS else spec.gamma


def _common(spec) -> dict:
    """Fields every builder takes; the output is divided by the feature-learning rate γ."""
    return dict(activation=spec.activation, parameterization=spec.parameterization, sigma=spec.sigma,
                output_scale=spec.output_scale / output_rescaling(spec), bias=spec.bias)


def build_mlp(spec: MlpSpec, input_shape: tuple[int, ...], out_size: int, key) -> MLP:
    variances = None if spec.layer_variance is None else tuple(spec.layer_variance)
    return MLP(math.prod(input_shape), spec.width, spec.depth, out_size, key=key, variances=variances, **_common(spec))


def build_cnn(spec: CnnSpec, input_shape: tuple[int, ...], out_size: int, key) -> CNN:
    if len(input_shape) != 3:
        raise ValueError(f"model.architecture 'cnn' needs image inputs (H, W, channels), got shape {input_shape}")
    if spec.preset == "lenet5":
        conv, dense = LENET5
    else:
        conv = [ConvLayer(**layer.model_dump()) for layer in spec.conv]
        dense = spec.dense or []
    return CNN(tuple(input_shape), conv, dense, out_size, key=key, **_common(spec))


ARCHITECTURES: dict[str, Callable[..., eqx.Module]] = {"mlp": build_mlp, "cnn": build_cnn}
"""``model.architecture`` → builder ``(spec, input_shape, out_size, key) → network``."""


def learning_rate_scale(spec: ModelSpec) -> float:
    """γ²: a network with feature-learning rate γ trains with η = η₀γ² (kernel-alignment App. C)."""
    return output_rescaling(spec) ** 2


def build_model(spec: ModelSpec, input_shape: tuple[int, ...], out_size: int, seed: int,
                input_direction: np.ndarray | None = None):
    """The network of ``spec`` at init (or its linearization for ``kind: linearized``; kernel kinds
    evolve the NTK of this network). ``input_direction`` is the unit direction n of the training
    inputs that a near-parallel init aligns the readout with."""
    init_key, _ = run_keys(seed)
    net = ARCHITECTURES[spec.architecture](spec, tuple(input_shape), out_size, init_key)
    if getattr(spec, "init", "gaussian") == "near_parallel":
        if input_direction is None:
            raise ValueError("init 'near_parallel' needs the direction of the training inputs")
        net = near_parallel(net, input_direction, spec.disturbance, jax.random.fold_in(init_key, 2))
    if getattr(spec, "init", "gaussian") == "mirrored":
        net = mirrored(net)
    return Linearized(net) if spec.kind == "linearized" else net
