"""The language reference (docs/language.md, ``ntkpipe explain``): every field of the language is
described, the committed reference is the generated one, and the reference and ``explain`` cover every
key a spec may write, counted from the models and the registries independently of the generator."""

from __future__ import annotations

import typing

import pytest
import xarray as xr
from PIL import Image

from ntkpipe.cli import main
from ntkpipe.data.sources import SOURCES
from ntkpipe.lang import sweep
from ntkpipe.lang.axes import models_in
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import (
    ARCHITECTURE_SPECS,
    FIGURE_KINDS,
    DataSpec,
    ModelSpec,
    ScalingSpec,
    StageSpec,
    StudySpec,
    TrainSpec,
)
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.study.reference import REFERENCE_PATH, SECTIONS, entries, explain, first_uses, markdown, resolve
from ntkpipe.study.reference_examples import (
    EXAMPLE_WIDTH,
    figure_example,
    summary_example,
    summary_table,
    table_markdown,
)
from ntkpipe.summaries import SUMMARY_KINDS
from tests.conftest import REPO


def nested_models(annotation) -> list[type]:
    """The models an annotation holds, through Optional, unions, lists and mappings."""
    found = list(models_in(annotation))
    for arg in typing.get_args(annotation):
        found += [m for m in nested_models(arg) if m not in found]
    return found


def walk(prefix: str, annotation, keys: dict[str, object], fields: list) -> None:
    for model in nested_models(annotation):
        for name, field in model.model_fields.items():
            keys[f"{prefix}.{name}"] = model
            fields.append((model, name, field))
            walk(f"{prefix}.{name}", field.annotation, keys, fields)


def language() -> tuple[dict[str, object], list]:
    """Every key a spec may write (dotted, as the reference names them) and every model field."""
    keys: dict[str, object] = dict.fromkeys(StudySpec.model_fields, StudySpec)
    fields = [(StudySpec, name, f) for name, f in StudySpec.model_fields.items()]
    for section, annotation in (("data", DataSpec), ("model", ModelSpec), ("train", TrainSpec),
                                ("scaling", ScalingSpec)):
        walk(section, annotation, keys, fields)
    for model in nested_models(StageSpec):
        compute = typing.get_args(model.model_fields["compute"].annotation)[0]
        keys[f"stages.{compute}"] = model
        walk(f"stages.{compute}", model, keys, fields)
    for kind, model in FIGURE_KINDS.items():
        keys[f"figures.{kind}"] = model
        walk(f"figures.{kind}", model, keys, fields)
    for kind, record in SUMMARY_KINDS.items():
        keys[f"summaries.{kind}"] = record.options
        walk(f"summaries.{kind}", record.options, keys, fields)
    for m in REGISTRY.values():
        keys[f"measure.{m.name}"] = m
        keys.update({f"measure.{m.name}.{o.name}": o for o in m.options})
    keys.update({f"data.source.{name}": s for name, s in SOURCES.items()})
    keys.update({f"model.architecture.{name}": a for name, a in ARCHITECTURE_SPECS.items()})
    keys.update({f"model.kind.{name}": k for name, k in MODEL_KINDS.items()})
    keys.update({f"sweep.{form}": sweep for form in (*sweep.SPECIAL, *sweep.GENERATORS)})
    return keys, fields


def test_every_field_and_record_is_described():
    """A one-line meaning for every field of every model reachable from the study, every measurement, its
    options and variables, every source, architecture and model kind: not empty, not the name restated."""
    keys, fields = language()
    missing = [f"{model.__name__}.{name}" for model, name, field in fields
               if not field.description or field.description.strip().lower() in (name, name.replace("_", " "))]
    missing += [f"measurement {m.name}" for m in REGISTRY.values() if len(m.doc) < 20]
    missing += [f"option {m.name}.{o.name}" for m in REGISTRY.values() for o in m.options if len(o.doc) < 10]
    missing += [f"variable {v.name}" for m in REGISTRY.values() for v in m.variables if not v.label]
    missing += [f"source {name}" for name, s in SOURCES.items() if not s.options.__doc__]
    missing += [f"model kind {name}" for name, k in MODEL_KINDS.items() if not k.doc]
    missing += [f"{model.__name__}" for model in [*FIGURE_KINDS.values(), *ARCHITECTURE_SPECS.values(),
                                                    *nested_models(StageSpec)] if not model.__doc__]
    assert not missing, f"no description: {missing}; give each field a docstring (the string below it)"


def test_the_committed_reference_is_the_generated_one():
    committed = (REPO / REFERENCE_PATH).read_text(encoding="utf-8")
    assert committed == markdown(), f"{REFERENCE_PATH} is out of date; regenerate it: ntkpipe reference"


def test_the_reference_and_explain_cover_every_key():
    keys, _ = language()
    assert set(SECTIONS) == set(StudySpec.model_fields)
    text = (REPO / REFERENCE_PATH).read_text(encoding="utf-8")
    known = entries()
    in_reference = [k for k in keys if k in known and f"# `{k}`\n" in text]
    explained = [k for k in keys if resolve(k) == [k] and explain(k).startswith(f"{k}  (")]
    assert len(keys) > 250
    assert len(in_reference) == len(keys), f"not in {REFERENCE_PATH}: {sorted(set(keys) - set(in_reference))}"
    assert len(explained) == len(keys), f"not explained: {sorted(set(keys) - set(explained))}"
    for key in keys:
        entry = known[key]
        assert entry.meaning.strip() and entry.example.strip(), key
    for key in (k for k, e in known.items() if e.what.startswith("key")):
        assert known[key].type, key


@pytest.mark.parametrize(("typed", "shown"), [
    ("train.optimizer.lr", "train.optimizer.lr"), ("train.lr", "train.optimizer.lr"), ("lr", "train.optimizer.lr"),
    ("measure.energy_concentration", "measure.energy_concentration"), ("data.source", "data.source"),
    ("data.mnist", "data.source.mnist"), ("figures.sweep", "figures.sweep"), ("figures.0.x", "figures.sweep.x"),
    ("energy_concentration.subset", "measure.energy_concentration.subset"), ("model.ofe", "model.kind.ofe"),
    ("sweep.zip", "sweep.zip"), ("sigma", "model.sigma"), ("summaries.power_law", "summaries.power_law"),
    ("sweep.zip.width", "model.width"), ("variants.paper.train.lr", "train.optimizer.lr"), ("variants.paper", "variants"),
    ("figures[0].variables", "figures.time_series.variables"), ("Train.Optimizer.LR", "train.optimizer.lr")])
def test_explain_takes_what_a_user_types(typed, shown, capsys):
    assert main(["explain", typed]) == 0
    out = capsys.readouterr().out
    assert f"{shown}  (" in out
    assert "example:" in out


def test_explain_prints_type_default_units_and_paper(capsys):
    assert main(["explain", "train.max_time", "measure.energy_concentration"]) == 0
    out = capsys.readouterr().out
    assert "type: number > 0 or null" in out and "default: null" in out
    assert "units: gradient-flow time t = η₀·step" in out
    assert "source: linearized-networks Sec. 4.2, Table 1 (docs/papers.md §5)" in out
    assert "stores energy_concentration(time)" in out


def test_an_unknown_key_is_a_clear_error(capsys):
    assert main(["explain", "train.optimizer.lrr"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert "unknown key 'train.optimizer.lrr'; did you mean train.optimizer.lr" in captured.err


def test_every_figure_and_summary_kind_shows_an_example_from_a_shipped_study():
    text = (REPO / REFERENCE_PATH).read_text(encoding="utf-8")
    uses = first_uses()
    assert sorted(uses["figures"]) == sorted(FIGURE_KINDS) and sorted(uses["summaries"]) == sorted(SUMMARY_KINDS)
    for kind, (_, where) in uses["figures"].items():
        path = REPO / figure_example(kind)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: regenerate: ntkpipe reference --examples RESULTS"
        with Image.open(path) as image:
            assert image.width == EXAMPLE_WIDTH and where in image.text["Comment"]
        assert f"](examples/figures/{kind}.png)" in text
    for kind, (item, where) in uses["summaries"].items():
        table = (REPO / summary_example(kind)).read_text(encoding="utf-8")
        assert table.startswith(f"From `{where}`, summary `{item['name']}`") and table.rstrip() in text


def test_an_example_table_has_a_row_per_group_or_run():
    runs = xr.Dataset({"fit": ("run", [1.0, 1.0, 2.0]), "fit_stderr": ("run", [0.1, 0.1, 0.2]),
                       "other": ("run", [5.0, 6.0, 7.0])},
                      coords={"depth": ("run", [2, 2, 3]), "sigma": ("run", [0.1, 0.2, 0.1])})
    runs = runs.set_index(run=["depth", "sigma"])
    grouped = summary_table(runs, "fit", ["depth"])
    assert grouped.to_dict("list") == {"depth": [2, 3], "fit": [1.0, 2.0], "fit_stderr": [0.1, 0.2]}
    per_run = summary_table(runs.rename({"fit": "table"}).drop_vars("fit_stderr"), "table", [])
    assert per_run.to_dict("list") == {"depth": [2, 2, 3], "sigma": [0.1, 0.2, 0.1], "table": [1.0, 1.0, 2.0]}
    whole = summary_table(xr.Dataset({"slope": 3.0, "slope_stderr": 0.5}), "slope", [])
    assert whole.to_dict("list") == {"slope": [3.0], "slope_stderr": [0.5]}
    text = table_markdown(grouped, "`specs/x.yaml`", "note")
    assert text.splitlines()[0] == "From `specs/x.yaml` (2 rows; note):" and "| 3 | 2 | 0.2 |" in text
