"""Stage jobs: the init-NTK Gram of a run's network, and its eigendecomposition."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.data import load_dataset
from ntkpipe.models import build_model
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.spec.plan import StageJob
from ntkpipe.spec.schema import DataSpec, ModelSpec
from ntkpipe.store import read_store, write_store


def compute_ntk_gram(job: StageJob, out: str | Path) -> Path:
    """Θ₀ over train ∪ test (train rows first), flattened to (n·C, n·C), float64."""
    tic = time.perf_counter()
    cfg = job.config
    data = load_dataset(DataSpec.model_validate(cfg["data"]))
    model = build_model(ModelSpec.model_validate(cfg["model"]), data.x_train.shape[1], cfg["outputs"], cfg["seed"])
    gram = np.asarray(flatten_gram(empirical_ntk(model, data.x_all)))
    ds = xr.Dataset({"gram": (("row", "col"), gram)})
    ds["n_train"] = data.x_train.shape[0]
    ds["seconds_kernel"] = time.perf_counter() - tic
    return write_store(ds, out, config=cfg, store_id=job.id)


def compute_eigendecomposition(job: StageJob, out: str | Path) -> Path:
    """Top-k eigenpairs (descending λ, unit φ_j as columns) of the Gram in ``job.input_path``."""
    tic = time.perf_counter()
    gram = read_store(job.input_path, expect_id=job.config["input"])["gram"].values
    values, vectors = top_eigenpairs(gram, job.config["top_k"])
    index = np.arange(1, len(values) + 1)
    ds = xr.Dataset({"eigenvalues": ("eigen_index", values),
                     "eigenvectors": (("point", "eigen_index"), vectors)},
                    coords={"eigen_index": index})
    ds["seconds_kernel"] = time.perf_counter() - tic
    return write_store(ds, out, config=job.config, store_id=job.id)
