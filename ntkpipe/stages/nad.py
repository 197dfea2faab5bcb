"""Stage job ``nad``: neural anisotropy directions of a run's network at init, and the Stein check
of Theorem 1 (linearized-networks Sec. 3.2, App. C.2)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import jax
import numpy as np
import xarray as xr

from ntkpipe.data import output_count
from ntkpipe.lang.schema import RunSpec
from ntkpipe.ntk.mixed import neural_anisotropy_directions, stein_check
from ntkpipe.stages.job import StageJob
from ntkpipe.stages.kind import StageKind
from ntkpipe.stages.network import network_slice, stage_network
from ntkpipe.store import write_store


def compute_nads(job: StageJob, out: str | Path) -> Path:
    """v_j and σ_j² from the SVD of ∇²ₓθ f (at x = 0, or averaged over x ~ N(0, I)), descending;
    the Stein check on the top ``stein_vectors`` NADs and one random unit vector."""
    tic = time.perf_counter()
    cfg = job.config
    shape = tuple(cfg["shape"])
    model = stage_network(job, shape)
    key = jax.random.fold_in(jax.random.PRNGKey(cfg["seed"]), 2)
    sigma_sq, directions = neural_anisotropy_directions(model, shape, at=cfg["at"], samples=cfg["samples"],
                                                        key=key)
    rng = np.random.default_rng(cfg["seed"])
    random_direction = rng.standard_normal(shape)
    tests = np.concatenate([directions[: cfg["stein_vectors"]],
                            (random_direction / np.linalg.norm(random_direction))[None]])
    check = stein_check(model, shape, tests, samples=cfg["stein_samples"], key=jax.random.fold_in(key, 1))
    image_dims = ("row", "column", "channel") if len(shape) == 3 else ("coordinate",)
    ds = xr.Dataset(
        {"sigma_sq": ("nad_index", np.asarray(sigma_sq)),
         "directions": (("nad_index", *image_dims), np.asarray(directions)),
         "stein_relerr": ("stein_vector", np.asarray(check["relative_error"])),
         "stein_alpha_monte_carlo": ("stein_vector", np.asarray(check["alpha_monte_carlo"])),
         "stein_alpha_theorem": ("stein_vector", np.asarray(check["alpha_stein"]))},
        coords={"nad_index": np.arange(1, len(sigma_sq) + 1),
                "stein_vector": [f"v{j}" for j in range(1, cfg["stein_vectors"] + 1)] + ["random"]})
    ds["seconds_kernel"] = time.perf_counter() - tic
    return write_store(ds, out, config=cfg, store_id=job.id)


def _nad_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    options = spec.model_dump(exclude={"compute"})
    return {**network_slice(run_config), "shape": list(run.data.shape), "outputs": output_count(run.data),
            **options}


def _nad_check(name: str, spec, run: RunSpec) -> list[tuple[tuple, str]]:
    """The NAD index and the Stein check's vectors ≤ the input dimension (one NAD per coordinate)."""
    d = math.prod(run.data.shape)
    j = run.data.directions.nad_index
    problems: list[tuple[tuple, str]] = [(("data", "directions"), f"data.directions.nad_index {j} exceeds the "
                                          f"input dimension {d} of data.shape")] if j > d else []
    if spec.stein_vectors > d:
        problems.append((("stages", name, "stein_vectors"), f"stein_vectors {spec.stein_vectors} exceeds the {d} "
                         f"NADs of inputs of shape {list(run.data.shape)}; use stein_vectors <= {d}"))
    if getattr(run.model, "init", "gaussian") == "near_parallel":  # the stage's network precedes its data
        problems.append((("model", "init"), "model.init 'near_parallel' aligns the readout with the training "
                         "inputs, which nad data are built from by this stage's network; use another init"))
    return problems


KINDS = [StageKind("nad", "directions", _nad_config, compute_nads, reads_run_data=False, check=_nad_check)]
