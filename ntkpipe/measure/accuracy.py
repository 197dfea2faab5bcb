"""Classification accuracy of network outputs."""

from __future__ import annotations

import numpy as np


def accuracy(outputs: np.ndarray, targets: np.ndarray) -> float:
    """Fraction correct: for one output with ±1 targets the predicted label is +1 where f ≥ 0, else
    −1 (as sign labels map 0 to +1; an output of exactly 0, e.g. a centred linearization at init,
    scores the share of +1 labels, not 0); argmax for one-hot."""
    outputs, targets = np.asarray(outputs), np.asarray(targets)
    if outputs.shape[-1] == 1:
        return float(np.mean(np.where(outputs[:, 0] >= 0, 1.0, -1.0) == np.sign(targets[:, 0])))
    return float(np.mean(outputs.argmax(-1) == targets.argmax(-1)))
