"""Stage jobs ``ntk_gram`` (the init-NTK Gram of a run's network) and ``eigendecomposition`` (its
top eigenpairs, which provide eigenvector-sign labels: linearized-networks Sec. 3.1)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.stages.job import StageJob
from ntkpipe.stages.network import stage_data, stage_network
from ntkpipe.store import read_store, write_store


def compute_ntk_gram(job: StageJob, out: str | Path) -> Path:
    """Θ₀ over train ∪ test (train rows first), flattened to (n·C, n·C), float64."""
    tic = time.perf_counter()
    data = stage_data(job)
    model = stage_network(job, data.input_shape, data.principal_direction)
    gram = np.asarray(flatten_gram(empirical_ntk(model, data.x_all)))
    ds = xr.Dataset({"gram": (("row", "col"), gram)})
    ds["n_train"] = data.x_train.shape[0]
    ds["seconds_kernel"] = time.perf_counter() - tic
    return write_store(ds, out, config=job.config, store_id=job.id)


def compute_eigendecomposition(job: StageJob, out: str | Path) -> Path:
    """Top-k eigenpairs (descending λ, unit φ_j as columns) of the Gram of its ``gram`` input, by
    :func:`~ntkpipe.ntk.eigen.top_eigenpairs` (``eigh``, or Lanczos for k ≤ n/10 of n ≥ 2000 rows)."""
    tic = time.perf_counter()
    gram = read_store(job.inputs["gram"], expect_id=job.config["gram"])["gram"].values
    values, vectors = top_eigenpairs(gram, job.config["top_k"])
    index = np.arange(1, len(values) + 1)
    ds = xr.Dataset({"eigenvalues": ("eigen_index", values),
                     "eigenvectors": (("point", "eigen_index"), vectors)},
                    coords={"eigen_index": index})
    ds["seconds_kernel"] = time.perf_counter() - tic
    return write_store(ds, out, config=job.config, store_id=job.id)
