"""The registries are built from records: measurements from the subject modules, figure kinds from
the figure classes, stage kinds from the stage modules. Each record is complete, names are unique,
and a record's adapter computes what its math function gives on the same arrays."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from ntkpipe.lang.schema import FIGURE_KINDS, FigureSpec, MeasureItem
from ntkpipe.measure import registry
from ntkpipe.measure.layers import layer_alignment
from ntkpipe.measure.record import Measurement, Variable
from ntkpipe.models import MLP
from ntkpipe.plots import PLOTTERS
from ntkpipe.registries import collect_kinds
from ntkpipe.stages import STAGES
from ntkpipe.stages import registry as stage_registry
from ntkpipe.theory import two_layer


def _record(name: str, variable: str) -> Measurement:
    return Measurement(name, "final", "x", (Variable(variable, variable),), lambda run, traj, item: {variable: 0.0})


def test_every_measurement_record_stores_exactly_its_variables_once():
    """Each subject module's records are in the registry; no measurement or variable name repeats."""
    names = [m.name for subject in registry.SUBJECTS for m in subject.MEASUREMENTS]
    assert names == list(registry.REGISTRY)
    variables = [v.name for m in registry.MEASUREMENTS for v in m.variables]
    assert len(variables) == len(set(variables)) == len(registry.VARIABLES)
    assert all(m.doc and m.variables and callable(m.compute) for m in registry.MEASUREMENTS)


@pytest.mark.parametrize("second, message", [(("a", "w"), "measurement names registered twice: a"),
                                             (("b", "v"), "variable names registered twice: v")])
def test_a_name_registered_twice_is_an_error(second, message):
    subjects = (SimpleNamespace(MEASUREMENTS=[_record("a", "v")]), SimpleNamespace(MEASUREMENTS=[_record(*second)]))
    with pytest.raises(ValueError, match=message):
        registry._collect(subjects)


def test_teacher_overlaps_record_matches_its_formula():
    """q = ½(|a|² + |Wβ|²), r = aᵀWβ from the record's adapter equal the numpy formula on the weights."""
    model = MLP(5, 7, 2, 1, activation="linear", key=jax.random.PRNGKey(3))
    beta = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 1)))[0][:, 0]
    view = SimpleNamespace(model=model, run=SimpleNamespace(teacher=(beta, 1.0)))
    out = registry.REGISTRY["teacher_overlaps"].compute(view, MeasureItem(name="teacher_overlaps"))
    w, a = np.asarray(model.weights[0], np.float64), np.asarray(model.weights[1], np.float64)[0]
    assert out["q"] == pytest.approx(0.5 * (np.sum(a**2) + np.sum((w @ beta) ** 2)), rel=1e-12)
    assert out["r"] == pytest.approx(float(a @ w @ beta), rel=1e-12)
    assert (out["q"], out["r"]) == two_layer.initial_overlaps(model, beta)


def test_layer_alignment_of_a_planted_pair():
    """u ∥ W n gives cos θ = 1 with |u|, |w| the norms; u ⊥ W n gives 0."""
    n = np.array([0.6, 0.8])
    w = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])  # W n = (0.6, 1.6, 0)
    cos, u_norm, w_norm = layer_alignment(w, 2.0 * (w @ n), n)
    assert (cos, u_norm, w_norm) == pytest.approx((1.0, 2.0 * np.hypot(0.6, 1.6), np.hypot(0.6, 1.6)))
    assert layer_alignment(w, np.array([0.0, 0.0, 1.0]), n)[0] == pytest.approx(0.0)


def test_every_figure_kind_is_one_complete_record():
    """The discriminated union, FIGURE_KINDS and PLOTTERS name the same kinds, and each class plots
    and checks itself."""
    from typing import get_args

    assert set(FIGURE_KINDS) == set(PLOTTERS) == {m.model_fields["kind"].annotation.__args__[0]
                                                  for m in get_args(get_args(FigureSpec)[0])}
    for kind, model in FIGURE_KINDS.items():
        assert callable(PLOTTERS[kind]) and PLOTTERS[kind].__module__ == model.plotter.split(":")[0]
        assert callable(model.plotted) and callable(model.problems)


def test_stage_kinds_are_collected_from_the_stage_modules():
    assert list(STAGES) == ["ntk_gram", "eigendecomposition", "nad", "pretrain"]
    assert collect_kinds("ntkpipe.stages", Path(stage_registry.__file__).parent, lambda k: k.compute, "stage") == STAGES


def test_a_kind_defined_in_two_modules_is_an_error(tmp_path, monkeypatch):
    """The registries' collector (stages, summaries) names the kind and the second module that defines it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, second in (("kinds_twice", "['z', 'x']"), ("kinds_once", "['z']")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "a.py").write_text("KINDS = ['x', 'y']\n")
        (tmp_path / name / "b.py").write_text(f"KINDS = {second}\n")
    with pytest.raises(ValueError, match=r"thing 'x' is defined twice \(module kinds_twice.b\)"):
        collect_kinds("kinds_twice", tmp_path / "kinds_twice", str, "thing")
    assert list(collect_kinds("kinds_once", tmp_path / "kinds_once", str, "thing")) == ["x", "y", "z"]


def test_cli_describes_a_measurement_from_its_record(capsys):
    from ntkpipe.cli import main

    assert main(["measurements", "t_align"]) == 0
    out = capsys.readouterr().out
    m = registry.REGISTRY["t_align"]
    assert out.splitlines()[:3] == ["t_align (final; depends on first_layer_alignment)", f"  {m.doc}",
                                    f"  option {m.options[0].describe()}"]
    assert main(["measurements", "t_alig"]) == 1
    assert "unknown measurement(s) t_alig; known: loss," in capsys.readouterr().err
