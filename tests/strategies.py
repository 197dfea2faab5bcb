"""Hypothesis strategies for valid studies, drawn from the language's own registries.

The choices come from the schema and the registries, not from lists kept here: the ``Literal``
fields of :mod:`ntkpipe.lang.schema` (sources, activations, parameterizations, optimizers, losses,
schedules, model kinds, label kinds, summary kinds), :data:`~ntkpipe.lang.schema.ARCHITECTURE_SPECS`,
the figure kinds of ``FigureSpec``, :data:`~ntkpipe.stages.STAGES` (what a stage provides, and
where a run names it: :data:`~ntkpipe.stages.inputs.REFERENCES`), the sweep axes
:data:`~ntkpipe.lang.axes.AXES` and the measurements of :data:`~ntkpipe.measure.REGISTRY` with
their ``unmet`` requirements, ``depends_on`` and declared options. A newly registered measurement,
option, activation, optimizer, loss or axis is generated without editing this file; a new source,
architecture, stage, figure kind or claim relation needs a builder below (``test_builders_cover_the_registries``
fails until it has one). A data source is drawn from its record (:data:`ntkpipe.data.sources.SOURCES`):
the sources below have builders that vary their options; any other is drawn from its ``example``.

A study is drawn in three steps: the run sections (data, model, train) and the sweep; then the
runs, resolved by the real loader with ``measure: [loss]``; then the measurements every run meets
(``Measurement.unmet``, as the validator asks), the figures and summaries of their variables. The
result is validated by :func:`ntkpipe.study.load.load_study` and by :func:`semantically_sound` (the
hook for checks the validator does not make yet); hypothesis rejects the rest (``assume``).
"""

from __future__ import annotations

import copy
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from hypothesis import assume
from hypothesis import strategies as st

from ntkpipe import summaries
from ntkpipe.data.dataset import output_count
from ntkpipe.data.sources import SOURCES as SOURCE_RECORDS
from ntkpipe.errors import SpecError
from ntkpipe.lang import model_kinds, schema
from ntkpipe.lang.axes import AXES, models_in
from ntkpipe.lang.paths import get_path, set_path
from ntkpipe.measure.registry import REGISTRY, TIME_UNITS, Measurement
from ntkpipe.stages import STAGES
from ntkpipe.stages.inputs import REFERENCES
from ntkpipe.study.load import Study, load_study

# ------------------------------------------------------------------ the registries' choices


def literal_values(model: type, name: str) -> tuple:
    """The values of a ``Literal`` field (through Optional and Annotated)."""
    annotation = model.model_fields[name].annotation
    for arg in [annotation, *typing.get_args(annotation)]:
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    raise TypeError(f"{model.__name__}.{name} is not a Literal field")


SOURCES = literal_values(schema.DataSpec, "source")
assert set(SOURCES) == set(SOURCE_RECORDS)
ACTIVATIONS = literal_values(schema.ModelBase, "activation")
PARAMETERIZATIONS = literal_values(schema.ModelBase, "parameterization")
MODEL_KINDS = literal_values(schema.ModelBase, "kind")
OPTIMIZERS = literal_values(schema.OptimizerSpec, "name")
SCHEDULES = literal_values(schema.OptimizerSpec, "schedule")
LOSSES = literal_values(schema.TrainSpec, "loss")
SPACINGS = literal_values(schema.CheckpointSpec, "spacing")
DTYPES = literal_values(schema.TrainSpec, "dtype")
LABEL_KINDS = literal_values(schema.LabelsSpec, "kind")
SUMMARY_KINDS = list(summaries.SUMMARY_KINDS)
FIGURE_KINDS = {literal_values(m, "kind")[0]: m for m in models_in(schema.FigureSpec)}
ARCHITECTURES = tuple(schema.ARCHITECTURE_SPECS)
PADDINGS = literal_values(schema.ConvLayerSpec, "padding")
POOLS = literal_values(schema.ConvLayerSpec, "pool")
PRESETS = literal_values(schema.CnnSpec, "preset")

# tiny sizes
MAX_N, MAX_WIDTH, MAX_DEPTH, MAX_STEPS = 16, 16, 3, 30


def yaml_text(spec: dict, **options) -> str:
    """``yaml.safe_dump(spec, sort_keys=False)`` through libyaml's emitter where PyYAML has it: the same
    representer, so the same scalars; the pure-Python emitter was a third of a generated test's time."""
    return yaml.dump(spec, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False, **options)


@dataclass
class DrawnStudy:
    """A generated study: its spec (a YAML-ready mapping) and the measurements it asks for."""

    name: str
    spec: dict
    measurements: list[str] = field(default_factory=list)

    def text(self) -> str:
        return yaml_text(self.spec, allow_unicode=True)

    def write(self, directory: Path) -> Path:
        path = Path(directory) / f"{self.name}.yaml"
        path.write_text(self.text())
        return path


# ------------------------------------------------------------------ data


def _synthetic(draw, source: str) -> dict:
    data = {"source": source, "dim": draw(st.integers(2, 6))}
    if source == "linear_teacher":
        data["inputs"] = draw(st.sampled_from(literal_values(schema.DataSpec, "inputs")))
        data["teachers"] = draw(st.integers(1, 3))
        data["teacher_scale"] = draw(st.sampled_from([0.5, 1.0, 2.0]))
    if source == "gaussian_mixture":
        c = draw(st.integers(2, min(3, data["dim"])))
        data.update(clusters=c, noise=draw(st.sampled_from([0.1, 0.5])),
                    n_train=c * draw(st.integers(2, MAX_N // c)), n_test=c * draw(st.integers(0, 3)))
    return data


def native_shape(source: str) -> tuple[int, ...]:
    """One input's shape of ``source`` at its defaults (an image source's native H, W, channels)."""
    record = SOURCE_RECORDS[source]
    return record.input_shape(schema.DataSpec.model_validate({"source": source, **record.example}))


def _images(draw, source: str, data_dirs: dict[str, str]) -> dict:
    data = {"source": source}
    if source in data_dirs:
        data["path"] = data_dirs[source]
    if draw(st.booleans()):
        data["image_size"] = draw(st.integers(4, min(8, native_shape(source)[0])))
    elif source != "digits":
        data["image_size"] = 8  # 28² / 32² inputs compile slowly; the native side is covered by digits
    if source == "cifar10" and draw(st.booleans()):
        data["grayscale"] = True
    if draw(st.booleans()):
        data["classes"] = draw(st.lists(st.integers(0, 9), min_size=2, max_size=4, unique=True))
    return data


def _nad(draw) -> dict:
    shape = draw(st.sampled_from([[6], [4, 4, 1], [5, 5, 2]]))
    return {"source": "nad", "shape": shape, "margin": draw(st.sampled_from([0.5, 1.0])),
            "noise": draw(st.sampled_from([0.5, 1.0])), "half_margin": draw(st.booleans()),
            "directions": {"stage": "nads", "nad_index": draw(st.integers(1, 3))}}


VARIED = {
    **{s: lambda draw, s=s, dirs=None: _synthetic(draw, s) for s in ("linear_teacher", "random_labels", "gaussian_mixture")},
    **{s: lambda draw, s=s, dirs=None: _images(draw, s, dirs or {}) for s in ("digits", "mnist", "cifar10")},
    "nad": lambda draw, dirs=None: _nad(draw),
}
"""Builders that vary a source's options."""
DATA_BUILDERS = {s: VARIED.get(s, lambda draw, s=s, dirs=None: {"source": s, **copy.deepcopy(SOURCE_RECORDS[s].example)})
                 for s in SOURCE_RECORDS}


def image_shape(data: dict) -> tuple[int, ...] | None:
    """The (H, W, C) input shape of image data, None for vector data (as the source's record says)."""
    shape = SOURCE_RECORDS[data["source"]].input_shape(schema.DataSpec.model_validate(data))
    return tuple(shape) if len(shape) == 3 else None


def _data(draw, data_dirs: dict[str, str]) -> dict:
    source = draw(st.sampled_from(SOURCES))
    data = DATA_BUILDERS[source](draw, dirs=data_dirs)
    if "n_train" not in data:
        data["n_train"] = draw(st.integers(4, MAX_N))
        data["n_test"] = draw(st.sampled_from([0, 4, 6]))
    if "gamma" in SOURCE_RECORDS[source].keys and "gamma" not in data:
        if draw(st.booleans()):
            data["gamma"] = draw(st.sampled_from([0.0, 0.5, 1.0]))
    data["seed"] = draw(st.integers(0, 3))
    labels = draw(st.sampled_from(LABEL_KINDS))
    if labels == "eigenvector_sign" and source != "nad":
        data["labels"] = {"kind": labels, "stage": "eigen", "eigen_index": draw(st.integers(1, 3))}
    elif labels == "two_groups" and SOURCE_RECORDS[source].class_count and "classes" not in data:
        data["labels"] = {"kind": labels}
        if draw(st.booleans()):
            data["labels"]["groups"] = [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    return data


# ------------------------------------------------------------------ model


def _mlp(draw) -> dict:
    depth = draw(st.integers(1, MAX_DEPTH))
    model = {"depth": depth, "width": 2 * draw(st.integers(1, MAX_WIDTH // 2))}
    init = draw(st.sampled_from(literal_values(schema.MlpSpec, "init")))
    if init == "near_parallel" and depth == 2:
        model["init"] = init
        if draw(st.booleans()):
            model["disturbance"] = 0.1
    elif init == "mirrored" and depth >= 2:
        model["init"] = init
    if draw(st.integers(0, 4)) == 0:
        model["layer_variance"] = [draw(st.sampled_from([0.25, 1.0])) for _ in range(depth)]
    return model


def _cnn(draw, shape: tuple[int, ...]) -> dict | None:
    """A CNN whose layers fit the (H, W, C) input: SAME convolutions, pools only while the side allows."""
    side = shape[0]
    if PRESETS and side >= 4 and draw(st.booleans()):
        return {"architecture": "cnn", "preset": draw(st.sampled_from([p for p in PRESETS if p]))}
    conv = []
    for _ in range(draw(st.integers(1, 2))):
        layer = {"channels": draw(st.integers(1, 4)), "kernel_size": draw(st.integers(1, 3))}
        padding = draw(st.sampled_from(PADDINGS))
        if padding == "VALID" and side - layer["kernel_size"] + 1 >= 1:
            layer["padding"] = padding
            side = side - layer["kernel_size"] + 1
        pool = draw(st.sampled_from(POOLS))
        if pool is not None and side >= 2:
            layer["pool"] = pool
            side //= 2
        conv.append(layer)
    model = {"architecture": "cnn", "conv": conv}
    if draw(st.booleans()):
        model["dense"] = [draw(st.integers(2, 8))]
    return model


def _resnet(draw, architecture: str) -> dict:
    """A one-or-two-channel residual net (the smallest of each shape), with or without BatchNorm."""
    norm = draw(st.sampled_from(literal_values(schema.ResnetSpec, "norm")))
    if architecture == "resnet":
        return {"architecture": "resnet", "width_multiplier": draw(st.sampled_from([1 / 64, 1 / 32])),
                "blocks": [1] * draw(st.integers(1, 2)), "norm": norm}
    return {"architecture": "wide_resnet", "depth": 10, "widen_factor": draw(st.sampled_from([1 / 16, 1 / 8])),
            "norm": norm}


ARCHITECTURE_BUILDERS = {"mlp": lambda draw, shape: _mlp(draw),
                         "cnn": lambda draw, shape: _cnn(draw, shape) if shape is not None else None,
                         "resnet": lambda draw, shape: _resnet(draw, "resnet") if shape is not None else None,
                         "wide_resnet": lambda draw, shape: _resnet(draw, "wide_resnet") if shape is not None else None}
"""Architecture → (draw, image shape or None) → its model fields, None where it does not apply (an MLP then)."""


def _model(draw, data: dict) -> dict:
    shape = image_shape(data)
    model = ARCHITECTURE_BUILDERS[draw(st.sampled_from(ARCHITECTURES))](draw, shape) or _mlp(draw)
    model["activation"] = draw(st.sampled_from(ACTIVATIONS))
    model["sigma"] = draw(st.sampled_from([0.5, 1.0, 1.5]))
    model["bias"] = draw(st.booleans())
    if "layer_variance" not in model:
        model["parameterization"] = draw(st.sampled_from(PARAMETERIZATIONS))
    if draw(st.integers(0, 3)) == 0:
        model["output_scale"] = draw(st.sampled_from([0.5, 2.0]))
    model["kind"] = draw(st.sampled_from(MODEL_KINDS))
    if model["kind"] == "ofe" and draw(st.booleans()):
        model["gamma"] = draw(st.sampled_from([0, 0.5]))
    elif model["kind"] in ("network", "linearized") and draw(st.integers(0, 3)) == 0:
        model["gamma"] = 0.5
    return model


# ------------------------------------------------------------------ train


def _train(draw, model: dict, data: dict) -> dict:
    kernel = model_kinds.MODEL_KINDS[model["kind"]].kernel
    name = "gd" if kernel else draw(st.sampled_from(OPTIMIZERS))
    optimizer = {"name": name, "lr": draw(st.sampled_from([0.01, 0.05, 0.1]))}
    if name == "sgd" and draw(st.booleans()):
        optimizer["momentum"] = 0.9
    if not kernel:
        optimizer["schedule"] = draw(st.sampled_from(SCHEDULES))
        if draw(st.integers(0, 3)) == 0:
            optimizer["lr_ratio"] = 2.0
    train = {"optimizer": optimizer, "loss": "mse" if kernel else draw(st.sampled_from(LOSSES))}
    if not kernel and draw(st.booleans()):
        train["batch_size"] = draw(st.integers(1, data["n_train"]))
    duration = "epochs" if model.get("origin") else draw(st.sampled_from(["steps", "epochs", "max_time"]))
    if duration == "steps":
        train["steps"] = draw(st.integers(1, MAX_STEPS))
    elif duration == "epochs":
        train["epochs"] = draw(st.integers(1, 3))
    else:
        train["max_time"] = round(optimizer["lr"] * draw(st.integers(1, MAX_STEPS)), 6)
    spacing = draw(st.sampled_from(SPACINGS))
    train["checkpoints"] = ({"spacing": "log", "per_decade": draw(st.integers(1, 4))} if spacing == "log"
                            else {"spacing": spacing, "count": draw(st.integers(1, 4))})
    if draw(st.integers(0, 3)) == 0:
        train["dtype"] = draw(st.sampled_from(DTYPES))
    return train


def _gradient_flow(spec: dict) -> None:
    """The setting of the deep-linear theories (``requirements._gradient_flow_checks`` and a linear
    net): whitened data, a bias-free linear network in the standard parameterization, full-batch GD
    at a constant rate on the MSE loss; drawn now and then, since independent draws rarely meet it all."""
    if "gamma" in SOURCE_RECORDS[spec["data"]["source"]].keys:
        spec["data"]["gamma"] = 0.0
    spec["model"].update(activation="linear", bias=False, kind="network")
    spec["model"].pop("gamma", None)
    spec["model"].pop("origin", None)
    if "layer_variance" not in spec["model"]:
        spec["model"]["parameterization"] = "standard"
    spec["train"]["optimizer"] = {"name": "gd", "lr": spec["train"]["optimizer"]["lr"]}
    spec["train"]["loss"] = "mse"
    spec["train"].pop("batch_size", None)


# ------------------------------------------------------------------ stages: built from what a run names


def _stage_for(role: str, draw, spec: dict) -> dict[str, dict]:
    """The stage that provides ``role`` to a run (the kind whose ``provides`` is the role), named as
    the run names it, with the stages it reads: name → stage spec."""
    kind = next(k for k in STAGES.values() if k.provides == role)
    return _stage(kind.compute, get_path(spec, (*REFERENCES[role], "stage")), draw)


STAGE_MODELS = {literal_values(m, "compute")[0]: m for m in models_in(schema.StageSpec)}


def _stage(compute: str, name: str, draw) -> dict[str, dict]:
    """Stage ``name`` of kind ``compute`` and, recursively, the stages it reads: a required string
    field names another stage, whose kind the registry's ``upstream`` says."""
    model = STAGE_MODELS[compute]
    stage: dict[str, Any] = {"compute": compute}
    refs = {f: f"{name}_{f}" for f, info in model.model_fields.items()
            if info.is_required() and info.annotation is str and f != "compute"}
    stages: dict[str, dict] = {}
    for _, (ref_name, ref_kind) in STAGES[compute].upstream(SimpleNamespace(**refs)).items():
        stages.update(_stage(ref_kind, ref_name, draw))
    stage.update(refs)
    if compute == "eigendecomposition" and draw(st.booleans()):
        stage["top_k"] = draw(st.integers(3, 6))
    if compute == "nad":
        stage.update(samples=draw(st.sampled_from([4, 8])), stein_samples=16, stein_vectors=draw(st.integers(1, 2)),
                     at=draw(st.sampled_from(literal_values(schema.NadStage, "at"))))
    stages[name] = stage
    return stages


def _stages(draw, spec: dict) -> dict:
    stages = {}
    for role, section in REFERENCES.items():
        if isinstance(get_path(spec, section), dict) and get_path(spec, (*section, "stage")):
            stages.update(_stage_for(role, draw, spec))
    return stages


def _origin(draw, model: dict) -> None:
    """A linearization around a pretrained network (a ``pretrain`` stage, the role ``origin``)."""
    if model["kind"] == "linearized" and draw(st.integers(0, 2)) == 0:
        model["origin"] = {"stage": "pretrained", "epochs": draw(st.integers(0, 1))}


# ------------------------------------------------------------------ sweeps


def _leaf_values(draw, axis: str, value: Any) -> list | None:
    """Two or three values of the leaf ``axis`` around ``value``, of its own type (None: leave it)."""
    if isinstance(value, bool):
        return [value, not value]
    if isinstance(value, str):
        choices = _literal_choices(AXES[axis])
        others = [c for c in choices if c != value]
        return [value, draw(st.sampled_from(others))] if others else None
    if isinstance(value, int):
        step = 2 if axis == "width" else 1
        return [value, value + step] if axis not in ("n_train", "n_test", "clusters", "dim") else None
    if isinstance(value, float):
        return [value, float(f"{value / 2:.6g}")] if value > 0 else [value, 0.5]
    return None


def _literal_choices(path: tuple[str, ...]) -> tuple:
    section = {"data": schema.DataSpec, "model": schema.ModelSpec, "train": schema.TrainSpec}.get(path[0])
    for model in models_in(section) if section else []:
        node = model
        for key in path[1:-1]:
            inner = models_in(node.model_fields[key].annotation) if key in node.model_fields else []
            node = inner[0] if inner else None
            if node is None:
                break
        if node is not None and path[-1] in node.model_fields:
            try:
                return literal_values(node, path[-1])
            except TypeError:
                return ()
    return ()


TRIES = 3
"""Draws of a sweep, or of the figures and summaries, before the study is rejected."""

SWEEP_SHAPES = ("none", "axis", "product", "zip", "union", "cases", "variants")


def _sweep(draw, spec: dict) -> tuple[dict, dict]:
    """A sweep over leaves the spec sets (axes from AXES): one of SWEEP_SHAPES. Returns (sweep, variants)."""
    options = {}
    for axis, path in AXES.items():
        value = get_path(spec, path)
        if value is not None and not isinstance(value, (list, dict)):
            values = _leaf_values(draw, axis, value)
            if values:
                options[axis] = values
    shape = draw(st.sampled_from(SWEEP_SHAPES))
    names = sorted(options)
    if shape == "none" or not names:
        return {}, {}
    a = draw(st.sampled_from(names))
    if shape == "axis":
        return {a: options[a]}, {}
    b = draw(st.sampled_from(names))
    if shape == "product" and b != a:
        return {a: options[a][:2], b: options[b][:2]}, {}
    if shape == "zip" and b != a:
        return {"zip": {a: options[a][:2], b: options[b][:2]}}, {}
    if shape == "union":
        other = [v for v in options[a] if v != options[a][0]]
        return {"union": [{a: options[a][:1]}, {a: other[:1], **({b: options[b][:2]} if b != a else {})}]}, {}
    if shape == "cases":
        path = AXES[b]
        override: dict = {}
        set_path(override, path, options[b][1])
        return {"cases": {"setting": {"base": {}, "changed": override}}}, {}
    return {}, {"wider": {"sweep": {a: options[a]}}}  # variants: the default has no sweep


def _scaling(draw, spec: dict) -> dict | None:
    """Hyperparameters as powers of d (solvable-model Sec. 3): the width and one or two scalar
    leaves the spec sets, each with a power in {-1, -0.5, 0, 0.5, 1}."""
    scalable = [a for a in ("output_scale", "lr", "sigma") if get_path(spec, AXES[a]) is not None]
    powers = {"width": 1.0, **{a: draw(st.sampled_from([-1.0, -0.5, 0.0, 0.5]))
                               for a in draw(st.lists(st.sampled_from(scalable), max_size=2, unique=True))}}
    return {"d": [1, 2], "reference": 1, "powers": powers}


# ------------------------------------------------------------------ measurements from the registry


def _option_value(draw, option, ceiling: int | None) -> Any:
    if option.kind is int:
        low = int(option.low) if option.low is not None else 0
        high = int(option.high) if option.high is not None else low + 4
        if ceiling is not None:
            high = min(high, ceiling)
        return draw(st.integers(low, max(low, high)))
    if option.kind is float:
        low = option.low if option.low is not None else 0.0
        high = option.high if option.high is not None else low + 1.0
        return draw(st.floats(low, high, exclude_min=option.open_low, exclude_max=option.open_high,
                              allow_nan=False, allow_infinity=False).map(lambda v: round(v, 4)).filter(
            lambda v: option.problem(v) is None))
    return option.default


def applicable(m: Measurement, runs: list[schema.RunSpec]) -> bool:
    """As the validator asks: every run meets it, or it is computed where applicable and one run does."""
    met = [m.unmet(run) is None for run in runs]
    return all(met) or (m.where_applicable and any(met))


def _measure(draw, runs: list[schema.RunSpec], must: set[str]) -> list:
    """Measurements the runs meet, with their ``depends_on`` closure and drawn options."""
    allowed = sorted(name for name, m in REGISTRY.items() if applicable(m, runs))
    chosen = set(draw(st.lists(st.sampled_from(allowed), max_size=6, unique=True))) | must
    while missing := {d for name in chosen for d in REGISTRY[name].depends_on} - chosen:
        chosen |= missing
    n_min = min(r.data.n_train for r in runs)
    items: list = []
    for name in sorted(chosen, key=list(REGISTRY).index):
        m = REGISTRY[name]
        options = {o.name: _option_value(draw, o, n_min) for o in m.options if draw(st.booleans())}
        items.append({"name": name, **options} if options else name)
    return items


# ------------------------------------------------------------------ figures and summaries from the variables


def _variables(measure: list) -> dict[str, Any]:
    names = [m if isinstance(m, str) else m["name"] for m in measure]
    return {v.name: v for n in names for v in REGISTRY[n].variables}


def _kind(v) -> str:
    return "series" if "time" in v.dims else "scalar" if not v.dims else "array"


def _fig_sweep(draw, variables, axes, numeric):
    ys = [v for v in variables.values() if _kind(v) in ("scalar", "series", "array")]
    if not ys:
        return None
    y = draw(st.sampled_from(ys))
    xs = [a for a in axes] + [d for d in y.dims if d != "time"]
    if not xs:
        return None
    fig = {"kind": "sweep", "x": draw(st.sampled_from(xs)), "y": y.name}
    hues = [a for a in axes if a != fig["x"]]
    if hues and draw(st.booleans()):
        fig["hue"] = draw(st.sampled_from(hues))
    return fig


def _fig_time_series(draw, variables, axes, numeric):
    series = [v.name for v in variables.values() if _kind(v) == "series"]
    if not series:
        return None
    fig = {"kind": "time_series", "variables": draw(st.lists(st.sampled_from(series), min_size=1, max_size=2,
                                                               unique=True))}
    if axes and draw(st.booleans()):
        fig["hue"] = draw(st.sampled_from(axes))
    if draw(st.booleans()):
        fig["overlay"] = True
    return fig


def _fig_scatter(draw, variables, axes, numeric):
    arrays = [v for v in variables.values() if _kind(v) == "array"]
    pairs = [(a.name, b.name) for a in arrays for b in arrays if a.name != b.name and a.dims == b.dims]
    if not pairs:
        return None
    x, y = draw(st.sampled_from(pairs))
    return {"kind": "scatter", "x": x, "y": [y]}


def _fig_images(draw, variables, axes, numeric):
    stacks = [v.name for v in variables.values() if len(v.dims) == 4 and "time" not in v.dims]
    if not stacks:
        return None
    return {"kind": "images", "variable": draw(st.sampled_from(stacks)), "count": draw(st.integers(1, 3)),
            "fourier": draw(st.booleans())}


def _fig_matrix(draw, variables, axes, numeric):
    matrices = [v.name for v in variables.values() if len([d for d in v.dims if d != "time"]) == 2]
    if not matrices:
        return None
    fig = {"kind": "matrix", "variable": draw(st.sampled_from(matrices))}
    theories = [v.name for v in variables.values() if v.theory_of == fig["variable"] and v.dims == variables[fig["variable"]].dims]
    if theories and draw(st.booleans()):
        fig["theory"] = draw(st.sampled_from(theories))
    return fig


def _fig_phases(draw, variables, axes, numeric):
    """None: a phases figure reads a measured_phase summary, which the generated summaries may lack
    (tests/test_plots.py and the phase_diagram study draw it)."""
    return None


FIGURE_BUILDERS = {"sweep": _fig_sweep, "time_series": _fig_time_series, "scatter": _fig_scatter,
                   "images": _fig_images, "matrix": _fig_matrix, "phases": _fig_phases}


def _figures(draw, measure: list, axes: list[str], numeric: list[str]) -> list[dict]:
    variables = _variables(measure)
    figures = []
    for i, kind in enumerate(sorted(FIGURE_KINDS)):  # each kind that has variables to draw, half the time
        fig = FIGURE_BUILDERS[kind](draw, variables, axes, numeric) if draw(st.booleans()) else None
        if fig is not None:
            figures.append({"name": f"{kind}_{i}", **fig, "title": f"figure {i}"})
    return figures


def _summaries(draw, measure: list, axes: list[str], numeric: list[str], has_scaling: bool) -> list[dict]:
    variables = _variables(measure)
    scalars = [v.name for v in variables.values() if _kind(v) == "scalar"]
    series = [v.name for v in variables.values() if _kind(v) == "series"]
    out = []
    for i, kind in enumerate(k for k in SUMMARY_KINDS if draw(st.integers(0, 2)) == 0):
        name = f"{kind}_{i}"
        if kind in ("power_law", "log_law") and scalars and numeric:
            out.append({"name": name, "kind": kind, "x": draw(st.sampled_from(numeric)), "y": draw(st.sampled_from(scalars))})
        elif kind == "endpoints" and series:
            out.append({"name": name, "kind": kind, "y": draw(st.sampled_from(series))})
        elif kind == "predicted_phase" and has_scaling:
            out.append({"name": name, "kind": kind})
        elif kind == "measured_phase" and has_scaling and scalars and "loss" in variables:
            fit = {"name": f"{name}_fit", "kind": "power_law", "x": "d", "y": draw(st.sampled_from(scalars))}
            out += [fit, {"name": name, "kind": kind, "x": "d", "y": fit["y"], "exponent": fit["name"]}]
    return out


def _claim_number(draw, variables, study, time: bool = False):
    """A quantity of one number: a scalar or series variable (a time, with ``time``), seeds and axes reduced."""
    names = [v.name for v in variables.values() if _kind(v) in ("scalar", "series")
             and (not time or v.units == TIME_UNITS)]
    if not names:
        return None
    q = {"variable": draw(st.sampled_from(names))}
    if study.axes and draw(st.booleans()):
        q["reduce"] = {draw(st.sampled_from(study.axes)): draw(st.sampled_from(["mean", "median", "min", "max"]))}
    return q


def _claim_along(draw, variables, study, numeric: bool):
    """A quantity read along a sweep axis (numeric: with more than one number)."""
    axes = [a for a in study.axes if len({p[a] for p in study.points}) > 1 and (
        not numeric or all(isinstance(p[a], (int, float)) and not isinstance(p[a], bool) for p in study.points))]
    q = _claim_number(draw, variables, study)
    if not axes or q is None:
        return None
    along = draw(st.sampled_from(axes))
    q.get("reduce", {}).pop(along, None)
    return along, q


def _claim_bound(kind: str):
    def build(draw, variables, study):
        q = _claim_number(draw, variables, study)
        if q is None:
            return None
        than = draw(st.floats(-10, 10)) if draw(st.booleans()) else {"variable": q["variable"]}
        return q, {"kind": kind, "than": than}
    return build


def _claim_approx(draw, variables, study):
    q = _claim_number(draw, variables, study)
    return None if q is None else (q, {"kind": "approx", "value": draw(st.floats(-10, 10))})


def _claim_before(draw, variables, study):
    q, later = _claim_number(draw, variables, study, time=True), _claim_number(draw, variables, study, time=True)
    return None if q is None or later is None else (q, {"kind": "before", "than": later,
                                                        "factor": draw(st.sampled_from([1, 2.5]))})


def _claim_monotone(draw, variables, study):
    found = _claim_along(draw, variables, study, numeric=True)
    return None if found is None else (found[1], {"kind": "monotone", "along": found[0],
                                                  "direction": draw(st.sampled_from(["increasing", "decreasing"]))})


def _claim_spearman(draw, variables, study):
    found = _claim_along(draw, variables, study, numeric=True)
    return None if found is None else (found[1], {"kind": "spearman", "along": found[0],
                                                  "sign": draw(st.sampled_from(["positive", "negative"]))})


def _claim_ordering(draw, variables, study):
    found = _claim_along(draw, variables, study, numeric=False)
    if found is None:
        return None
    values = list(dict.fromkeys(p[found[0]] for p in study.points))
    return found[1], {"kind": "ordering", "along": found[0], "order": draw(st.permutations(values))}


CLAIM_BUILDERS = {"approx": _claim_approx, "less": _claim_bound("less"), "greater": _claim_bound("greater"),
                  "before": _claim_before, "monotone": _claim_monotone, "spearman": _claim_spearman,
                  "ordering": _claim_ordering}
"""Relation kind → a builder of (quantity, relation) from the study's variables, or None if it has none to claim."""


def _claims(draw, measure: list, study: Study, figures: list[str], variants: list[str]) -> list[dict]:
    """A claim of each relation kind that the study's variables allow, half the time, naming some of the
    study's ``figures`` (claims[].figures) and, when it has ``variants``, sometimes the variants it is judged in."""
    variables = _variables(measure)
    out = []
    for kind in sorted(CLAIM_BUILDERS):
        found = CLAIM_BUILDERS[kind](draw, variables, study) if draw(st.booleans()) else None
        if found is None:
            continue
        claim = {"name": f"{kind}_claim", "source": "generated Fig. 1", "statement": f"a generated {kind} claim",
                 "regime": "any", "quantity": found[0], "relation": found[1]}
        if kind in ("approx", "less", "greater") or (kind == "monotone" and draw(st.booleans())):
            claim["tolerance"] = {"value": draw(st.floats(0, 1)), "relative": draw(st.booleans()),
                                  "reason": "generated"}
        if figures and draw(st.booleans()):
            claim["figures"] = draw(st.lists(st.sampled_from(figures), min_size=1, max_size=2, unique=True))
        if variants and draw(st.booleans()):  # the default variant, which the tests run (a selection of the
            claim["variants"] = ["default"]   # default's sweep values may not exist in another variant)
        out.append(claim)
    return out


# ------------------------------------------------------------------ the study


def semantically_sound(study: Study) -> bool:
    """Checks of a sound study that the validator does not make yet (a filter: a stricter validator
    later rejects these itself). Every figure and summary must have something to draw, and every
    option that counts training points must fit the smallest n_train."""
    n_min = min(r.data.n_train for r in study.runs)
    for run in study.runs:
        for item in run.measure:
            opts = item.options
            if "subset" in opts and opts["subset"] > n_min:
                return False
            if "top_k" in opts and opts["top_k"] > (opts.get("subset") or n_min) * output_count(run.data):
                return False
    return True


def _runs(spec: dict, directory: Path, name: str) -> Study | None:
    path = directory / f"{name}.yaml"
    path.write_text(yaml_text(spec))
    try:
        return load_study(path)
    except SpecError:
        return None


def _sections(draw, name: str, data_dirs: dict[str, str]) -> tuple[dict[str, Any], set[str]]:
    """The data, model, train and stage sections of a study, its measure list holding only what a
    model kind must measure (and the loss); with that set."""
    data = _data(draw, data_dirs)
    model = _model(draw, data)
    _origin(draw, model)
    train = _train(draw, model, data)
    spec: dict[str, Any] = {"description": f"generated study {name}", "seed": draw(st.integers(0, 2)),
                            "data": data, "model": model, "train": train}
    if draw(st.integers(0, 3)) == 0:
        _gradient_flow(spec)
    spec["stages"] = _stages(draw, spec)
    if not spec["stages"]:
        del spec["stages"]
    reference = model_kinds.MODEL_KINDS[model["kind"]].reference
    must = {reference} if reference else set()
    spec["measure"] = ["loss", *sorted(must)]
    return spec, must


@st.composite
def valid_studies(draw, directory: Path, data_dirs: dict[str, str] | None = None, name: str = "gen") -> DrawnStudy:
    """A valid study named ``name`` (written into ``directory`` while drawing): its sections drawn
    from the schema, its measurements from the registry, figures and summaries from their variables."""
    for _ in range(TRIES):  # sections the validator refuses together (a rare mix): draw again
        spec, must = _sections(draw, name, data_dirs or {})
        base = _runs(spec, directory, name)
        if base is not None:
            break
    assume(base is not None)
    for _ in range(TRIES):  # a sweep value the runs cannot take (e.g. a depth its init does not allow): draw again
        sweep, variants = _sweep(draw, spec)
        study = _runs({**spec, "sweep": sweep, "variants": variants}, directory, name)
        if study is not None:
            break
    else:
        sweep, variants, study = {}, {}, base
    if sweep:
        spec["sweep"] = sweep
    if variants:
        spec["variants"] = variants
    if "width" in spec["model"] and draw(st.integers(0, 3)) == 0:
        scaling = _scaling(draw, spec)
        scaled = _runs({**spec, "scaling": scaling}, directory, name)
        if scaled is not None:
            spec["scaling"], study = scaling, scaled
    spec["measure"] = _measure(draw, study.runs, must | {"loss"})
    axes = study.axes
    has_scaling = "scaling" in spec
    numeric = [a for a in axes if all(isinstance(p[a], (int, float)) and not isinstance(p[a], bool)
                                      for p in study.points) and len({p[a] for p in study.points}) > 1]
    swept = study
    for _ in range(TRIES):
        figures = _figures(draw, spec["measure"], axes, numeric)
        extra = {"summaries": _summaries(draw, spec["measure"], axes, numeric, has_scaling), "figures": figures,
                 "claims": _claims(draw, spec["measure"], swept, [f["name"] for f in figures], list(variants))}
        extra = {k: v for k, v in extra.items() if v}
        study = _runs({**spec, **extra}, directory, name)
        if study is not None and semantically_sound(study):
            spec.update(extra)
            break
    else:
        study = _runs(spec, directory, name)
        assume(study is not None and semantically_sound(study))
    names = [m if isinstance(m, str) else m["name"] for m in spec["measure"]]
    return DrawnStudy(name, copy.deepcopy(spec), names)
