"""ntkpipe: declarative studies of how the neural tangent kernel evolves during training.

The names below are what a study author or a notebook needs; everything else lives in the
submodules (``ntkpipe.lang``, ``ntkpipe.train``, ``ntkpipe.measure``, ``ntkpipe.theory``, ...).
"""

from __future__ import annotations

__version__ = "0.2.0"

from typing import TYPE_CHECKING

from ntkpipe.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from ntkpipe.data import Dataset, load_dataset
    from ntkpipe.errors import DataFileError, NtkpipeError, ResultError, SpecError
    from ntkpipe.jobs import train_run
    from ntkpipe.layout import open_dataset
    from ntkpipe.models import CNN, MLP, Linearized, build_model
    from ntkpipe.ntk import NtkImplementation, empirical_ntk, flatten_gram, jacobian_alignment
    from ntkpipe.store import read_store
    from ntkpipe.study.load import load_study
    from ntkpipe.study.plan import plan_study
    from ntkpipe.train import train

_HOME = {
    "Dataset": "ntkpipe.data", "load_dataset": "ntkpipe.data",
    "DataFileError": "ntkpipe.errors", "NtkpipeError": "ntkpipe.errors", "ResultError": "ntkpipe.errors",
    "SpecError": "ntkpipe.errors",
    "train_run": "ntkpipe.jobs",
    "open_dataset": "ntkpipe.layout",
    "CNN": "ntkpipe.models", "MLP": "ntkpipe.models", "Linearized": "ntkpipe.models", "build_model": "ntkpipe.models",
    "NtkImplementation": "ntkpipe.ntk", "empirical_ntk": "ntkpipe.ntk", "flatten_gram": "ntkpipe.ntk",
    "jacobian_alignment": "ntkpipe.ntk",
    "read_store": "ntkpipe.store",
    "load_study": "ntkpipe.study.load",
    "plan_study": "ntkpipe.study.plan",
    "train": "ntkpipe.train",
}
"""Where each public name lives; imported on first use, so that ``import ntkpipe.workflow`` (the
Snakefile's planning) does not import JAX, xarray and the measurement library."""


__getattr__ = lazy_getattr(__name__, _HOME, globals())


__all__ = [
    "CNN",
    "DataFileError",
    "Dataset",
    "Linearized",
    "MLP",
    "NtkImplementation",
    "NtkpipeError",
    "ResultError",
    "SpecError",
    "build_model",
    "empirical_ntk",
    "flatten_gram",
    "jacobian_alignment",
    "load_dataset",
    "load_study",
    "open_dataset",
    "plan_study",
    "read_store",
    "train",
    "train_run",
]
