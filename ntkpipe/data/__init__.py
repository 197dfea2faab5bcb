"""Datasets: the data sources (:data:`ntkpipe.data.sources.SOURCES`, one record per ``data.source``:
synthetic teachers, random labels and Gaussian mixtures, scikit-learn digits, local MNIST/CIFAR-10
files, NAD tasks), whitening, labels."""

from ntkpipe.data.arrays import Dataset, class_targets
from ntkpipe.data.dataset import input_shape, load_dataset, output_count
from ntkpipe.data.labels import eigenvector_sign_targets
from ntkpipe.data.nad import nad_samples
from ntkpipe.data.whitening import partial_whitening_map

__all__ = ["Dataset", "class_targets", "eigenvector_sign_targets", "input_shape", "load_dataset", "nad_samples", "output_count", "partial_whitening_map"]
