"""Classification accuracy of network outputs."""

from __future__ import annotations

import numpy as np


def accuracy(outputs: np.ndarray, targets: np.ndarray) -> float:
    """Fraction correct: sign agreement for one output with ±1 targets, argmax for one-hot."""
    outputs, targets = np.asarray(outputs), np.asarray(targets)
    if outputs.shape[-1] == 1:
        return float(np.mean(np.sign(outputs[:, 0]) == np.sign(targets[:, 0])))
    return float(np.mean(outputs.argmax(-1) == targets.argmax(-1)))
