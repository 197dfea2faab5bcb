"""The record of an architecture: everything the rest of the package may assume about a network.

The contract of a network module ``net`` that a record builds:

- ``net(x)`` maps one example to its C outputs and depends on that example alone (so ``jax.vmap``
  gives a batch, and per-example Jacobians and NTKs are those of the network); a network with state
  (BatchNorm statistics, :mod:`ntkpipe.models.state`) runs in inference mode here;
- ``net.train_forward(x, mask)`` (only with state) is the train-mode pass over a batch, returning
  the outputs and the network with its state updated (:func:`ntkpipe.models.state.forward_batch`);
- the trainable leaves of weight layer ℓ (``spec.layer_names[ℓ]``, readout last) have ℓ as the first
  sequence index of their pytree path (``layers[ℓ]…``, ``weights[ℓ]``):
  :func:`ntkpipe.models.layer_components` reads per-layer NTK components and learning rates from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

import equinox as eqx

from ntkpipe.lang.schema import ModelBase


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One architecture a study may name as ``model.architecture``.

    Attributes:
        name: the ``model.architecture`` tag.
        spec: its options model (a :class:`~ntkpipe.lang.schema.ModelBase` in ``ARCHITECTURE_SPECS``),
            which names its weight layers (``layer_names``).
        build: ``(spec, input_shape, out_size, key, **common) → network`` at init; ``common`` holds the
            fields every architecture takes (activation, parameterization, σ, output scale, bias).
        network: the class of the networks it builds.
        inputs: ``vector`` (any input shape, flattened) or ``image`` (H, W, channels).
        readout: its last weight layer is a linear readout (the K_V / K_W split of the NTK).
        mlp_weights: it is the :class:`~ntkpipe.models.MLP`, whose ``weights[ℓ]`` the closed-form
            theories and the weight measurements read.
        stateful: it has state (BatchNorm statistics) for some options.
    """

    name: str
    spec: type[ModelBase]
    build: Callable[..., eqx.Module]
    network: type[eqx.Module]
    inputs: Literal["vector", "image"]
    readout: bool = True
    mlp_weights: bool = False
    stateful: bool = False
