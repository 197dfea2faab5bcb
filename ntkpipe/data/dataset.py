"""Build a study's train/test arrays from its ``data`` spec, by the record of its source
(:data:`ntkpipe.data.sources.SOURCES`).

Each source draws its inputs and labels from one generator seeded by ``data.seed``; image sources
then resize, standardize and whiten (:mod:`ntkpipe.data.sources.images`), synthetic ones whiten
(``gamma``). Inputs keep their shape: (n, D) vectors, (n, H, W, channels) images; models that need
vectors flatten them. Everything is float64; training casts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ntkpipe.data.arrays import Dataset
from ntkpipe.data.sources import SOURCES

if TYPE_CHECKING:
    from ntkpipe.data.sources.base import DataOptions


def output_count(spec: DataOptions) -> int:
    """Network outputs C the targets need: 1 for sign φ_j or two-group labels, else what the source's
    default targets need (one per teacher or mixture class, one per class — 1 for two classes —, 1 for ±1)."""
    if spec.labels.kind in ("eigenvector_sign", "two_groups"):
        return 1
    return SOURCES[spec.source].outputs(spec)


def output_classes(spec: DataOptions) -> list[str]:
    """What each network output c (and target y_c) stands for when the outputs are one per class (the
    default one-hot targets of a source with class names, more than two classes kept): the kept classes'
    names (``digit 0`` … ``digit 9``), which figures show for the ``output`` and ``target`` values 1 … C.
    None otherwise (teachers, mixture clusters, ±1 labels): an empty list."""
    source = SOURCES[spec.source]
    if spec.labels.kind != "default" or not source.class_names or output_count(spec) < 2:
        return []
    classes = spec.classes if spec.classes is not None else range(source.class_count)
    return [source.class_names[k] for k in classes]


def input_shape(spec: DataOptions) -> tuple[int, ...]:
    """The shape of one input of ``spec``, without loading it: (D,) or (H, W, channels)."""
    return tuple(SOURCES[spec.source].input_shape(spec))


def load_dataset(spec: DataOptions, direction: np.ndarray | None = None) -> Dataset:
    """The inputs and default targets of ``spec`` (labels from stages are applied by the caller).

    ``direction`` is the NAD v_j of ``nad`` data (shaped like one input), read from its stage.
    """
    return SOURCES[spec.source].load(spec, np.random.default_rng(spec.seed), direction)
