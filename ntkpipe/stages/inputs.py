"""A run's inputs — its data and initial model — with what its stages provide applied.

Stages provide one of three things, applied in this order:

    directions   data built along a stage's vector (``nad`` data, ``data.directions``)
    labels       targets replaced by a stage's (``eigenvector_sign`` labels, ``data.labels``)
    origin       the model linearized around a stage's network (``model.origin``)

:data:`REFERENCES` says where a run names the stage that provides each.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import xarray as xr

from ntkpipe.data import Dataset, eigenvector_sign_targets, load_dataset, output_count
from ntkpipe.lang.schema import DataSpec, RunSpec
from ntkpipe.measure.context import RunContext
from ntkpipe.models import Linearized, build_model, stored
from ntkpipe.models.flat import from_flat_vector
from ntkpipe.store import read_store

REFERENCES: dict[str, tuple[str, ...]] = {
    "directions": ("data", "directions"),
    "labels": ("data", "labels"),
    "origin": ("model", "origin"),
}
"""What a stage provides → the run-spec section that names it (its ``stage`` key)."""


def read_stages(paths: dict[str, Path]) -> dict[str, xr.Dataset]:
    return {role: read_store(path).load() for role, path in paths.items()}


def run_data(spec: DataSpec, stages: dict[str, xr.Dataset]) -> Dataset:
    """The data of ``spec``: along its NAD direction if it has one, with eigenvector labels if asked."""
    direction = None
    if spec.directions is not None:
        direction = stages["directions"]["directions"].values[spec.directions.nad_index - 1]
    data = load_dataset(spec, direction=direction)
    if spec.labels.kind == "eigenvector_sign":
        index = spec.labels.eigen_index
        assert index is not None, "eigenvector_sign labels have an eigen_index (LabelsSpec)"
        data = data.with_targets(eigenvector_sign_targets(stages["labels"]["eigenvectors"].values, index))
    return data


def run_context(spec: RunSpec, stage_paths: dict[str, Path]) -> RunContext:
    """The run's data and initial model (linearized around its origin's θ_k if it has one)."""
    stages = read_stages(stage_paths)
    data = run_data(spec.data, stages)
    model0 = build_model(spec.model, data.input_shape, output_count(spec.data), spec.seed, data.principal_direction)
    if spec.model.origin is not None:
        assert isinstance(model0, Linearized), "only linearized model kinds take an origin (ModelBase)"
        model0 = Linearized(origin_network(model0.origin, stages["origin"], spec.model.origin.epochs),
                            centered=True)
    return RunContext(spec, data, model0, stages)


def origin_network(network, pretrain: xr.Dataset, epochs: int):
    """``network`` with the parameters (and state) a pretrain stage stored after ``epochs`` epochs."""
    arrays, rest = stored(network)
    return eqx.combine(from_flat_vector(arrays, pretrain["params"].sel(epoch=epochs).values), rest)
