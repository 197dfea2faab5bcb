"""What the image sources share: their options, input shape, class selection and split, resizing,
standardization and class targets.

Order of operations: load the pool or the files → keep ``classes`` and draw the splits (seeded by
``data.seed``) → resize (``image_size``) → standardize (remove the train pixel mean, scale to unit mean
per-coordinate variance) → partial whitening with the train SVD (``gamma``) → targets. Images keep
their shape (n, H, W, channels) in float64 with pixel values first scaled to [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ntkpipe.data.arrays import Dataset, class_targets
from ntkpipe.data.files.local import LocalFiles, resolve_data_dir
from ntkpipe.data.images import grayscale, resize
from ntkpipe.data.sources.base import Classes, DataOptions, Gamma, ImageSize, Source, whiten
from ntkpipe.strict import Strict

DIGITS = tuple(f"digit {k}" for k in range(10))
"""The class names of the digit sources (``digits``, ``mnist``): class k is the digit k."""

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Train images, train labels, test images, test labels: (n, H, W, C) float64 in [0, 1] and (n,) int."""


class ImageOptions(Strict):
    """The options of every image source: ``classes`` keeps those class labels (null: all);
    ``image_size`` resizes to S×S (bilinear); ``gamma`` whitens partially."""

    classes: Classes = None
    image_size: ImageSize = None
    gamma: Gamma = None


def kept_classes(spec: DataOptions) -> list[int] | None:
    """``classes``, or for two-group labels the classes of both groups."""
    if spec.classes is None and spec.labels.kind == "two_groups":
        return sorted(set(spec.labels.class_groups[0]) | set(spec.labels.class_groups[1]))
    return spec.classes


def keep_classes(x: np.ndarray, labels: np.ndarray, classes: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    if classes is None:
        return x, labels
    mask = np.isin(labels, classes)
    return x[mask], labels[mask]


def pool_split(spec: DataOptions, rng: np.random.Generator, x: np.ndarray, labels: np.ndarray, what: str) -> Split:
    """Train and test drawn without replacement from one pool of images (``what``: their name)."""
    classes = kept_classes(spec)
    x, labels = keep_classes(x, labels, classes)
    order = rng.permutation(len(x))
    need = spec.n_train + spec.n_test
    if need > len(x):
        raise ValueError(f"data.n_train + data.n_test = {need} exceeds the {len(x)} {what} "
                         f"of classes {classes or 'all'}; lower them")
    train, test = order[: spec.n_train], order[spec.n_train: need]
    return x[train], labels[train], x[test], labels[test]


def files_split(files: LocalFiles) -> Callable[[DataOptions, np.random.Generator], Split]:
    """Train images drawn from the train files, test images from the test files, of ``files`` in
    ``data.path`` (else ``$NTKPIPE_DATA/<name>``); RGB images become one luminance channel with ``grayscale``."""

    def split(spec: DataOptions, rng: np.random.Generator) -> Split:
        classes = kept_classes(spec)
        arrays = files.load(resolve_data_dir(spec.path, files))
        out: list[np.ndarray] = []
        for part, n in (("train", spec.n_train), ("test", spec.n_test)):
            x = arrays[f"x_{part}"].astype(np.float64) / 255.0
            x = x[..., None] if x.ndim == 3 else grayscale(x) if spec.grayscale else x
            x, labels = keep_classes(x, arrays[f"y_{part}"].astype(np.int64), classes)
            if n > len(x):
                raise ValueError(f"data.n_{part} = {n} exceeds the {len(x)} {part} images of "
                                 f"{spec.source} classes {classes or 'all'}; lower it")
            pick = rng.permutation(len(x))[:n]
            out += [x[pick], labels[pick]]
        x_train, labels_train, x_test, labels_test = out
        return x_train, labels_train, x_test, labels_test

    return split


def standardize(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove the train mean of every pixel; divide by the train RMS of what is left."""
    mean = x_train.mean(axis=0)
    scale = np.sqrt(np.mean((x_train - mean) ** 2))
    return (x_train - mean) / scale, (x_test - mean) / scale


def targets(spec: DataOptions, class_count: int, split: Split) -> Dataset:
    """``two_groups`` labels: ±1 by group; else the classes (every class kept, drawn or not): two → ±1,
    more → one-hot."""
    x_train, labels_train, x_test, labels_test = split
    if spec.labels.kind == "two_groups":
        plus, minus = spec.labels.class_groups
        y = [np.where(np.isin(labels, plus), 1.0, -1.0)[:, None] for labels in (labels_train, labels_test)]
        return Dataset(x_train, y[0], x_test, y[1], class_labels={"groups": [list(plus), list(minus)]})
    classes = list(range(class_count)) if spec.classes is None else spec.classes
    return Dataset(x_train, class_targets(labels_train, classes), x_test, class_targets(labels_test, classes),
                   class_labels={"classes": list(classes)})


def image_source(name: str, options: type[ImageOptions], image: tuple[int, int, int], class_count: int,
                 split: Callable[[DataOptions, np.random.Generator], Split], example: dict[str, Any],
                 **fields: Any) -> Source:
    """The record of an image source whose native images are ``image`` = (H, W, channels) with the class
    labels 0 … class_count − 1, drawn by ``split``."""

    def load(spec: DataOptions, rng: np.random.Generator, direction: np.ndarray | None = None) -> Dataset:
        x_train, labels_train, x_test, labels_test = split(spec, rng)
        if spec.image_size is not None:
            x_train, x_test = resize(x_train, spec.image_size), resize(x_test, spec.image_size)
        x_train, x_test = whiten(spec, *standardize(x_train, x_test))
        return targets(spec, class_count, (x_train, labels_train, x_test, labels_test))

    def input_shape(spec: DataOptions) -> tuple[int, ...]:
        side = spec.image_size
        return (side or image[0], side or image[1], 1 if spec.grayscale else image[2])

    def outputs(spec: DataOptions) -> int:
        n_classes = len(spec.classes) if spec.classes is not None else class_count
        return 1 if n_classes == 2 else n_classes

    return Source(name, options, load, input_shape, outputs, example, class_count=class_count, **fields)
