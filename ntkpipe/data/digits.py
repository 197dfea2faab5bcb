"""scikit-learn's bundled 8×8 digits (1,797 images, values 0–16): the built-in real data."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np


def digits_file() -> Path:
    """scikit-learn's ``datasets/data/digits.csv.gz``, the file ``sklearn.datasets.load_digits`` reads (found
    without importing scikit-learn, which takes seconds: validating a study reads the labels)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("scikit-learn is not installed: the digits data are its bundled file")
    return Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"


@functools.cache
def _pool() -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(digits_file(), delimiter=",")  # 64 pixel columns, then the label
    images, labels = table[:, :-1].reshape(-1, 8, 8, 1) / 16.0, table[:, -1].astype(np.int64)
    images.flags.writeable = labels.flags.writeable = False  # one copy, shared by every caller
    return images, labels


def digits_pool() -> tuple[np.ndarray, np.ndarray]:
    """All digits as ``(x (1797, 8, 8, 1) float64 in [0, 1], labels (1797,) int)``, read once per process
    (read-only arrays)."""
    return _pool()
