"""Self-describing results: CF attrs from the registry for every variable of every shipped study,
theory residuals against an independent computation, provenance from the run stores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ntkpipe.errors import SpecError
from ntkpipe.jobs.aggregate import axis_coords, study_variables
from ntkpipe.jobs.describe import COORDINATES, describe, provenance
from ntkpipe.jobs.residuals import theory_residuals
from ntkpipe.measure.registry import REGISTRY, TIME_UNITS, VARIABLES, variable_attrs
from ntkpipe.show import sparkline
from ntkpipe.study.load import load_study, variant_names

REPO = Path(__file__).resolve().parents[1]


def test_every_registered_variable_is_described():
    for name, variable in VARIABLES.items():
        attrs = variable_attrs(name)
        assert attrs["long_name"] and len(attrs["description"]) > 20, name
        for dim in variable.dims:
            assert dim in COORDINATES, f"{name}: dimension {dim!r} has no coordinate description"
        if variable.theory_of or name.endswith("_theory"):
            measured = VARIABLES.get(variable.theory_of)
            assert measured is not None, f"{name}: theory_of {variable.theory_of!r} is not a registered variable"
            assert REGISTRY[next(m for m in REGISTRY if variable in REGISTRY[m].variables)].assumptions, name
            assert attrs["assumptions"] and attrs["theory_of"] == variable.theory_of
            # the residual compares it with the measured variable: same own dims once theory_at is selected
            at = dict(variable.theory_at)
            assert set(at) <= set(measured.dims), name
            own = [d for d in measured.dims if d not in at and d != "time"]
            assert own == [d for d in variable.dims if d != "time"], name
            assert "time" not in variable.dims or "time" in measured.dims, name
    assert variable_attrs("t_half")["units"] == TIME_UNITS
    assert "units" not in variable_attrs("alignment")


def _skeleton(study) -> xr.Dataset:
    """What aggregation merges from the study's run stores, with NaN values: every variable its
    runs store, over the sweep axes and the variables' own dimensions."""
    coords = axis_coords(study.axes, study.points)
    sweep_shape = [len(v) for v in coords.values()]
    names = {v.name: v for run in study.runs for item in run.measure for v in REGISTRY[item.name].variables}
    coords |= {"time": [0.0, 1.0], **{d: [1] for v in names.values() for d in v.dims if d != "time"}}
    ds = xr.Dataset(coords=coords)
    for name, v in names.items():
        dims = [*study.axes, *v.dims]
        ds[name] = (dims, np.full([len(coords[d]) for d in dims], np.nan))
    for name in ("diverged", "seconds_train", "seconds_measure", "seconds_job"):
        ds[name] = (study.axes, np.zeros(sweep_shape))
    ds["run_id"] = (study.axes, np.full(sweep_shape, "", dtype=object))
    return ds


def _shipped_studies():
    for path in sorted((REPO / "specs").glob("*.yaml")):
        for variant in variant_names(path):
            try:
                yield load_study(path, variant)
            except SpecError:  # a paper variant needs local MNIST / CIFAR-10 files
                assert variant != "default", path


def test_every_variable_of_every_shipped_study_is_described():
    """The aggregation's summaries, residuals and attrs on every shipped study (all variants that load)."""
    seen = set()
    for study in _shipped_studies():
        ds = study_variables(_skeleton(study), study)
        for name in [*ds.data_vars, *ds.coords]:
            attrs = ds[name].attrs
            assert attrs.get("long_name") and attrs.get("description"), (study.name, study.variant, name)
            seen.add(name)
        assert ds["time"].attrs["units"] == TIME_UNITS
        json.dumps({n: ds[n].attrs for n in [*ds.data_vars, *ds.coords]})  # zarr v2 attrs are JSON
    # the shipped studies exercise sweep axes, case axes, the scale parameter d, summaries and residuals
    assert {"sigma", "dataset", "d", "t_half_exponent_stderr", "predicted_phase_init_term", "measured_phase",
            "energy_concentration_table", "q_theory_residual", "kv_projection_theory_residual",
            "layer_alignment_invariant_residual", "mode_strength_theory_residual"} <= seen


def test_undescribed_variable_is_an_error():
    ds = xr.Dataset({"loss": ("time", [1.0, 0.5]), "mystery": ("time", [0.0, 1.0])}, coords={"time": [0.0, 1.0]})
    with pytest.raises(ValueError, match=r"'mystery' has no description: register it in ntkpipe.measure.registry"):
        describe(ds)


def test_sweep_axis_attrs_name_their_spec_key(tmp_path):
    study = load_study(REPO / "specs" / "partial_whitening.yaml")
    ds = study_variables(_skeleton(study), study)
    assert ds["gamma"].attrs["long_name"] == "whitening exponent γ"
    assert ds["gamma"].attrs["description"].startswith("sweep axis: each run's spec key data.gamma")
    assert ds["training"].attrs["description"].startswith("case axis (sweep.cases.training)")


def test_residuals_against_independent_computation():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    measured = np.array([[0.0, 0.5, -1.0, 2.0], [1.0, 1.0, np.nan, 1.0]])
    theory = np.array([[0.1, 0.5, -1.5, 2.0], [np.nan] * 4])
    ds = xr.Dataset({"r": (("sigma", "time"), measured), "r_theory": (("sigma", "time"), theory),
                     "t_half": ("sigma", [2.0, 4.0]), "t_half_theory": ("sigma", [2.5, 3.0]),
                     "alignment": (("sigma", "time"), [[0.1, 0.2, 0.4, np.nan], [0.1, 0.2, 0.3, 0.5]]),
                     "alignment_theory": ("sigma", [0.5, 0.25])},
                    coords={"sigma": [0.1, 0.2], "time": t})
    res = theory_residuals(ds)
    assert sorted(res.data_vars) == ["alignment_theory_residual", "r_theory_residual", "t_half_theory_residual"]
    np.testing.assert_allclose(res["t_half_theory_residual"].values, [0.25, -0.25])
    # alignment's last finite value: 0.4 and 0.5
    np.testing.assert_allclose(res["alignment_theory_residual"].values, [0.25, -0.5])
    # largest |theory − measured| at t = 2: −0.5, over max |r| = 2; the theory-less run is NaN
    np.testing.assert_allclose(res["r_theory_residual"].values, [-0.25, np.nan])


def test_residual_at_one_entry_of_the_measured_dims():
    """kv_projection_theory (a scalar-output theory) is compared with kv_projection at output 1, target 1."""
    measured = np.zeros((2, 2, 2))
    measured[:, 0, 0] = [1.0, 4.0]
    measured[:, 1, 1] = 100.0
    ds = xr.Dataset({"kv_projection": (("time", "output", "target"), measured),
                     "kv_projection_theory": ("time", [1.0, 3.0])},
                    coords={"time": [0.0, 1.0], "output": [1, 2], "target": [1, 2]})
    np.testing.assert_allclose(float(theory_residuals(ds)["kv_projection_theory_residual"]), -0.25)


def test_provenance_records_distinct_run_versions():
    study = load_study(REPO / "specs" / "silent_alignment.yaml")
    versions = {"ntkpipe": "0.1.0", "jax": "0.7.0", "git": "abc"}
    attrs = provenance(study, [{"versions": json.dumps(versions)}, {"versions": json.dumps(versions)},
                               {"ntkpipe_version": "0.0.9"}])
    assert json.loads(attrs["run_versions"]) == [versions, {"ntkpipe": "0.0.9"}]
    assert json.loads(attrs["study_spec"]) == study.spec.model_dump(mode="json")
    assert attrs["study"] == "silent_alignment" and attrs["variant"] == "default"
    assert attrs["created"].endswith("+00:00")


def test_sparkline():
    assert sparkline([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]) == "▁▂▃▄▅▆▇█"
    assert sparkline([1.0, np.nan, 1.0]) == "▁▁"
    assert sparkline([1e-4, 1e-2, 1.0]) == "▁▅█ (log)"
    assert len(sparkline(np.arange(100.0))) == 24
