"""Generated invalid studies: one mutation of a generated valid study (``tests/strategies.py``) --
a wrong type, an out-of-range value, an unknown key, a cross-field conflict or an impossible size
-- is stopped by ``ntkpipe validate`` with exit status 1, no traceback, nothing on stdout, and a
problem line ``  - line N: key.path: message`` naming the file, the line and the key it broke."""

from __future__ import annotations

import contextlib
import copy
import io
import tempfile
from pathlib import Path

import annotated_types
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from ntkpipe.cli import main
from ntkpipe.data.sources import SOURCES
from ntkpipe.lang import schema
from ntkpipe.lang.axes import models_in
from ntkpipe.lang.yaml_lines import load_with_lines
from tests.strategies import valid_studies, yaml_text

SECTIONS = {"data": schema.DataSpec, "train": schema.TrainSpec}


def section_model(spec: dict, path: tuple[str, ...]) -> type | None:
    """The pydantic model of the mapping at ``path`` (``("model",)``, ``("train", "optimizer")``)."""
    model = (schema.ARCHITECTURE_SPECS[spec["model"].get("architecture", "mlp")] if path[0] == "model"
             else SECTIONS.get(path[0]))
    for key in path[1:]:
        inner = models_in(model.model_fields[key].annotation) if model and key in model.model_fields else []
        model = inner[0] if inner else None
    return model


def leaves(spec: dict) -> list[tuple[str, ...]]:
    """Key paths of the scalar leaves of the data, model and train sections."""
    out = []

    def walk(node, path):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, (*path, key))
            elif isinstance(value, (bool, int, float, str)):
                out.append((*path, key))
    for section in ("data", "model", "train"):
        walk(spec[section], (section,))
    return out


def _set(spec: dict, path: tuple, value) -> None:
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _field(spec: dict, path: tuple):
    model = section_model(spec, path[:-1])
    return model.model_fields.get(path[-1]) if model is not None else None


def wrong_type(value):
    """A value of another type that strict validation does not coerce."""
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "a number"
    return 7


def out_of_range(info) -> object | None:
    """A value just outside the first bound of a field (None if it has none)."""
    for bound in info.metadata:
        if isinstance(bound, annotated_types.Ge):
            return bound.ge - 1
        if isinstance(bound, annotated_types.Gt):
            return bound.gt
        if isinstance(bound, annotated_types.Le):
            return bound.le + 1
        if isinstance(bound, annotated_types.Lt):
            return bound.lt
    return None


@st.composite
def mutations(draw, spec: dict) -> tuple[dict, tuple[str, ...], str]:
    """(mutated spec, the key path it breaks, what kind of mistake)."""
    spec = copy.deepcopy(spec)
    kind = draw(st.sampled_from(["wrong_type", "out_of_range", "unknown_key", "cross_field", "impossible_size"]))
    paths = leaves(spec)
    if kind == "wrong_type":
        path = draw(st.sampled_from([p for p in paths if _field(spec, p) is not None]))
        _set(spec, path, wrong_type(_get(spec, path)))
        return spec, path, kind
    if kind == "out_of_range":
        ranged = [(p, v) for p in paths if (f := _field(spec, p)) is not None and (v := out_of_range(f)) is not None]
        if ranged:
            path, value = draw(st.sampled_from(ranged))
            _set(spec, path, value)
            return spec, path, kind
        kind = "unknown_key"
    if kind == "unknown_key":
        sections = [("data",), ("model",), ("train",), ("train", "optimizer")]
        section = draw(st.sampled_from(sections))
        key = draw(st.sampled_from(["widht", "sigmma", "learning_rate", "n-train"]))
        _get(spec, section)[key] = 1
        return spec, (*section, key), kind
    if kind == "cross_field":
        conflicts = [c for c in CONFLICTS if c[0](spec)]
        apply, path = draw(st.sampled_from(conflicts))[1:]
        apply(spec)
        return spec, path, kind
    # impossible size: more training points per batch than there are, or a class count that cannot be balanced
    spec["train"]["batch_size"] = spec["data"]["n_train"] + draw(st.integers(1, 5))
    if _swept(spec.get("sweep", {}), {"batch_size", "n_train"}):  # the base value would be set anew in every run
        for key in ("sweep", "figures", "summaries", "claims"):  # (and these may name the sweep's axes)
            spec.pop(key, None)
    return spec, ("train", "batch_size"), kind


def _swept(node, keys: set[str]) -> bool:
    """Whether any of ``keys`` is an axis anywhere in a sweep (also inside union, zip, product or cases)."""
    if isinstance(node, dict):
        return any(k in keys or _swept(v, keys) for k, v in node.items())
    return isinstance(node, list) and any(_swept(v, keys) for v in node)


def _get(spec: dict, path: tuple):
    node = spec
    for key in path:
        node = node[key]
    return node


def _two_durations(spec):
    present = next(k for k in ("steps", "epochs", "max_time") if k in spec["train"])
    other = next(k for k in ("steps", "epochs") if k != present)
    spec["train"][other] = 2


CONFLICTS = [
    # (applies to, mutate, key path the report names)
    (lambda s: "dim" not in SOURCES[s["data"]["source"]].keys, lambda s: s["data"].update(dim=3), ("data", "dim")),
    (lambda s: "image_size" not in SOURCES[s["data"]["source"]].keys, lambda s: s["data"].update(image_size=4),
     ("data", "image_size")),
    (lambda s: s["train"]["optimizer"]["name"] != "sgd", lambda s: s["train"]["optimizer"].update(momentum=0.5),
     ("train", "optimizer", "momentum")),
    (lambda s: True, _two_durations, ("train",)),
]


@settings(max_examples=4 * settings().max_examples)  # no training: fast (ci: 200 examples)
@given(data=st.data())
def test_a_mutated_valid_study_is_stopped_with_file_line_and_key(data, tmp_path_factory):
    directory = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    drawn = data.draw(valid_studies(directory, name="gen"), label="valid study")
    spec, path, kind = data.draw(mutations(drawn.spec), label="mutation")
    target = directory / "mutated.yaml"
    target.write_text(yaml_text(spec))
    note(target.read_text())
    event(kind)
    _, lines = load_with_lines(target)
    line = lines.get(path) or lines.get(path[:-1])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["validate", str(target)])
    err = err.getvalue()
    assert status == 1, f"{kind} at {'.'.join(path)} was accepted"
    assert out.getvalue() == "" and "Traceback" not in err
    assert err.startswith(f"{target}: ") or f"{target}: " in err
    dotted = ".".join(path)
    assert f"  - line {line}: {dotted}" in err, f"{kind}: expected line {line}: {dotted}:\n{err}"
    assert not (directory / "results").exists()

