"""``digits``: scikit-learn's bundled 8×8 digits (1,797 images, classes 0–9), the built-in real data."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ntkpipe.data.digits import digits_pool
from ntkpipe.data.sources.images import DIGITS, ImageOptions, Split, image_source, kept_classes, pool_split

if TYPE_CHECKING:
    from ntkpipe.data.sources.base import DataOptions


class DigitsOptions(ImageOptions):
    """``digits``: scikit-learn's 8×8×1 digits, one pool of 1,797 images from which train and test are
    drawn without replacement."""


def split(spec: DataOptions, rng: np.random.Generator) -> Split:
    return pool_split(spec, rng, *digits_pool(), what="digits")


def enough_digits(spec: DataOptions) -> list[tuple[tuple[str, ...], str]]:
    """n_train + n_test fit the digits of the kept classes (read when a study is validated)."""
    _, labels = digits_pool()
    classes = kept_classes(spec)
    available = int(np.isin(labels, classes).sum()) if classes is not None else len(labels)
    need = spec.n_train + spec.n_test
    if need <= available:
        return []
    return [(("data", "n_train"), f"n_train + n_test = {need} exceeds the {available} digits of classes "
                                  f"{classes or 'all'}; lower them (or use mnist from local files)")]


SOURCE = image_source("digits", DigitsOptions, (8, 8, 1), 10, split, example={"n_train": 8, "n_test": 4},
                      data_checks=enough_digits, class_names=DIGITS)
