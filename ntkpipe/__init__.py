"""ntkpipe: declarative studies of how the neural tangent kernel evolves during training.

The names below are what a study author or a notebook needs; everything else lives in the
submodules (``ntkpipe.lang``, ``ntkpipe.train``, ``ntkpipe.measure``, ``ntkpipe.theory``, ...).
"""

__version__ = "0.2.0"

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
