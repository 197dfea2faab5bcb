"""Packs: runs to be trained together in one compiled program (:mod:`ntkpipe.train.packed`).

Two runs go in one pack when their resolved specs are equal except in the leaves a packed program
maps over: ``seed``, ``model.sigma``, ``data.labels.eigen_index`` and ``train.optimizer.lr`` (the
last only when the step count does not depend on it, i.e. without ``train.max_time``). Only MLPs
(networks and their linearizations) are packed: vmapped convolutions sum in another order, and 160
SGD steps of LeNet-5 on the digits amplify that to 1 % of the final parameters (and they ran no
faster on CPU); kernel kinds evolve a Gram, not a network. Members read the same stage stores (so a
pack's inputs are each member's: Snakemake, which records a store's rule inputs, params and code,
sees the same for a store whether a pack or the ``train`` rule made it). Packs hold only runs whose
store is missing, so adding one σ to a finished sweep plans one single run, trained by the
``train`` rule exactly as before; a pack's id is a hash of its sorted member run ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ntkpipe.lang.identity import canonical_json, content_id
from ntkpipe.lang.model_kinds import MODEL_KINDS

if TYPE_CHECKING:  # the Snakefile imports this module; its runs are planned (or unpickled) only with packing on
    from ntkpipe.lang.schema import RunSpec
    from ntkpipe.study.plan import RunJob

MAX_PACK = 32
"""The most runs in one pack: bounds a packed job's memory (k copies of the parameters, optimizer
state and data) and keeps enough jobs for the cores and GPUs of a cluster."""


@dataclass(frozen=True)
class PackJob:
    """Runs trained by one job; ``runs`` sorted by id."""

    id: str
    runs: tuple[RunJob, ...]


def pack_key(spec: RunSpec) -> str | None:
    """The spec without its mapped leaves (runs with equal keys pack), or None if it never packs."""
    if MODEL_KINDS[spec.model.kind].pack_stepper is None or spec.model.architecture != "mlp":
        return None
    config = spec.model_dump(mode="json")
    config.pop("seed")
    config["model"].pop("sigma", None)
    config["data"].get("labels", {}).pop("eigen_index", None)
    if spec.train.max_time is None:
        config["train"]["optimizer"].pop("lr")
    return canonical_json(config)


def plan_packs(runs: Iterable[RunJob], max_size: int = MAX_PACK, *, only_missing: bool = True) -> dict[str, PackJob]:
    """Packs of ≥ 2 runs whose store does not exist, by id: runs with equal keys, in id order, cut
    into chunks of at most ``max_size`` runs; a pack is a chunk's runs still to be made. The chunks
    depend only on the planned runs, not on which stores exist, so a job process of a cluster
    profile, which plans again while other packs' stores appear, finds its own pack unchanged.
    ``only_missing=False``: the packs of an empty results directory (what a finished run packed)."""
    groups: dict[tuple, list[RunJob]] = {}
    for job in sorted(runs, key=lambda j: j.id):
        key = pack_key(job.spec)
        if key is not None:
            groups.setdefault((key, tuple(sorted((k, str(p)) for k, p in job.stage_paths.items()))), []).append(job)
    packs = {}
    for members in groups.values():
        for start in range(0, len(members), max_size):
            chunk = tuple(job for job in members[start:start + max_size] if not (only_missing and job.path.exists()))
            if len(chunk) > 1:
                pack_id = content_id(sorted(j.id for j in chunk))
                packs[pack_id] = PackJob(pack_id, chunk)
    return packs


def packs_by_run(packs: dict[str, PackJob]) -> dict[str, PackJob]:
    """The pack that trains each packed run, by run id."""
    return {job.id: pack for pack in packs.values() for job in pack.runs}


def unpacked_pattern(packed: set[str]) -> str:
    """The regex of a run id that no pack trains (the ``train`` rule's ``run_id``): 16 hex digits,
    none of ``packed`` (a negative lookahead; run ids all have 16 digits)."""
    if not packed:
        return "[0-9a-f]{16}"
    return "(?!" + "|".join(sorted(packed)) + ")[0-9a-f]{16}"
