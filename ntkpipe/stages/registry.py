"""The stage kinds a study may declare under ``stages:``, one record each.

A :class:`StageKind` says what the stage provides to runs (see :mod:`ntkpipe.stages.inputs`), which
other stages of the study it reads (``upstream``), the slice of a run's config it depends on (its
id is the hash of that slice, so runs that share the slice share the stage), its job function,
and the checks a run that uses it must pass. The Snakefile has one rule for every kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ntkpipe.data import output_count
from ntkpipe.spec.schema import RunSpec
from ntkpipe.stages.gram import compute_eigendecomposition, compute_ntk_gram
from ntkpipe.stages.job import StageJob
from ntkpipe.stages.nad import compute_nads
from ntkpipe.stages.network import inputs_slice, network_slice
from ntkpipe.stages.pretrain import pretrain


@dataclass(frozen=True)
class StageKind:
    """One kind of stage.

    Attributes:
        compute: its name in a spec (``stages: {name: {compute: ...}}``).
        provides: ``labels`` | ``directions`` | ``origin`` (what runs that name it get), or None
            for a stage only other stages read.
        upstream: stage spec → {role: (name of another stage, the kind it must be)}.
        config: (stage spec, run, run config with its data stages resolved, {role: upstream id})
            → the config slice that the stage's id hashes.
        reads_run_data: whether the stage reads the run's data, and so the stages that provide it.
        job: (StageJob, output path) → output path.
        check: (stage spec, run) → problems of that run with this stage.
    """

    compute: str
    provides: str | None
    config: Callable[..., dict]
    job: Callable[[StageJob, Path], Path]
    reads_run_data: bool = True
    upstream: Callable[..., dict[str, tuple[str, str]]] = lambda spec: {}
    check: Callable[..., list[str]] = lambda spec, run: []


def _gram_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    return {**network_slice(run_config), **inputs_slice(run_config), "outputs": output_count(run.data)}


def _eigen_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    return {"gram": upstream["gram"], "top_k": spec.top_k}


def _eigen_check(spec, run: RunSpec) -> list[str]:
    n_all = (run.data.n_train + run.data.n_test) * output_count(run.data)
    limit = min(n_all, spec.top_k or n_all)
    j = run.data.labels.eigen_index
    return [f"data.labels.eigen_index {j} exceeds the {limit} eigenvectors of the stage (its top_k, or "
            "(n_train + n_test) × outputs)"] if j is not None and j > limit else []


def _nad_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    options = spec.model_dump(exclude={"compute"})
    return {**network_slice(run_config), "shape": list(run.data.shape), "outputs": output_count(run.data),
            **options}


def _nad_check(spec, run: RunSpec) -> list[str]:
    d = math.prod(run.data.shape)
    j = run.data.directions.nad_index
    problems = [f"data.directions.nad_index {j} exceeds the input dimension {d} of data.shape"] if j > d else []
    if getattr(run.model, "init", "gaussian") == "near_parallel":  # the stage's network precedes its data
        problems.append("model.init 'near_parallel' aligns the readout with the training inputs, which nad data "
                        "are built from by this stage's network; use another init")
    return problems


def _pretrain_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    model = dict(network_slice(run_config)["model"], kind="network")
    return {"seed": run_config["seed"], "model": model, "data": run_config["data"], "train": run_config["train"],
            "outputs": output_count(run.data)}


def _pretrain_check(spec, run: RunSpec) -> list[str]:
    if run.train.epochs is None:
        return ["a 'pretrain' origin stores θ_k per epoch: give train.epochs (not steps or max_time)"]
    k = run.model.origin.epochs
    return [f"model.origin.epochs {k} exceeds train.epochs {run.train.epochs}"] if k > run.train.epochs else []


STAGES: dict[str, StageKind] = {
    "ntk_gram": StageKind("ntk_gram", None, _gram_config, compute_ntk_gram),
    "eigendecomposition": StageKind(
        "eigendecomposition", "labels", _eigen_config, compute_eigendecomposition, reads_run_data=False,
        upstream=lambda spec: {"gram": (spec.input, "ntk_gram")}, check=_eigen_check),
    "nad": StageKind("nad", "directions", _nad_config, compute_nads, reads_run_data=False, check=_nad_check),
    "pretrain": StageKind("pretrain", "origin", _pretrain_config, pretrain, check=_pretrain_check),
}
