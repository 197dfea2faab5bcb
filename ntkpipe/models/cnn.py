"""Convolutional networks (channels-last) in standard and NTK parameterization.

For one example h_0 = x ∈ R^{H×W×C_0}, conv layers ℓ = 1 … L_c (kernels W_ℓ of shape k×k×C_{ℓ-1}×C_ℓ),
dense layers ℓ = L_c+1 … L-1 and a readout ℓ = L, the network computes

    z_ℓ = c_ℓ (W_ℓ ∗ h_{ℓ-1}) + b_ℓ,   h_ℓ = pool_ℓ(φ(z_ℓ))     (ℓ ≤ L_c)
    z_ℓ = c_ℓ W_ℓ h_{ℓ-1} + b_ℓ,       h_ℓ = φ(z_ℓ)              (L_c < ℓ < L; h_{L_c} flattened)
    f(x) = κ z_L,                      z_L = c_L W_L h_{L-1} + b_L

with ∗ the strided (``SAME`` or ``VALID``) cross-correlation of ``jax.lax.conv_general_dilated``
(NHWC inputs, HWIO kernels), b_ℓ broadcast over positions, pool_ℓ an optional average or max pool
(window = stride = pool_size, ``VALID``) and κ the output scale. The parameterizations are those of
:class:`~ntkpipe.models.MLP`, with fan-in n = k·k·C_{ℓ-1} for a conv layer:

    standard:  W_ℓ ~ N(0, σ²/n),  c_ℓ = 1
    ntk:       W_ℓ ~ N(0, 1),     c_ℓ = σ/√n

Both give the same function at init. Biases start at zero and enter with multiplier 1. The
derivative of W ∗ h in W is taken as an im2col matrix product (:func:`_conv`), which keeps
per-example Jacobians fast in float64, and so is W ∗ h itself on small inputs (8×8 digits).

:data:`LENET5` is the LeNet-5 of the linearized-networks authors (gortizji/linearized-networks,
``models/jax/lenet.py``, flax), matched layer by layer: conv 6@5×5 SAME → φ → average pool with
window 2×2 and stride 2 (flax ``avg_pool``, VALID), conv 16@5×5 SAME → φ → the same pool, flatten,
dense 120 → φ, dense 84 → φ, dense 1. All their conv and dense layers have biases (flax default), so
build it with ``bias=True``; their init, flax's LeCun normal (truncated, variance 1/fan_in), is
close to ``parameterization="standard", sigma=1``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float, PRNGKeyArray

from ntkpipe.activations import ACTIVATIONS, Activation
from ntkpipe.models.initial_arrays import filled, standard_normal
from ntkpipe.models.mlp import Parameterization

Padding = Literal["SAME", "VALID"]
Pool = Literal["avg", "max"]


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """One conv layer: ``channels`` output channels, a ``kernel_size``² kernel, then φ and ``pool``."""

    channels: int
    kernel_size: int
    stride: int = 1
    padding: Padding = "SAME"
    pool: Pool | None = None
    pool_size: int = 2

    def __post_init__(self):
        if min(self.channels, self.kernel_size, self.stride, self.pool_size) < 1:
            raise ValueError(f"channels, kernel_size, stride and pool_size must be positive: {self}")
        if self.padding not in ("SAME", "VALID"):
            raise ValueError(f"padding must be 'SAME' or 'VALID', got {self.padding!r}")
        if self.pool not in (None, "avg", "max"):
            raise ValueError(f"pool must be None, 'avg' or 'max', got {self.pool!r}")


# (conv layers, dense widths) of LeNet-5 (module docstring): CNN(input_shape, *LENET5, bias=True, ...)
LENET5: tuple[tuple[ConvLayer, ...], tuple[int, ...]] = (
    (ConvLayer(6, 5, pool="avg"), ConvLayer(16, 5, pool="avg")),
    (120, 84),
)


def init_weight(
    key: PRNGKeyArray,
    shape: tuple[int, ...],
    fan_in: int,
    parameterization: Parameterization,
    sigma: float,
    dtype,
) -> tuple[Array, float]:
    """``(W, c)``: the initial weight of ``shape`` and its multiplier (module docstring)."""
    w = standard_normal(key, shape, dtype)
    if parameterization == "standard":
        return jnp.asarray(w * (sigma / math.sqrt(fan_in))), 1.0
    if parameterization == "ntk":
        return jnp.asarray(w), sigma / math.sqrt(fan_in)
    raise ValueError(f"parameterization must be 'standard' or 'ntk', got {parameterization!r}")


def _patches(h: Float[Array, "H W C"], kernel_size: int, stride: int, padding: Padding) -> Float[Array, "Y X kk C"]:
    """im2col: ``P[y, x, i·k + j] = h_pad[s·y + i, s·x + j]``, the k×k windows that ``W ∗ h`` sums over."""
    k = kernel_size
    pads = lax.padtype_to_pads(h.shape[:2], (k, k), (stride, stride), padding)
    h = jnp.pad(h, (*pads, (0, 0)))
    out_h, out_w = ((n - k) // stride + 1 for n in h.shape[:2])
    end_h, end_w = (out_h - 1) * stride + 1, (out_w - 1) * stride + 1
    windows = [
        lax.slice(h, (i, j, 0), (i + end_h, j + end_w, h.shape[2]), (stride, stride, 1))
        for i in range(k)
        for j in range(k)
    ]
    return jnp.stack(windows, axis=2)


SMALL_IMAGE_PIXELS = 64
"""Inputs of at most this many positions (H·W) are convolved as the im2col product P(h)·W."""


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _conv(
    h: Float[Array, "H W in"], w: Float[Array, "k k in out"], stride: int, padding: Padding
) -> Float[Array, "Y X out"]:
    """``W ∗ h`` on one NHWC example with an HWIO kernel: ``lax.conv_general_dilated``, or on inputs
    of at most :data:`SMALL_IMAGE_PIXELS` positions the im2col product P(h)·W, the same sums.

    XLA:CPU's convolution is slow on small images: LeNet-5 on 8×8 digits, float32, batched, took
    twice as long in its forward pass and its SGD step as the product (1,000 digits: 15–18 against
    7–8 ms; steps of 128: 5.7–6.1 against 2.7–3.0 ms), while at 28×28 and 32×32 the convolution is
    as fast or faster (the patches are k² copies of the input): ``benchmarks/conv_small_images.py``.

    Its derivative is d(W ∗ h) = W ∗ dh + P(h)·dW with P the im2col :func:`_patches`. JAX's own rule
    gives the same numbers, but transposing W ↦ W ∗ h under a per-example ``vmap`` (every NTK
    Jacobian and pullback) makes a batch-grouped convolution, which XLA:CPU runs in float64 some
    300× slower than the matrix product P(h)ᵀ·g (LeNet-5 Jacobians of 256 digits: 16 s vs 0.05 s).
    """
    if h.shape[0] * h.shape[1] <= SMALL_IMAGE_PIXELS:
        return _im2col_product(_patches(h, w.shape[0], stride, padding), w)
    return lax.conv_general_dilated(
        h[None], w, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )[0]


def _im2col_product(patches: Float[Array, "Y X kk in"], w: Float[Array, "k k in out"]) -> Float[Array, "Y X out"]:
    """P·W: ``Σ_{p,c} P[y, x, p, c] W[p, c, o]`` with W's k×k positions flattened to p = i·k + j, as one
    (Y·X × k²·C_in)·(k²·C_in × C_out) product (XLA compiles it faster than the 4-index contraction)."""
    rows, cols, taps, channels = patches.shape
    product = patches.reshape(rows * cols, taps * channels) @ w.reshape(taps * channels, w.shape[-1])
    return product.reshape(rows, cols, w.shape[-1])


def _conv_jvp(stride, padding, primals, tangents):
    (h, w), (dh, dw) = primals, tangents
    k = w.shape[0]
    terms = []  # symbolic zeros (an input image, a layer outside the tangent) cost nothing
    if not isinstance(dh, SymbolicZero):
        terms.append(_conv(dh, w, stride, padding))
    if not isinstance(dw, SymbolicZero):
        terms.append(_im2col_product(_patches(h, k, stride, padding), dw))
    return _conv(h, w, stride, padding), sum(terms[1:], terms[0])


_conv.defjvp(_conv_jvp, symbolic_zeros=True)


class Conv(eqx.Module):
    """``z = c (W ∗ h) + b`` for one example ``h`` of shape ``(H, W, C_in)`` → ``(Y, X, C_out)``.

    Attributes:
        weight: ``W`` with shape ``(k, k, C_in, C_out)`` (HWIO).
        bias: ``b`` with shape ``(C_out,)``, or ``None``.
        multiplier: ``c`` (static).
        spec: the layer's :class:`ConvLayer` (static), whose pooling the network applies after φ.
    """

    weight: Float[Array, "k k in out"]
    bias: Float[Array, " out"] | None
    multiplier: float = eqx.field(static=True)
    spec: ConvLayer = eqx.field(static=True)

    def __call__(self, h: Float[Array, "H W in"]) -> Float[Array, "Y X out"]:
        dtype = jnp.result_type(h, self.weight)  # promote like ``W @ h`` (lax needs equal dtypes)
        z = self.multiplier * _conv(h.astype(dtype), self.weight.astype(dtype), self.spec.stride, self.spec.padding)
        return z if self.bias is None else z + self.bias


class Dense(eqx.Module):
    """``z = c W h + b`` for one example ``h`` of shape ``(in,)`` → ``(out,)``.

    Attributes:
        weight: ``W`` with shape ``(out, in)``.
        bias: ``b`` with shape ``(out,)``, or ``None``.
        multiplier: ``c`` (static).
    """

    weight: Float[Array, "out in"]
    bias: Float[Array, " out"] | None
    multiplier: float = eqx.field(static=True)

    def __call__(self, h: Float[Array, " in"]) -> Float[Array, " out"]:
        z = self.multiplier * (self.weight @ h)
        return z if self.bias is None else z + self.bias


def _pool(h: Float[Array, "H W C"], spec: ConvLayer) -> Float[Array, "Y X C"]:
    """Average or max over non-overlapping ``pool_size``² windows (VALID: a ragged edge is dropped).

    The max is a reduction over the windows laid out as axes, not a ``reduce_window``: JAX's second
    derivative of a windowed max (an NTK by vector products differentiates twice) runs in reduced
    precision on GPUs, that of a plain max on every backend in full."""
    if spec.pool is None:
        return h
    p = spec.pool_size
    if spec.pool == "max":
        rows, cols = h.shape[0] // p, h.shape[1] // p
        return h[: rows * p, : cols * p].reshape(rows, p, cols, p, h.shape[2]).max(axis=(1, 3))
    window = (p, p, 1)
    return lax.reduce_window(h, 0.0, lax.add, window, window, "VALID") / p**2


class CNN(eqx.Module):
    """Conv → dense → linear readout network ``f: R^{H×W×C_in} -> R^C`` on one example; ``jax.vmap`` it.

    Attributes:
        layers: the conv layers (:class:`Conv`), the dense hidden layers and the readout
            (:class:`Dense`), in forward order; the NTK's per-layer components follow this index, so
            the readout is the last one (K_V).
        activation: φ, a key of :data:`~ntkpipe.activations.ACTIVATIONS` (static).
        output_scale: κ (static).
    """

    layers: tuple[Conv | Dense, ...]
    activation: Activation = eqx.field(static=True)
    output_scale: float = eqx.field(static=True)

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        conv: Sequence[ConvLayer],
        dense: Sequence[int],
        out_size: int = 1,
        *,
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
        conv, dense = tuple(conv), tuple(dense)
        keys = iter(jax.random.split(key, len(conv) + len(dense) + 1))
        layers = []
        shape = jax.ShapeDtypeStruct(tuple(input_shape), dtype)
        for spec in conv:
            in_channels = shape.shape[-1]
            w, c = init_weight(
                next(keys),
                (spec.kernel_size, spec.kernel_size, in_channels, spec.channels),
                spec.kernel_size**2 * in_channels,
                parameterization,
                sigma,
                dtype,
            )
            b = filled((spec.channels,), 0.0, dtype) if bias else None
            layers.append(Conv(w, b, c, spec))
            shape = jax.eval_shape(lambda h, layer=layers[-1]: _pool(layer(h), layer.spec), shape)
            if 0 in shape.shape:
                raise ValueError(f"input {tuple(input_shape)} is too small for conv layers {conv}")
        fan_in = math.prod(shape.shape)
        for width in (*dense, out_size):
            w, c = init_weight(next(keys), (width, fan_in), fan_in, parameterization, sigma, dtype)
            layers.append(Dense(w, filled((width,), 0.0, dtype) if bias else None, c))
            fan_in = width
        self.layers = tuple(layers)
        self.activation = activation
        self.output_scale = float(output_scale)

    def __call__(self, x: Float[Array, "H W C_in"]) -> Float[Array, " C"]:
        phi = ACTIVATIONS[self.activation]
        h = x
        for layer in self.layers[:-1]:
            if isinstance(layer, Conv):
                h = _pool(phi(layer(h)), layer.spec)
            else:
                h = phi(layer(h.reshape(-1)))
        return self.output_scale * self.layers[-1](h.reshape(-1))
