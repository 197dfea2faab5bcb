"""The record of a data source (one value of ``data.source``), and the options several sources share.

The ``data:`` section of the language is composed of these records (:mod:`ntkpipe.lang.schema`): the
keys every source takes (``source``, ``n_train``, ``n_test``, ``seed``, ``labels``) and the union of
the sources' ``options``. A key that a source does not take must stay at its default, and a case that
switches ``data.source`` drops it. A key several sources take is declared once here and used by each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import numpy as np
from pydantic import Field

from ntkpipe.data.whitening import partial_whitening_map
from ntkpipe.strict import Strict, units

if TYPE_CHECKING:
    from ntkpipe.data.arrays import Dataset
    from ntkpipe.data.files.local import LocalFiles


class DataOptions(Protocol):
    """A validated ``data:`` section as the sources read it (the language's ``DataOptions``, composed of
    these records): the keys every source takes, and the sources' options as attributes."""

    @property
    def source(self) -> str: ...

    @property
    def n_train(self) -> int: ...

    @property
    def n_test(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def labels(self) -> Any:
        """The ``labels:`` section (``kind``, ``eigen_index``, ``stage``, ``class_groups``)."""

    def __getattr__(self, key: str) -> Any:
        """A source's option (``dim``, ``gamma``, ``classes``, …)."""


def _no_rules(spec: DataOptions) -> None:
    """A source without cross-key rules."""


@dataclass(frozen=True)
class Source:
    """One ``data.source``.

    ``options``: the keys under ``data:`` it takes besides those every source takes, with their
    types, defaults and docs (a pydantic model whose docstring documents the source). ``load(spec, rng,
    direction)``: its train/test inputs and default targets, drawn from ``rng`` (seeded by ``data.seed``;
    ``direction`` is the NAD v_j of a ``nad`` stage, None otherwise). ``input_shape(spec)``: one input's
    shape without loading it, (D,) for vectors, (H, W, channels) for images. ``outputs(spec)``: the
    network outputs its default targets need. ``class_count``: K when its examples carry the class labels
    0 … K−1 (which ``classes`` selects and ``two_groups`` labels split), else 0; ``class_names`` what a
    figure shows for class k (``digit 3``), declared once for all figures (an output or target that
    stands for a class is named by it: :func:`ntkpipe.data.dataset.output_classes`). ``rules(spec)``: its
    cross-key rules, raising :class:`~ntkpipe.strict.CrossKeyError` at the key to fix (or ValueError).
    ``files``: the format of the local files it reads (checked when a study is validated), None when it
    reads none. ``data_checks(spec)``: further checks that read its data, made when a study is validated
    with its data (``(key path, message)`` pairs, e.g. enough examples of the kept classes). ``example``: a small valid ``data:`` section (docs and generated tests).
    """

    name: str
    options: type[Strict]
    load: Callable[[DataOptions, np.random.Generator, np.ndarray | None], Dataset]
    input_shape: Callable[[DataOptions], tuple[int, ...]]
    outputs: Callable[[DataOptions], int]
    example: dict[str, Any]
    class_count: int = 0
    class_names: tuple[str, ...] = ()
    rules: Callable[[DataOptions], None] = _no_rules
    files: LocalFiles | None = None
    data_checks: Callable[[DataOptions], list[tuple[tuple[str, ...], str]]] | None = None

    def __post_init__(self):
        if self.class_names and len(self.class_names) != self.class_count:
            raise ValueError(f"source {self.name!r}: {len(self.class_names)} class names for {self.class_count} classes")

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of its ``options``."""
        return tuple(self.options.model_fields)


# ------------------------------------------------------------------ options several sources share

Dim = Annotated[int | None, Field(ge=1, description="input dimension D of synthetic data")]
Gamma = Annotated[float | None, Field(ge=0.0, le=1.0, description="γ of the partial whitening X_γ = U S^γ Vᵀ; "
                                                                   "null = raw inputs (silent-alignment Sec. 5)")]
Noise = Annotated[float, Field(gt=0, description="σ: noise standard deviation of nad and gaussian_mixture data")]
Classes = Annotated[list[int] | None, Field(description="class labels to keep; null = all")]
ImageSize = Annotated[int | None, Field(ge=2, description="resize images to image_size × image_size",
                                         json_schema_extra=units("pixels"))]
DataPath = Annotated[str | None, Field(description="directory of local MNIST/CIFAR-10 files")]


def vector_shape(spec: DataOptions) -> tuple[int, ...]:
    """(D,): vectors of ``dim`` coordinates."""
    return (spec.dim,)


def needs_dim(spec: DataOptions) -> None:
    if spec.dim is None:
        raise ValueError(f"source {spec.source!r} needs 'dim' (the input dimension D)")


def whiten(spec: DataOptions, x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Partial whitening X_γ = U S^γ Vᵀ with the SVD of the training inputs (silent-alignment Sec. 5),
    applied to both splits (inputs keep their shape); unchanged when ``gamma`` is null."""
    if spec.gamma is None:
        return x_train, x_test
    shape = x_train.shape[1:]
    dim = math.prod(shape)
    flat_train, flat_test = x_train.reshape(len(x_train), dim), x_test.reshape(len(x_test), dim)
    m = partial_whitening_map(flat_train, spec.gamma)
    return (flat_train @ m).reshape(len(flat_train), *shape), (flat_test @ m).reshape(len(flat_test), *shape)


__all__ = ["Classes", "DataOptions", "DataPath", "Dim", "Gamma", "ImageSize", "Noise", "Source", "needs_dim",
           "vector_shape", "whiten"]
