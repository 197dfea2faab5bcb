"""``nad``: linearly separable data along a neural anisotropy direction (linearized-networks Sec. 3.2,
App. C.1)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from ntkpipe.data.arrays import Dataset
from ntkpipe.data.nad import nad_samples
from ntkpipe.data.sources.base import DataOptions, Noise, Source
from ntkpipe.strict import Ints, Strict


class DirectionsSpec(Strict):
    """Which neural anisotropy direction v_j of a ``nad`` stage the data is built along."""

    stage: str
    """the name of the nad stage whose directions v_j the data is built along"""
    nad_index: int = Field(ge=1, description="j: the j-th NAD (descending singular value)")


class NadOptions(Strict):
    """``nad``: x = ε·y·v_j + w with w ~ N(0, σ²(I − v_j v_jᵀ)), y = ±1 balanced, along the NAD v_j that
    ``directions`` names (linearized-networks Sec. 3.2, App. C.1); ε = ``margin``, σ = ``noise``;
    ``half_margin`` uses ε/2 as the authors' code does; ``shape`` is the input shape (that of the network's
    images). The data carry their own ±1 labels."""

    shape: Ints | None = Field(None, min_length=1, description="input shape of nad data")
    directions: DirectionsSpec | None = None
    """the NAD v_j the data is built along: a nad stage and the index j"""
    margin: float = Field(1.0, gt=0, description="ε of nad data")
    noise: Noise = 1.0
    half_margin: bool = True
    """use ε/2 as the margin, as the authors' code does (false: ε)"""


def rules(spec: DataOptions) -> None:
    if spec.shape is None or spec.directions is None:
        raise ValueError("source 'nad' needs 'shape' (the input shape, e.g. [8, 8, 1]) and 'directions' "
                         "({stage: <a nad stage>, nad_index: j})")
    if spec.labels.kind != "default":
        raise ValueError("nad data carry their own ±1 labels; leave 'labels' at its default")


def load(spec: DataOptions, rng: np.random.Generator, direction: np.ndarray | None = None) -> Dataset:
    """``direction`` is v_j, read from the nad stage (shaped like one input)."""
    if direction is None:
        raise ValueError("data.source 'nad' needs the direction v_j of its nad stage")
    x, y = nad_samples(np.asarray(direction), spec.n_train + spec.n_test, rng, epsilon=spec.margin,
                       sigma=spec.noise, half_margin=spec.half_margin)
    y = y[:, None].astype(np.float64)
    return Dataset(x[: spec.n_train], y[: spec.n_train], x[spec.n_train:], y[spec.n_train:])


SOURCE = Source("nad", NadOptions, load, input_shape=lambda spec: tuple(spec.shape), outputs=lambda spec: 1,
                rules=rules, example={"shape": [4, 4, 1], "directions": {"stage": "nads", "nad_index": 1},
                                      "n_train": 8, "n_test": 4})
