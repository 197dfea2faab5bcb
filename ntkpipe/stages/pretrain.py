"""Stage job ``pretrain``: the run's network trained as the run would be, with its trainable
parameters θ_k stored after every epoch k (origins of linearizations, linearized-networks Sec. 4.3)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from ntkpipe.data import output_count
from ntkpipe.lang.schema import CheckpointSpec, RunSpec
from ntkpipe.measure.context import ModelView, RunContext
from ntkpipe.measure.outputs import train_loss
from ntkpipe.models import build_model, learning_rate_scale, run_keys, stored
from ntkpipe.models.flat import flat_vector
from ntkpipe.stages.inputs import read_stages, run_data
from ntkpipe.stages.job import StageJob
from ntkpipe.stages.kind import StageKind
from ntkpipe.stages.network import network_slice
from ntkpipe.store import write_store
from ntkpipe.train import train


def pretrain(job: StageJob, out: str | Path) -> Path:
    """θ_k for k = 0 … E epochs (``params`` over ``epoch`` and ``parameter``) and the training loss."""
    tic = time.perf_counter()
    spec = RunSpec.model_validate({**{k: job.config[k] for k in ("seed", "data", "model", "train")},
                                   "measure": []})
    data = run_data(spec.data, read_stages(job.inputs))
    network = build_model(spec.model, data.input_shape, output_count(spec.data), spec.seed, data.principal_direction)
    run = RunContext(spec, data, network)
    assert spec.train.epochs is not None, "a pretrain stage trains by epochs (_pretrain_check)"
    every_epoch = spec.train.model_copy(update={"checkpoints": CheckpointSpec(spacing="linear",
                                                                              count=spec.train.epochs)})

    def measure(model, index: int, last: bool) -> dict:
        return {**train_loss(ModelView(model, run), None), "params": flat_vector(stored(model)[0])}

    traj = train(network, data.x_train, data.y_train, every_epoch, key=run_keys(spec.seed)[1], measure=measure,
                 label=f"pretrain {job.id[:8]}", lr_scale=learning_rate_scale(spec.model))
    epochs = np.round(traj.epoch).astype(int)
    ds = xr.Dataset({"params": (("epoch", "parameter"), traj.series["params"]),
                     "loss": ("epoch", traj.series["loss"])}, coords={"epoch": epochs})
    ds["diverged"] = int(traj.diverged)
    ds["seconds_train"] = time.perf_counter() - tic
    return write_store(ds, out, config=job.config, store_id=job.id)


def _pretrain_config(spec, run: RunSpec, run_config: dict, upstream: dict) -> dict:
    model = dict(network_slice(run_config)["model"], kind="network")
    return {"seed": run_config["seed"], "model": model, "data": run_config["data"], "train": run_config["train"],
            "outputs": output_count(run.data)}


def _pretrain_check(name: str, spec, run: RunSpec) -> list[tuple[tuple, str]]:
    if run.train.epochs is None:
        return [(("model", "origin"), "a 'pretrain' origin stores θ_k per epoch: give train.epochs (not steps or "
                 "max_time)")]
    assert run.model.origin is not None, "the check of the stage that a run's model.origin names"
    k = run.model.origin.epochs
    return [(("model", "origin"), f"model.origin.epochs {k} exceeds train.epochs {run.train.epochs}")] \
        if k > run.train.epochs else []


KINDS = [StageKind("pretrain", "origin", _pretrain_config, pretrain, check=_pretrain_check)]
