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
from ntkpipe.lang.schema import RunSpec
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
        check: (stage name, stage spec, run) → problems of that run with this stage, as (key path
            in the spec, message): the stage's options against the run's data and what the run reads.
    """

    compute: str
    provides: str | None
    config: Callable[..., dict]
    job: Callable[[StageJob, Path], Path]
    reads_run_data: bool = True
    upstream: Callable[..., dict[str, tuple[str, str]]] = lambda spec: {}
    check: Callable[..., list[tuple[tuple, str]]] = lambda name, spec, run: []


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


def _nad_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    options = spec.model_dump(exclude={"compute"})
    return {**network_slice(run_config), "shape": list(run.data.shape), "outputs": output_count(run.data),
            **options}


def _nad_check(name: str, spec, run: RunSpec) -> list[tuple[tuple, str]]:
    """The NAD index and the Stein check's vectors ≤ the input dimension (one NAD per coordinate)."""
    d = math.prod(run.data.shape)
    j = run.data.directions.nad_index
    problems = [(("data", "directions"), f"data.directions.nad_index {j} exceeds the input dimension {d} of "
                 "data.shape")] if j > d else []
    if spec.stein_vectors > d:
        problems.append((("stages", name, "stein_vectors"), f"stein_vectors {spec.stein_vectors} exceeds the {d} "
                         f"NADs of inputs of shape {list(run.data.shape)}; use stein_vectors <= {d}"))
    if getattr(run.model, "init", "gaussian") == "near_parallel":  # the stage's network precedes its data
        problems.append((("model", "init"), "model.init 'near_parallel' aligns the readout with the training "
                         "inputs, which nad data are built from by this stage's network; use another init"))
    return problems


def _pretrain_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    model = dict(network_slice(run_config)["model"], kind="network")
    return {"seed": run_config["seed"], "model": model, "data": run_config["data"], "train": run_config["train"],
            "outputs": output_count(run.data)}


def _pretrain_check(name: str, spec, run: RunSpec) -> list[tuple[tuple, str]]:
    if run.train.epochs is None:
        return [(("model", "origin"), "a 'pretrain' origin stores θ_k per epoch: give train.epochs (not steps or "
                 "max_time)")]
    k = run.model.origin.epochs
    return [(("model", "origin"), f"model.origin.epochs {k} exceeds train.epochs {run.train.epochs}")] \
        if k > run.train.epochs else []


STAGES: dict[str, StageKind] = {
    "ntk_gram": StageKind("ntk_gram", None, _gram_config, compute_ntk_gram),
    "eigendecomposition": StageKind(
        "eigendecomposition", "labels", _eigen_config, compute_eigendecomposition, reads_run_data=False,
        upstream=lambda spec: {"gram": (spec.input, "ntk_gram")}, check=_eigen_check),
    "nad": StageKind("nad", "directions", _nad_config, compute_nads, reads_run_data=False, check=_nad_check),
    "pretrain": StageKind("pretrain", "origin", _pretrain_config, pretrain, check=_pretrain_check),
}
