"""ntkpipe: declarative studies of how the neural tangent kernel evolves during training.

The names below are what a study author or a notebook needs; everything else lives in the
submodules (``ntkpipe.lang``, ``ntkpipe.train``, ``ntkpipe.measure``, ``ntkpipe.theory``, ...).
"""

import jax

# Kernels, eigendecompositions, kernel regression and theory run in float64; training keeps
# float32 by passing explicit dtypes, so enabling x64 here changes no training numbers.
jax.config.update("jax_enable_x64", True)

__version__ = "0.2.0"

from ntkpipe.data import Dataset, load_dataset  # noqa: E402
from ntkpipe.errors import DataFileError, NtkpipeError, ResultError, SpecError  # noqa: E402
from ntkpipe.jobs import train_run  # noqa: E402
from ntkpipe.layout import open_dataset  # noqa: E402
from ntkpipe.models import CNN, MLP, Linearized, build_model  # noqa: E402
from ntkpipe.ntk import NtkImplementation, empirical_ntk, flatten_gram, jacobian_alignment  # noqa: E402
from ntkpipe.store import read_store  # noqa: E402
from ntkpipe.study.load import load_study  # noqa: E402
from ntkpipe.study.plan import plan_study  # noqa: E402
from ntkpipe.train import train  # noqa: E402

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
