"""Stage jobs ``ntk_gram`` (the init-NTK Gram of a run's network) and ``eigendecomposition`` (its
top eigenpairs, which provide eigenvector-sign labels: linearized-networks Sec. 3.1)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.data import output_count
from ntkpipe.lang.schema import RunSpec
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.stages.job import StageJob
from ntkpipe.stages.kind import StageKind
from ntkpipe.stages.network import inputs_slice, network_slice, stage_data, stage_network
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


def _gram_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    return {**network_slice(run_config), **inputs_slice(run_config), "outputs": output_count(run.data)}


def _eigen_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    return {"gram": upstream["gram"], "top_k": spec.top_k}


def _eigen_check(name: str, spec, run: RunSpec) -> list[tuple[tuple, str]]:
    """top_k ≤ the Gram's rows (n_train + n_test) × outputs; the label index and rotation's top_k
    ≤ the eigenpairs the stage keeps."""
    n_all = (run.data.n_train + run.data.n_test) * output_count(run.data)
    if spec.top_k is not None and spec.top_k > n_all:
        return [(("stages", name, "top_k"), f"top_k {spec.top_k} exceeds the {n_all} eigenpairs of the Gram over "
                 f"train ∪ test ((n_train {run.data.n_train} + n_test {run.data.n_test}) × {output_count(run.data)} "
                 f"output(s)); use top_k <= {n_all} or null (all)")]
    limit, kept = min(n_all, spec.top_k or n_all), "its top_k" if spec.top_k else "(n_train + n_test) × outputs"
    problems = []
    j = run.data.labels.eigen_index
    if j is not None and j > limit:
        problems.append((("data", "labels"), f"data.labels.eigen_index {j} exceeds the {limit} "
                         f"eigenvectors of stage {name!r} ({kept})"))
    for i, item in enumerate(run.measure):
        if item.name == "rotation" and item.options["top_k"] > limit:
            problems.append((("measure", i, "top_k"), f"rotation: top_k {item.options['top_k']} exceeds the {limit} "
                             f"eigenpairs stage {name!r} keeps ({kept}); use top_k <= {limit} or raise the stage's "
                             "top_k"))
    return problems


KINDS = [
    StageKind("ntk_gram", None, _gram_config, compute_ntk_gram),
    StageKind("eigendecomposition", "labels", _eigen_config, compute_eigendecomposition, reads_run_data=False,
              upstream=lambda spec: {"gram": (spec.input, "ntk_gram")}, check=_eigen_check),
]
