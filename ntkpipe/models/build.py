"""Instantiate the model a spec describes; the one place where a seed becomes initial weights."""

from __future__ import annotations

import jax

from ntkpipe.models.linearized import Linearized
from ntkpipe.models.mlp import MLP
from ntkpipe.spec.schema import ModelSpec


def run_keys(seed: int) -> tuple[jax.Array, jax.Array]:
    """(init key, batch-order key) of a run: fold_in(PRNGKey(seed), 0) and (…, 1)."""
    key = jax.random.PRNGKey(seed)
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


def build_model(spec: ModelSpec, in_size: int, out_size: int, seed: int):
    """The network of ``spec`` at init (or its linearization for ``kind: linearized``)."""
    init_key, _ = run_keys(seed)
    net = MLP(in_size, spec.width, spec.depth, out_size, activation=spec.activation,
              parameterization=spec.parameterization, sigma=spec.sigma,
              output_scale=spec.output_scale, bias=spec.bias, key=init_key)
    return Linearized(net) if spec.kind == "linearized" else net
