"""What stage jobs share: the run slice they hash (data inputs, the network at init) and how to
rebuild those from a stage's config."""

from __future__ import annotations

import equinox as eqx

from ntkpipe.data import Dataset
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import MODEL_SPEC, DataSpec
from ntkpipe.models import build_model
from ntkpipe.stages.inputs import read_stages, run_data
from ntkpipe.stages.job import StageJob


def network_slice(run_config: dict) -> dict:
    """The run's network at init: its model section without ``kind``/``origin``, and its seed; without
    ``gamma`` too where the kind's network is not rescaled by it (the OFE kinds: γ is in their dynamics,
    K₀ is the unscaled network's, and a frozen kernel's γ = 0 is no network's)."""
    kind = MODEL_KINDS[run_config["model"].get("kind", "network")]
    dropped = ("kind", "origin") if kind.rescaled else ("kind", "origin", "gamma")
    model = {k: v for k, v in run_config["model"].items() if k not in dropped}
    return {"seed": run_config["seed"], "model": model}


def inputs_slice(run_config: dict) -> dict:
    """The run's inputs: its data section without the targets (``labels``)."""
    return {"data": {k: v for k, v in run_config["data"].items() if k != "labels"}}


def stage_data(job: StageJob) -> Dataset:
    """The inputs of ``job.config["data"]`` (along its NAD direction, read from the job's inputs)."""
    return run_data(DataSpec.model_validate(job.config["data"]), read_stages(job.inputs))


def stage_network(job: StageJob, input_shape: tuple[int, ...], input_direction=None) -> eqx.Module:
    """The network at init that ``job.config`` describes (``model``, ``seed``, ``outputs``); a
    near-parallel init aligns its readout with ``input_direction`` (the run's, from the same inputs)."""
    return build_model(MODEL_SPEC.validate_python(job.config["model"]), input_shape, job.config["outputs"],
                       job.config["seed"], input_direction)
