"""Initializations that depend on the data: a readout parallel to the hidden representation."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from ntkpipe.models.mlp import MLP


def near_parallel(net: MLP, direction: np.ndarray, disturbance: float, key) -> MLP:
    """The depth-2 ``net`` with its readout u replaced by |u| (ŵ + ε ξ)/|ŵ + ε ξ|, w = W n for the unit
    input direction n, ŵ = w/|w| and ξ ~ N(0, I/N) (so ε is the perturbation's relative size):
    u ∥ Wx up to ε, the aligned and large-output start of solvable-model Fig. 1b, d."""
    w1, u = np.asarray(net.weights[0], np.float64), np.asarray(net.weights[1], np.float64)
    if u.shape[0] != 1:
        raise ValueError("a near-parallel readout needs one output")
    hidden = w1 @ np.asarray(direction, np.float64).reshape(-1)
    xi = np.asarray(jax.random.normal(key, hidden.shape), np.float64) / np.sqrt(hidden.size)
    aligned = hidden / np.linalg.norm(hidden) + disturbance * xi
    readout = np.linalg.norm(u) * aligned / np.linalg.norm(aligned)
    return eqx.tree_at(lambda m: m.weights[1], net, readout[None, :].astype(net.weights[1].dtype))
