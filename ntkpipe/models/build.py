"""Instantiate the model a spec describes; the one place where a seed becomes initial weights.

:data:`ARCHITECTURES` maps ``model.architecture`` to its record (options model, builder, capabilities;
:mod:`ntkpipe.models.architecture`); the options model is its member of ``ntkpipe.lang.schema.ModelSpec``.
"""

from __future__ import annotations

import math
from typing import cast

import jax
import numpy as np

from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import CnnSpec, MlpSpec, ModelSpec, ResnetSpec, WideResnetSpec
from ntkpipe.models.architecture import Architecture
from ntkpipe.models.cnn import CNN, LENET5, ConvLayer
from ntkpipe.models.init import mirrored, near_parallel
from ntkpipe.models.linearized import Linearized
from ntkpipe.models.mlp import MLP
from ntkpipe.models.resnet import ResNet, Stage


def run_keys(seed: int) -> tuple[jax.Array, jax.Array]:
    """(init key, batch-order key) of a run: fold_in(PRNGKey(seed), 0) and (…, 1)."""
    key = jax.random.PRNGKey(seed)
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


def output_rescaling(spec: ModelSpec) -> float:
    """γ of g = f/γ (kernel-alignment Sec. 4.2): ``model.gamma``, except for the OFE kinds, whose γ is
    that of Eq. 6 and whose K₀ is the NTK of the unscaled network."""
    return spec.gamma if MODEL_KINDS[spec.kind].rescaled else 1.0


def _common(spec) -> dict:
    """Fields every builder takes; the output is divided by the feature-learning rate γ."""
    return dict(activation=spec.activation, parameterization=spec.parameterization, sigma=spec.sigma,
                output_scale=spec.output_scale / output_rescaling(spec), bias=spec.bias)


def build_mlp(spec: MlpSpec, input_shape: tuple[int, ...], out_size: int, key, **common) -> MLP:
    variances = None if spec.layer_variance is None else tuple(spec.layer_variance)
    return MLP(math.prod(input_shape), spec.width, spec.depth, out_size, key=key, variances=variances, **common)


def build_cnn(spec: CnnSpec, input_shape: tuple[int, ...], out_size: int, key, **common) -> CNN:
    if spec.preset == "lenet5":
        conv, dense = LENET5
    else:
        assert spec.conv is not None, "a CnnSpec gives a preset or conv layers"
        conv = [ConvLayer(**layer.model_dump()) for layer in spec.conv]
        dense = spec.dense or []
    image = cast("tuple[int, int, int]", tuple(input_shape))  # (H, W, channels): build_model checks
    return CNN(image, conv, dense, out_size, key=key, **common)


def build_resnet(spec: ResnetSpec | WideResnetSpec, input_shape: tuple[int, ...], out_size: int, key,
                 **common) -> ResNet:
    stem = spec.stages[0][0] if spec.architecture == "resnet" else 16
    image = cast("tuple[int, int, int]", tuple(input_shape))  # (H, W, channels): build_model checks
    return ResNet(image, stem, [Stage(*stage) for stage in spec.stages], out_size,
                  preactivation=spec.architecture == "wide_resnet", norm=spec.norm == "batch", key=key, **common)


ARCHITECTURES: dict[str, Architecture] = {record.name: record for record in (
    Architecture("mlp", MlpSpec, build_mlp, MLP, inputs="vector", mlp_weights=True),
    Architecture("cnn", CnnSpec, build_cnn, CNN, inputs="image"),
    Architecture("resnet", ResnetSpec, build_resnet, ResNet, inputs="image", stateful=True),
    Architecture("wide_resnet", WideResnetSpec, build_resnet, ResNet, inputs="image", stateful=True),
)}
"""``model.architecture`` → its record (:class:`~ntkpipe.models.architecture.Architecture`)."""


def learning_rate_scale(spec: ModelSpec) -> float:
    """γ²: a network with feature-learning rate γ trains with η = η₀γ² (kernel-alignment App. C)."""
    return output_rescaling(spec) ** 2


def build_model(spec: ModelSpec, input_shape: tuple[int, ...], out_size: int, seed: int,
                input_direction: np.ndarray | None = None):
    """The network of ``spec`` at init (or its linearization for ``kind: linearized``; kernel kinds
    evolve the NTK of this network). ``input_direction`` is the unit direction n of the training
    inputs that a near-parallel init aligns the readout with."""
    init_key, _ = run_keys(seed)
    record = ARCHITECTURES[spec.architecture]
    if record.inputs == "image" and len(input_shape) != 3:
        raise ValueError(f"model.architecture {spec.architecture!r} needs image inputs (H, W, channels), "
                         f"got shape {tuple(input_shape)}")
    net = record.build(spec, tuple(input_shape), out_size, init_key, **_common(spec))
    if isinstance(spec, MlpSpec) and spec.init == "near_parallel":  # only an MLP has an init
        if input_direction is None:
            raise ValueError("init 'near_parallel' needs the direction of the training inputs")
        net = near_parallel(cast(MLP, net), input_direction, spec.disturbance, jax.random.fold_in(init_key, 2))
    if isinstance(spec, MlpSpec) and spec.init == "mirrored":
        net = mirrored(cast(MLP, net))
    return Linearized(net) if MODEL_KINDS[spec.kind].linearized else net
