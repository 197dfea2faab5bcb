"""What results are called: the labels and symbols of sweep axes and dimensions, and of measured
variables. Result stores (:mod:`ntkpipe.jobs.describe`), figures and run labels read them here."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from ntkpipe.measure.registry import VARIABLES

AXIS_LABELS = {
    "sigma": "init scale σ", "d": "scale parameter d", "scaling.d": "scale parameter d", "depth": "depth L", "seed": "seed", "gamma": "γ",
    "data.gamma": "whitening exponent γ", "model.gamma": "feature-learning rate γ",
    "eigen_index": "eigenfunction index j", "model_kind": "model", "width": "width N", "lr": "learning rate η",
    "n_train": "training points P", "output_scale": "output scale", "teacher_scale": "teacher scale s",
    "spectrum_index": "eigenvalue index k", "mode": "mode k", "test_point": "test point",
    "nad_index": "NAD index j", "eigenfunction": "init eigenfunction index i",
    "pretrain_epochs": "pretraining epochs k", "checkpoint": "checkpoint", "architecture": "architecture",
    "lr_ratio": "learning-rate ratio η_u / η_W",
    "stein_vector": "Stein test vector u", "train_point": "training point μ", "train_point_nu": "training point ν",
}
AXIS_SYMBOLS = {"eigenfunction": "i", "sigma": "σ", "depth": "L", "gamma": "γ", "eigen_index": "j", "width": "N", "lr": "η",
                "n_train": "P", "teacher_scale": "s", "mode": "k", "spectrum_index": "k", "nad_index": "j",
                "pretrain_epochs": "k"}
TIME_LABEL = "time t = η · step"
DISPLAY_NAMES = {
    "network": "network", "linearized": "linearized", "kgd": "kernel GD (frozen K₀)",
    "akgd": "kernel GD (K₀ rescaled to ‖K_T‖)", "ofe": "OFE", "ofe_fit": "OFE (fitted γ̂)", "mlp": "MLP",
    "lenet": "LeNet-5", "relu": "ReLU", "init": "initialization", "end": "end of training",
    "pretrained_linearization": "pretrained linearization", "two_groups": "two groups",
}
"""What a reader is shown for a coordinate value that is an id (a model kind, an architecture, a
case); an id not listed is shown word by word (:data:`DISPLAY_WORDS`), spaces for underscores."""
DISPLAY_WORDS = {"relu": "ReLU", "ntk": "NTK", "mlp": "MLP", "lenet": "LeNet", "gd": "GD", "adam": "Adam",
                 "sgd": "SGD", "kgd": "kernel GD", "ofe": "OFE", "nad": "NAD", "lr": "lr"}


def _stein_vectors(values: list) -> list[str]:
    """The Stein check's test vectors 1…k+1: the top k NADs v₁…v_k, then the random unit vector."""
    return [f"v{str(v).translate(SUBSCRIPTS)}" for v in values[:-1]] + ["random"]


SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
PLAIN_DIGITS = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")
TICK_NAMES = {"stein_vector": _stein_vectors}
"""Coordinates whose numbers stand for something else: their values as shown (ticks, table columns)."""


def tick_names(dim: str, values: list, plain: bool = False) -> list[str]:
    """The values of coordinate ``dim`` as a reader is shown them (:data:`TICK_NAMES`, else as they are);
    ``plain``: digits for subscripts (CSV column names)."""
    names = TICK_NAMES[dim](list(values)) if dim in TICK_NAMES else [str(v) for v in values]
    return [n.translate(PLAIN_DIGITS) for n in names] if plain else names


CLASS = "output_classes"
"""The study dataset's attribute naming, per run id, the class each output c stands for (JSON
{run id: [name of output 1, …]}; :func:`ntkpipe.data.dataset.output_classes`), for the runs whose
outputs are one per class (``digit 0`` … ``digit 9``). An attribute outlives a figure's selection of
one output (``where: {output: 3}``), whose targets are still named."""
CLASS_DIMS = ("output", "target")
"""Dimensions whose value c stands for the class of output c (target y_c is class c's target)."""


def coordinate_names(ds: xr.Dataset, dim: str, values: list) -> list[str] | None:
    """What a figure of ``ds`` (after its selection) shows for the ``values`` of dimension ``dim``: for
    ``output`` and ``target`` (1 … C), the classes they stand for (:data:`CLASS`) when every run left
    names them alike (ten-class digits: target 3 is ``digit 2``); else :func:`tick_names` for
    coordinates in :data:`TICK_NAMES`; None when the values are shown as they are (numbers)."""
    if dim in CLASS_DIMS and CLASS in ds.attrs and "run_id" in ds:
        classes = json.loads(ds.attrs[CLASS])
        runs = {str(r) for r in np.ravel(ds["run_id"].values)} - {""}
        named = {tuple(classes.get(r, ())) for r in runs}
        if len(named) == 1 and (names := named.pop()) and all(1 <= int(v) <= len(names) for v in values):
            return [names[int(v) - 1] for v in values]
        return None
    return tick_names(dim, values) if dim in TICK_NAMES else None


def display_name(value) -> str:
    """The name a figure shows for the label ``value`` (:data:`DISPLAY_NAMES`)."""
    text = str(value)
    return DISPLAY_NAMES.get(text) or " ".join(DISPLAY_WORDS.get(w, w) for w in text.split("_"))


def variable_label(name: str) -> str:
    return VARIABLES[name].label if name in VARIABLES else name


def axis_label(name: str, ds: xr.Dataset | None = None) -> str:
    """The label of dimension ``name``; a sweep axis whose short name is ambiguous (``gamma``) is looked
    up by the axis key the study dataset records in the coordinate's ``axis`` attribute."""
    if ds is not None and name in ds.coords:
        name = ds[name].attrs.get("axis", name)
    return AXIS_LABELS.get(name, display_name(name))
