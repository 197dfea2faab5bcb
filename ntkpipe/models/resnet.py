"""Residual networks (channels-last) with optional BatchNorm: ResNet-18-shaped and Wide ResNets.

A network is a stem conv, stages of residual blocks, a global average pool and a linear readout,

    f(x) = κ (c_L W_L mean_{y,x} h + b_L),

with the conv and dense layers of :mod:`ntkpipe.models.cnn` (same standard / ntk parameterizations
and σ, fan-in k·k·C_in) and N the optional BatchNorm (:class:`Norm`). Two block shapes:

- post-activation (He et al. 2016; ResNet-18 on CIFAR): h ↦ φ(N(W₂ ∗ φ(N(W₁ ∗ h))) + s(h)), with
  s(h) = h, or a 1×1 projection N(W_s ∗ h) where the stride or the channels change; the stem is
  φ(N(W₀ ∗ x)), 3×3, stride 1 (no max pool, as for 32×32 images);
- pre-activation (the Wide ResNet of neural-tangents' README, ``stax`` example ``WideResnet``):
  h ↦ W₂ ∗ φ(N(W₁ ∗ φ(N(h)))) + s(h), with s(h) = W_s ∗ h, a 3×3 conv with the block's stride, in the
  first block of every group (also where shapes match), else h; the stem is W₀ ∗ x with 16 channels.

``layers`` holds every weight layer in forward order — the stem, then per block conv1, conv2 and
its shortcut projection, the readout last — each conv with the BatchNorm that follows it
(post-activation) or precedes it (pre-activation), so per-layer NTK components and learning rates
follow this index. ``model(x)`` acts on one example in inference mode (running statistics);
:meth:`ResNet.train_forward` is the train mode over a batch (:mod:`ntkpipe.models.state`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray

from ntkpipe.models.cnn import Conv, ConvLayer, Dense, init_weight
from ntkpipe.models.initial_arrays import filled
from ntkpipe.models.mlp import ACTIVATIONS, Activation, Parameterization
from ntkpipe.models.state import BatchStats


class Norm(eqx.Module):
    """BatchNorm per channel: N(z) = γ (z − μ)/√(v + ε) + β, with (μ, v) the running statistics
    (inference) or those of the batch over examples and positions (train mode, biased variance);
    training updates the running ones to (1 − m)·running + m·batch. γ starts at 1, β at 0, μ at 0, v at 1."""

    scale: Float[Array, " C"]
    offset: Float[Array, " C"]
    stats: BatchStats
    momentum: float = eqx.field(static=True, default=0.1)
    eps: float = eqx.field(static=True, default=1e-5)

    def infer(self, z: Float[Array, "... C"]) -> Float[Array, "... C"]:
        return self.scale * (z - self.stats.mean) * lax.rsqrt(self.stats.var + self.eps) + self.offset

    def train(self, z: Float[Array, "B H W C"], mask: Float[Array, " B"]) -> tuple[Array, BatchStats]:
        """N(z) with the statistics of the examples whose ``mask`` is 1, and the updated running ones."""
        weight = mask.astype(z.dtype)[:, None, None, None]
        count = jnp.sum(weight) * z.shape[1] * z.shape[2]
        mean = jnp.sum(weight * z, axis=(0, 1, 2)) / count
        var = jnp.sum(weight * (z - mean) ** 2, axis=(0, 1, 2)) / count
        out = self.scale * (z - mean) * lax.rsqrt(var + self.eps) + self.offset
        m = self.momentum
        stats = BatchStats((1 - m) * self.stats.mean + m * lax.stop_gradient(mean),
                           (1 - m) * self.stats.var + m * lax.stop_gradient(var))
        return out, stats


class Unit(eqx.Module):
    """One conv layer and its BatchNorm (``None`` without normalization)."""

    conv: Conv
    norm: Norm | None


@dataclasses.dataclass(frozen=True)
class Block:
    """Indices into ``ResNet.layers`` of a block's two convs and its shortcut projection (``None``: identity)."""

    conv1: int
    conv2: int
    shortcut: int | None


@dataclasses.dataclass(frozen=True)
class Stage:
    """``blocks`` residual blocks with ``channels`` output channels; the first has stride ``stride``."""

    channels: int
    blocks: int
    stride: int


class ResNet(eqx.Module):
    """A residual network ``f: R^{H×W×C_in} -> R^C`` on one example (module docstring); ``jax.vmap`` it.

    Attributes:
        layers: the conv :class:`Unit` s and the readout :class:`~ntkpipe.models.cnn.Dense`, in forward order.
        blocks: each block's indices into ``layers`` (static).
        preactivation: pre-activation (Wide ResNet) blocks instead of post-activation ones (static).
    """

    layers: tuple[Unit | Dense, ...]
    blocks: tuple[Block, ...] = eqx.field(static=True)
    preactivation: bool = eqx.field(static=True)
    activation: Activation = eqx.field(static=True)
    output_scale: float = eqx.field(static=True)

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        stem_channels: int,
        stages: Sequence[Stage],
        out_size: int = 1,
        *,
        preactivation: bool = False,
        norm: bool = False,
        activation: Activation = "relu",
        parameterization: Parameterization = "standard",
        sigma: float = 1.0,
        output_scale: float = 1.0,
        bias: bool = False,
        dtype=jnp.float32,
        key: PRNGKeyArray,
    ):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if len(input_shape) != 3:
            raise ValueError(f"a ResNet needs image inputs (H, W, channels), got shape {tuple(input_shape)}")
        keys = iter(jax.random.split(key, 1 + 3 * sum(s.blocks for s in stages) + 1))
        layers: list[Unit | Dense] = []

        def unit(c_in: int, c_out: int, size: int, stride: int, normalized: int | None) -> int:
            """Append a conv c_in → c_out (and a BatchNorm over ``normalized`` channels); its index."""
            w, c = init_weight(next(keys), (size, size, c_in, c_out), size * size * c_in, parameterization,
                               sigma, dtype)
            conv = Conv(w, filled((c_out,), 0.0, dtype) if bias else None, c, ConvLayer(c_out, size, stride))
            bn = None
            if norm and normalized is not None:
                ones, zeros = filled((normalized,), 1.0, dtype), filled((normalized,), 0.0, dtype)
                bn = Norm(ones, zeros, BatchStats(zeros, ones))
            layers.append(Unit(conv, bn))
            return len(layers) - 1

        channels = input_shape[-1]
        unit(channels, stem_channels, 3, 1, None if preactivation else stem_channels)
        channels, blocks = stem_channels, []
        for stage in stages:
            for b in range(stage.blocks):
                stride = stage.stride if b == 0 else 1
                if preactivation:
                    conv1 = unit(channels, stage.channels, 3, stride, channels)
                    conv2 = unit(stage.channels, stage.channels, 3, 1, stage.channels)
                    shortcut = unit(channels, stage.channels, 3, stride, None) if b == 0 else None
                else:
                    conv1 = unit(channels, stage.channels, 3, stride, stage.channels)
                    conv2 = unit(stage.channels, stage.channels, 3, 1, stage.channels)
                    projects = stride != 1 or channels != stage.channels
                    shortcut = unit(channels, stage.channels, 1, stride, stage.channels) if projects else None
                blocks.append(Block(conv1, conv2, shortcut))
                channels = stage.channels
        w, c = init_weight(next(keys), (out_size, channels), channels, parameterization, sigma, dtype)
        layers.append(Dense(w, filled((out_size,), 0.0, dtype) if bias else None, c))
        self.layers = tuple(layers)
        self.blocks = tuple(blocks)
        self.preactivation = preactivation
        self.activation = activation
        self.output_scale = float(output_scale)  # SAME convs keep every side >= 1: any image size fits

    def _unit(self, i: int) -> Unit:
        """Layer ``i`` below the readout: a conv unit."""
        return cast(Unit, self.layers[i])

    def _norm(self, i: int) -> Norm:
        """The BatchNorm of conv layer ``i``, one that has it (``_forward`` normalizes only those)."""
        norm = self._unit(i).norm
        assert norm is not None, f"layer {i} has no BatchNorm"
        return norm

    def _forward(self, x: Float[Array, "B H W C"], normalize: Callable[[int, Array], Array]) -> Float[Array, "B C"]:
        """The network on a batch; ``normalize(i, z)`` is the BatchNorm of layer i."""
        phi = ACTIVATIONS[self.activation]

        def conv(i, h):
            return jax.vmap(self._unit(i).conv)(h)

        def norm(i, h):
            return h if self._unit(i).norm is None else normalize(i, h)

        if self.preactivation:
            h = conv(0, x)
            for b in self.blocks:
                a = conv(b.conv1, phi(norm(b.conv1, h)))
                a = conv(b.conv2, phi(norm(b.conv2, a)))
                h = a + (h if b.shortcut is None else conv(b.shortcut, h))
        else:
            h = phi(norm(0, conv(0, x)))
            for b in self.blocks:
                a = phi(norm(b.conv1, conv(b.conv1, h)))
                a = norm(b.conv2, conv(b.conv2, a))
                h = phi(a + (h if b.shortcut is None else norm(b.shortcut, conv(b.shortcut, h))))
        readout = cast(Dense, self.layers[-1])
        return self.output_scale * jax.vmap(readout)(h.mean(axis=(1, 2)))

    def __call__(self, x: Float[Array, "H W C_in"]) -> Float[Array, " C"]:
        """f(x) in inference mode: BatchNorm with the running statistics, so f(x) depends on x alone."""
        return self._forward(x[None], lambda i, z: self._norm(i).infer(z))[0]

    def train_forward(self, x: Float[Array, "B H W C_in"], mask: Float[Array, " B"]) -> tuple[Array, ResNet]:
        """(f(x), network with updated running statistics) in train mode: BatchNorm with the statistics
        of the batch's examples where ``mask`` is 1 (:class:`Norm`)."""
        updated: dict[int, BatchStats] = {}

        def normalize(i, z):
            out, updated[i] = self._norm(i).train(z, mask)
            return out

        f = self._forward(x, normalize)
        if not updated:
            return f, self
        order = sorted(updated)
        return f, eqx.tree_at(lambda m: [m.layers[i].norm.stats for i in order], self, [updated[i] for i in order])
