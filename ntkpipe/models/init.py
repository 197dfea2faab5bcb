"""Special initializations: a readout parallel to the hidden representation (data-dependent), and
a mirrored net with zero initial output."""

from __future__ import annotations

import equinox as eqx
import numpy as np

from ntkpipe.models.initial_arrays import standard_normal
from ntkpipe.models.mlp import MLP


def near_parallel(net: MLP, direction: np.ndarray, disturbance: float, key) -> MLP:
    """The depth-2 ``net`` with its readout u replaced by |u| (ŵ + ε ξ)/|ŵ + ε ξ|, w = W n for the unit
    input direction n, ŵ = w/|w| and ξ ~ N(0, I/N) (so ε is the perturbation's relative size):
    u ∥ Wx up to ε, the aligned and large-output start of solvable-model Fig. 1b, d."""
    w1, u = np.asarray(net.weights[0], np.float64), np.asarray(net.weights[1], np.float64)
    if u.shape[0] != 1:
        raise ValueError("a near-parallel readout needs one output")
    hidden = w1 @ np.asarray(direction, np.float64).reshape(-1)
    xi = standard_normal(key, hidden.shape, float).astype(np.float64) / np.sqrt(hidden.size)  # float: JAX's default
    aligned = hidden / np.linalg.norm(hidden) + disturbance * xi
    readout = np.linalg.norm(u) * aligned / np.linalg.norm(aligned)
    return eqx.tree_at(lambda m: m.weights[1], net, readout[None, :].astype(net.weights[1].dtype))


def mirrored(net: MLP) -> MLP:
    """``net`` with the last hidden layer's units N/2 … N−1 copies of units 0 … N/2−1 and their
    readout weights negated: the two halves cancel, so f(x) = 0 at init for every x (the symmetrized
    init of lazy training, Chizat et al. 2018), while |u|² and the hidden activations keep their scale."""
    w, u = net.weights[-2], net.weights[-1]
    half = w.shape[0] // 2
    w = w.at[half:].set(w[:half])
    u = u.at[:, half:].set(-u[:, :half])
    net = eqx.tree_at(lambda m: m.weights[-2], net, w)
    net = eqx.tree_at(lambda m: m.weights[-1], net, u)
    if net.biases is not None:
        b = net.biases[-2]
        net = eqx.tree_at(lambda m: m.biases[-2], net, b.at[half:].set(b[:half]))
    return net
