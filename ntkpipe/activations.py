"""Activation functions φ by the name a study gives them (``model.activation``): the one list that
the language accepts and the networks apply."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import jax
import jax.numpy as jnp

ACTIVATIONS = {
    "linear": lambda z: z,
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "gelu": lambda z: jax.nn.gelu(z, approximate=False),
}
if TYPE_CHECKING:  # the names of ACTIVATIONS: a str to the type checker
    Activation = str
else:
    Activation = Literal[tuple(ACTIVATIONS)]
