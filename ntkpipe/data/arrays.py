"""A study's train/test arrays: inputs (n, D) vectors or (n, H, W, channels) images, and targets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """Inputs (n, *input_shape) and targets (n, C). ``beta`` holds the teachers β_c of
    linear-teacher data as columns (D, C)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    beta: np.ndarray | None = None
    class_labels: dict = field(default_factory=dict)

    @property
    def x_all(self) -> np.ndarray:
        """Train then test inputs: the row order of every train ∪ test Gram."""
        return np.concatenate([self.x_train, self.x_test])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One example's shape: (D,) or (H, W, channels)."""
        return tuple(self.x_train.shape[1:])

    @property
    def flat_train(self) -> np.ndarray:
        """Training inputs as (n, D) vectors (images flattened row-major)."""
        return self.x_train.reshape(len(self.x_train), math.prod(self.input_shape))

    @property
    def flat_test(self) -> np.ndarray:
        return self.x_test.reshape(len(self.x_test), math.prod(self.input_shape))

    @property
    def n_outputs(self) -> int:
        return self.y_train.shape[1]

    @property
    def principal_direction(self) -> np.ndarray:
        """The top right-singular vector n of the flattened training inputs, signed so that n·x₁ > 0
        (for data on a line x = a·n: ±n)."""
        _, _, vt = np.linalg.svd(self.flat_train, full_matrices=False)
        n = vt[0]
        return n if n @ self.flat_train[0] >= 0 else -n

    def with_targets(self, y_all: np.ndarray) -> Dataset:
        """Replace the targets by ``y_all`` (n_train + n_test, C), train rows first."""
        n = self.x_train.shape[0]
        return Dataset(self.x_train, y_all[:n], self.x_test, y_all[n:], self.beta, self.class_labels)


def class_targets(labels: np.ndarray, classes: list[int]) -> np.ndarray:
    """Two classes → (n, 1) with −1 for ``classes[0]`` and +1 for ``classes[1]``; more → one-hot (n, C)."""
    position = {c: i for i, c in enumerate(classes)}
    index = np.array([position[c] for c in labels.tolist()], dtype=np.int64)
    if len(classes) == 2:
        return np.where(index == 1, 1.0, -1.0)[:, None]
    return np.eye(len(classes))[index]
