"""Fully connected networks in standard and NTK parameterization.

For depth L (number of weight layers), input h_0 = x ∈ R^D and widths n_0 = D, n_1 … n_{L-1} = N,
n_L = C, the network computes

    z_ℓ = c_ℓ W_ℓ h_{ℓ-1} + b_ℓ,    h_ℓ = φ(z_ℓ)  (ℓ < L),    f(x) = κ z_L,

with κ the output scale. The two parameterizations differ in where the init scale σ sits
(neural-tangents ``stax.Dense``):

    standard:  W_ℓ ~ N(0, σ²/n_{ℓ-1}),  c_ℓ = 1           (silent-alignment Sec. 3)
    ntk:       W_ℓ ~ N(0, 1),           c_ℓ = σ/√n_{ℓ-1}

or, with per-layer ``variances`` v_ℓ (standard only), W_ℓ ~ N(0, v_ℓ) (solvable-model Sec. 3).

Both give the same function at init; they differ in the learning dynamics (and the NTK). Biases start
at zero and enter with multiplier 1.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ntkpipe.activations import ACTIVATIONS, Activation
from ntkpipe.models.fixed import Fixed
from ntkpipe.models.initial_arrays import filled, standard_normal

Parameterization = Literal["standard", "ntk"]


class MLP(eqx.Module):
    """Depth-L perceptron ``f: R^D -> R^C`` acting on one example; ``jax.vmap`` it over a batch.

    Attributes:
        weights: ``W_ℓ`` with shape ``(n_ℓ, n_{ℓ-1})``, ℓ = 1 … L.
        biases: ``b_ℓ`` with shape ``(n_ℓ,)``, or ``None`` for a bias-free network.
        multipliers: ``c_ℓ`` and ``output_scale``: κ, fixed scalars (:mod:`ntkpipe.models.fixed`).
    """

    weights: tuple[Float[Array, "out in"], ...]
    biases: tuple[Float[Array, " out"], ...] | None
    multipliers: tuple[Fixed, ...]
    activation: Activation = eqx.field(static=True)
    output_scale: Fixed

    def __init__(
        self,
        in_size: int,
        width: int,
        depth: int,
        out_size: int = 1,
        *,
        activation: Activation = "relu",
        parameterization: Parameterization = "standard",
        sigma: float = 1.0,
        output_scale: float = 1.0,
        bias: bool = False,
        variances: tuple[float, ...] | None = None,
        dtype=jnp.float32,
        key: PRNGKeyArray,
    ):
        if depth < 1:
            raise ValueError(f"depth must be >= 1 weight layer, got {depth}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        sizes = [in_size] + [width] * (depth - 1) + [out_size]
        keys = jax.random.split(key, depth)
        weights, multipliers = [], []
        if variances is not None and (parameterization != "standard" or len(variances) != depth):
            raise ValueError(f"variances need the standard parameterization and one per layer ({depth})")
        for ell, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
            w = standard_normal(k, (fan_out, fan_in), dtype)
            if variances is not None:
                weights.append(w * math.sqrt(variances[ell]))
                multipliers.append(1.0)
            elif parameterization == "standard":
                weights.append(w * (sigma / math.sqrt(fan_in)))
                multipliers.append(1.0)
            elif parameterization == "ntk":
                weights.append(w)
                multipliers.append(sigma / math.sqrt(fan_in))
            else:
                raise ValueError(f"parameterization must be 'standard' or 'ntk', got {parameterization!r}")
        self.weights = tuple(jnp.asarray(w) for w in weights)
        self.multipliers = tuple(Fixed(c) for c in multipliers)
        self.biases = tuple(filled((n,), 0.0, dtype) for n in sizes[1:]) if bias else None
        self.activation = activation
        self.output_scale = Fixed(output_scale)

    @property
    def depth(self) -> int:
        return len(self.weights)

    def layer_inputs_and_output(
        self, x: Float[Array, " D"], offsets: tuple[Array, "..."] | None = None
    ) -> tuple[tuple[Array, "..."], Float[Array, " C"]]:
        """Return ``(h_0 … h_{L-1}), f(x)``; ``offsets[ℓ]`` is added to z_ℓ (for ∂f/∂z_ℓ).
        An image input is flattened row-major: h_0 = vec(x)."""
        phi = ACTIVATIONS[self.activation]
        h, inputs = x.reshape(-1), []
        for ell, (w, c) in enumerate(zip(self.weights, self.multipliers)):
            inputs.append(h)
            z = c.like(w) * (w @ h)
            if self.biases is not None:
                z = z + self.biases[ell]
            if offsets is not None:
                z = z + offsets[ell]
            h = phi(z) if ell < self.depth - 1 else z
        return tuple(inputs), self.output_scale.like(h) * h

    def __call__(self, x: Float[Array, " *shape"]) -> Float[Array, " C"]:
        return self.layer_inputs_and_output(x)[1]

    def end_to_end_matrix(self) -> Float[Array, "C D"]:
        """κ c_L W_L ⋯ c_1 W_1: the linear map computed by a bias-free linear network."""
        m = self.multipliers[0].like(self.weights[0]) * self.weights[0]
        for w, c in zip(self.weights[1:], self.multipliers[1:]):
            m = c.like(w) * (w @ m)
        return self.output_scale.like(m) * m
