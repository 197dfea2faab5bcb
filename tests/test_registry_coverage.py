"""Every registered thing of the study language is computed by a test through the pipeline.

A test that runs a study through the train job (or Snakemake) and checks what a registered thing
computed says so with ``@pytest.mark.computes("weight_norm", "init:mirrored")``: measurements by their
registry name, everything else as ``category:name`` (the categories are :func:`registered`'s). The
marks are read statically from every ``tests/*.py`` (ast), so the check does not depend on which tests
were selected; the registered things are read from the language's own registries and pydantic models,
so a newly registered measurement, stage, model kind, data source, … fails here until a test computes it.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from ntkpipe.claims.relations import RELATIONS
from ntkpipe.lang.schema import (
    ARCHITECTURE_SPECS,
    MODEL_KINDS,
    DataSpec,
    FigureSpec,
    MlpSpec,
    ModelBase,
    OptimizerSpec,
    TrainSpec,
)
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.models import ACTIVATIONS, ARCHITECTURES
from ntkpipe.plots import PLOTTERS
from ntkpipe.stages import STAGES
from ntkpipe.summaries import SUMMARY_KINDS
from ntkpipe.train.losses import LOSSES

TESTS = Path(__file__).resolve().parent
MARK = "computes"


def _literal(model, field: str) -> set[str]:
    """The values of a pydantic model's ``Literal`` field."""
    return set(typing.get_args(model.model_fields[field].annotation))


def registered() -> dict[str, set[str]]:
    """Category → registered names; measurements have the category "" (marked by bare name)."""
    figure_models = typing.get_args(typing.get_args(FigureSpec)[0])
    return {
        "": set(REGISTRY),
        "stage": set(STAGES),
        "model_kind": set(MODEL_KINDS) | _literal(ModelBase, "kind"),
        "architecture": set(ARCHITECTURES) | set(ARCHITECTURE_SPECS),
        "source": _literal(DataSpec, "source"),
        "activation": set(ACTIVATIONS) | _literal(ModelBase, "activation"),
        "parameterization": _literal(ModelBase, "parameterization"),
        "init": _literal(MlpSpec, "init"),
        "optimizer": _literal(OptimizerSpec, "name"),
        "loss": set(LOSSES) | _literal(TrainSpec, "loss"),
        "summary": set(SUMMARY_KINDS),
        "relation": set(RELATIONS),
        "figure": set(PLOTTERS).union(*(_literal(model, "kind") for model in figure_models)),
    }


def registered_names() -> set[str]:
    """Every registered thing as it is marked: ``name`` for measurements, else ``category:name``."""
    return {f"{category}:{name}" if category else name for category, names in registered().items() for name in names}


def _is_computes_mark(node: ast.AST) -> bool:
    """``pytest.mark.computes(...)`` or ``mark.computes(...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == MARK):
        return False
    owner = node.func.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (isinstance(owner, ast.Name) and owner.id == "mark")


def _mark_names(call: ast.Call, where: str) -> list[tuple[str, str]]:
    if call.keywords or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args):
        raise ValueError(f"{where}: @pytest.mark.{MARK} takes string literals only (read statically)")
    if not call.args:
        raise ValueError(f"{where}: @pytest.mark.{MARK} names nothing")
    return [(a.value, where) for a in call.args]


def marks_in(source: str, filename: str) -> list[tuple[str, str]]:
    """(name, "file:line test") of every ``computes`` mark in a test module: on ``test_*`` functions
    and ``Test*`` classes (decorators) and in a module-level ``pytestmark`` (one mark or a list)."""
    found = []
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                if _is_computes_mark(decorator):
                    if not node.name.lower().startswith("test"):
                        raise ValueError(f"{filename}:{node.lineno}: @pytest.mark.{MARK} on {node.name}, "
                                         "which is not a test")
                    found += _mark_names(decorator, f"{filename}:{node.lineno} {node.name}")
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            for value in values:
                if _is_computes_mark(value):
                    found += _mark_names(value, f"{filename}:{node.lineno} pytestmark")
    return found


def collected_marks() -> dict[str, list[str]]:
    """Marked name → the tests that mark it, over every test module."""
    marks: dict[str, list[str]] = {}
    for path in sorted(TESTS.glob("*.py")):
        for name, where in marks_in(path.read_text(), path.name):
            marks.setdefault(name, []).append(where)
    return marks


def unmarked() -> list[str]:
    """Registered things that no test marks."""
    return sorted(registered_names() - set(collected_marks()))


def test_every_registered_thing_is_computed_by_a_test():
    missing = unmarked()
    assert not missing, (
        f"no test computes these registered things through the pipeline: {', '.join(missing)}. Add a test that "
        f"runs a tiny study using each (tests/conftest.py: run_study_jobs) and checks its values against numpy "
        f"or theory, and mark it @pytest.mark.{MARK}(...)")


def test_marks_name_registered_things():
    unknown = {name: where for name, where in collected_marks().items() if name not in registered_names()}
    assert not unknown, (f"@pytest.mark.{MARK} names things that are not registered (measurements by name, "
                         f"others as category:name, categories {sorted(c for c in registered() if c)}): {unknown}")


def test_registered_reads_the_languages_registries():
    """A spot check that each category reads its registry, not a hand list."""
    names = registered_names()
    assert {"weight_norm", "gamma_hat", "stage:nad", "model_kind:ofe_fit", "architecture:cnn", "source:nad",
            "activation:gelu", "parameterization:ntk", "init:mirrored", "optimizer:adam", "loss:bce",
            "summary:measured_phase", "figure:matrix"} <= names
    assert len([n for n in names if ":" not in n]) == len(REGISTRY)


def test_a_newly_registered_measurement_is_reported_until_a_test_computes_it(monkeypatch):
    monkeypatch.setitem(REGISTRY, "brand_new_measurement", REGISTRY["loss"])
    assert unmarked() == ["brand_new_measurement"]


def test_marks_are_read_from_decorators_classes_and_pytestmark():
    source = '''
import pytest
from pytest import mark
pytestmark = [pytest.mark.workflow, pytest.mark.computes("stage:nad")]

@pytest.mark.parametrize("x", [1])
@pytest.mark.computes("loss", "init:mirrored")
def test_a(x):
    pass

@mark.computes("figure:sweep")
class TestB:
    @pytest.mark.computes("alignment")
    def test_c(self):
        pass

def test_unmarked():
    pytest.mark.computes("not_a_mark")  # a call in a body is not a mark
'''
    assert sorted(name for name, _ in marks_in(source, "t.py")) == [
        "alignment", "figure:sweep", "init:mirrored", "loss", "stage:nad"]
    with pytest.raises(ValueError, match="string literals"):
        marks_in("import pytest\nNAMES = ('loss',)\n@pytest.mark.computes(*NAMES)\ndef test_x(): pass\n", "t.py")
    with pytest.raises(ValueError, match="not a test"):
        marks_in("import pytest\n@pytest.mark.computes('loss')\ndef helper(): pass\n", "t.py")
