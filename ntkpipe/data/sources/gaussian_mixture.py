"""``gaussian_mixture``: classes around orthonormal centres (kernel-alignment Sec. 6.2, App. E.5)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from ntkpipe.data.arrays import Dataset
from ntkpipe.data.sources.base import DataOptions, Dim, Gamma, Noise, Source, needs_dim, vector_shape, whiten
from ntkpipe.data.synthetic import mixture_samples, orthonormal_centres
from ntkpipe.strict import CrossKeyError, Strict


class GaussianMixtureOptions(Strict):
    """``gaussian_mixture``: ``clusters`` = C classes x = μ_c + σξ, ξ ~ N(0, I_D), σ = ``noise``, D = ``dim``,
    with orthonormal centres μ_c, n/C points of each class in train and in test, one-hot targets
    y_c ∈ {0, 1} (kernel-alignment Sec. 6.2, App. E.5; its σ² = 0.01 is ``noise: 0.1``). ``clusters`` is
    left out of a run's config while unset, so specs written before it existed keep their run ids."""

    dim: Dim = None
    clusters: int | None = Field(None, ge=2, exclude_if=lambda v: v is None,
                                 description="C: classes of gaussian_mixture data")
    noise: Noise = 1.0
    gamma: Gamma = None


def rules(spec: DataOptions) -> None:
    """C orthonormal centres fit in R^D, and every class gets n/C points of each split."""
    needs_dim(spec)
    if spec.clusters is None:
        raise ValueError("source 'gaussian_mixture' needs 'clusters' (the number of classes C >= 2)")
    if spec.clusters > spec.dim:
        raise CrossKeyError(f"'clusters' = {spec.clusters} orthonormal centres do not fit in dim = {spec.dim}; "
                            "use clusters <= dim", ("clusters",), ("dim",))
    for split in ("n_train", "n_test"):
        n = getattr(spec, split)
        if n % spec.clusters:
            raise CrossKeyError(f"'{split}' = {n} is not a multiple of clusters = {spec.clusters} (classes are "
                                f"balanced, n/C points each); use e.g. {split}: {n - n % spec.clusters}",
                                (split,), ("clusters",))


def load(spec: DataOptions, rng: np.random.Generator, direction: np.ndarray | None = None) -> Dataset:
    """The centres, then the train and the test points; inputs whitened (``gamma``); one-hot targets."""
    centres = orthonormal_centres(spec.clusters, spec.dim, rng)
    x_train, labels_train = mixture_samples(centres, spec.n_train, spec.noise, rng)
    x_test, labels_test = mixture_samples(centres, spec.n_test, spec.noise, rng)
    x_train, x_test = whiten(spec, x_train, x_test)
    one_hot = np.eye(spec.clusters)
    return Dataset(x_train, one_hot[labels_train], x_test, one_hot[labels_test],
                   class_labels={"classes": list(range(spec.clusters))})


SOURCE = Source("gaussian_mixture", GaussianMixtureOptions, load, vector_shape, outputs=lambda spec: spec.clusters,
                rules=rules, example={"dim": 4, "clusters": 2, "noise": 0.5, "n_train": 8, "n_test": 4})
