"""``cifar10``: CIFAR-10 from the local python batches (:mod:`ntkpipe.data.files.cifar10`)."""

from __future__ import annotations

from pydantic import Field

from ntkpipe.data.files.cifar10 import FORMAT
from ntkpipe.data.sources.base import DataPath
from ntkpipe.data.sources.images import ImageOptions, files_split, image_source


class Cifar10Options(ImageOptions):
    """``cifar10``: 32×32×3 images read from ``path`` (else ``$NTKPIPE_DATA/cifar10``); ``grayscale``
    keeps one luminance channel, 32×32×1 (Y = 0.299 R + 0.587 G + 0.114 B)."""

    path: DataPath = None
    grayscale: bool = Field(False, description="CIFAR-10 as one luminance channel")


CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
"""CIFAR-10's class names, label k the k-th (the dataset's batches.meta)."""

SOURCE = image_source("cifar10", Cifar10Options, FORMAT.image, FORMAT.classes, files_split(FORMAT),
                      example={"n_train": 8, "n_test": 4, "image_size": 8}, files=FORMAT,
                      class_names=CLASSES)
