"""``random_labels``: ±1 labels independent of the inputs (kernel-alignment Sec. 6.1, App. E.4)."""

from __future__ import annotations

import numpy as np

from ntkpipe.data.arrays import Dataset
from ntkpipe.data.sources.base import DataOptions, Dim, Gamma, Source, needs_dim, vector_shape, whiten
from ntkpipe.data.synthetic import random_signs, sphere_inputs
from ntkpipe.strict import Strict


class RandomLabelsOptions(Strict):
    """``random_labels``: inputs x = g/|g|, g ~ N(0, I_D), uniform on the sphere S^{D−1} (D = ``dim``);
    y = ±1 i.i.d. with probability ½ each (kernel-alignment Sec. 6.1, App. E.4)."""

    dim: Dim = None
    gamma: Gamma = None


def load(spec: DataOptions, rng: np.random.Generator, direction: np.ndarray | None = None) -> Dataset:
    """Sphere inputs, then the signs, drawn for train ∪ test at once; inputs whitened (``gamma``)."""
    n = spec.n_train + spec.n_test
    x = sphere_inputs(n, spec.dim, rng)
    y = random_signs(n, rng)[:, None]
    x_train, x_test = whiten(spec, x[: spec.n_train], x[spec.n_train:])
    return Dataset(x_train, y[: spec.n_train], x_test, y[spec.n_train:])


SOURCE = Source("random_labels", RandomLabelsOptions, load, vector_shape, outputs=lambda spec: 1, rules=needs_dim,
                example={"dim": 4, "n_train": 8, "n_test": 4})
