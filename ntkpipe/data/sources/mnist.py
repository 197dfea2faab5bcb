"""``mnist``: MNIST from local files in LeCun's IDX format (:mod:`ntkpipe.data.files.mnist`)."""

from __future__ import annotations

from ntkpipe.data.files.mnist import FORMAT
from ntkpipe.data.sources.base import DataPath
from ntkpipe.data.sources.images import DIGITS, ImageOptions, files_split, image_source


class MnistOptions(ImageOptions):
    """``mnist``: 28×28×1 images read from ``path`` (else ``$NTKPIPE_DATA/mnist``); train images are
    drawn from the 60,000 training images, test images from the 10,000 test images."""

    path: DataPath = None


SOURCE = image_source("mnist", MnistOptions, FORMAT.image, FORMAT.classes, files_split(FORMAT),
                      example={"n_train": 8, "n_test": 4, "image_size": 8}, files=FORMAT,
                      class_names=DIGITS)
