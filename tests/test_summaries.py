"""Summary kinds as records (:mod:`ntkpipe.summaries`): each record's variables against an independent
computation on a small dataset in both layouts, and the validation each kind owns (errors at the key to
fix, with its line)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ntkpipe.errors import SpecError
from ntkpipe.layout import RUN
from ntkpipe.study.load import load_study
from ntkpipe.summaries import SUMMARY_KINDS
from ntkpipe.summaries.endpoints import EndpointsOptions
from ntkpipe.summaries.fits import FitOptions
from ntkpipe.summaries.record import SummaryOptions

SIGMA, DEPTH = [0.5, 1.0, 2.0, 4.0], [2, 3]
RNG = np.random.default_rng(0)
T_HALF = np.array([[3.0 * s ** -(d - 1) * np.exp(0.05 * RNG.standard_normal()) for s in SIGMA] for d in DEPTH])
LOSS = RNG.uniform(0.1, 1.0, (2, 4, 3))


def grid() -> xr.Dataset:
    """t_half over (depth, sigma) and a loss series over time, with one point (depth 3, σ 4) diverged (NaN)."""
    t_half, loss = T_HALF.copy(), LOSS.copy()
    t_half[1, 3], loss[1, 3, 1:] = np.nan, np.nan
    return xr.Dataset({"t_half": (("depth", "sigma"), t_half), "loss": (("depth", "sigma", "time"), loss)},
                      coords={"depth": DEPTH, "sigma": SIGMA, "time": [0.0, 1.0, 2.0]})


def runs() -> xr.Dataset:
    """The same runs along ``run`` (the runs layout), the axes coordinates along it."""
    g = grid()
    depth, sigma = (a.ravel() for a in np.meshgrid(DEPTH, SIGMA, indexing="ij"))
    return xr.Dataset({"t_half": (RUN, g["t_half"].values.ravel()), "loss": ((RUN, "time"), g["loss"].values.reshape(8, 3))},
                      coords={"depth": (RUN, depth), "sigma": (RUN, sigma), "time": g["time"].values})


def least_squares(u: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Slope b and its standard error of v = a + b u, by the normal equations."""
    design = np.stack([np.ones_like(u), u], axis=1)
    coef, *_ = np.linalg.lstsq(design, v, rcond=None)
    resid = v - design @ coef
    return coef[1], np.sqrt(resid @ resid / (len(u) - 2) / np.sum((u - u.mean()) ** 2))


def compute(kind: str, ds: xr.Dataset, **options) -> xr.Dataset:
    record = SUMMARY_KINDS[kind]
    return record.compute(record.options(kind=kind, **options), ds, None)


@pytest.mark.computes("summary:power_law", "summary:log_law")
@pytest.mark.parametrize("layout", [grid, runs])
def test_fits_per_group_against_least_squares(layout):
    """Per depth, the slope of ln t½ on ln σ (power law) and of t½ on ln σ (log law) and their standard
    errors equal the normal equations' over the finite points; a group with 3 finite points still fits."""
    ds = layout()
    for kind, transform in (("power_law", np.log), ("log_law", lambda v: v)):
        out = compute(kind, ds, name="fit", x="sigma", y="t_half", by="depth")
        for i, depth in enumerate(DEPTH):
            keep = np.isfinite(T_HALF[i]) & (np.arange(4) < (4 if depth == 2 else 3))
            slope, stderr = least_squares(np.log(np.array(SIGMA)[keep]), transform(T_HALF[i][keep]))
            got = out.sel(depth=depth) if "depth" in out.dims else out.where(ds["depth"] == depth, drop=True).isel(run=0)
            np.testing.assert_allclose([float(got["fit"]), float(got["fit_stderr"])], [slope, stderr], rtol=1e-10)
    out = compute("power_law", ds, name="fit", x="sigma", y="t_half", by="depth")
    assert float(out["fit"].max()) < 0 and abs(float(np.ravel(out["fit"])[0]) + 1) < 0.2  # t½ ∝ σ^{−(L−1)} here


@pytest.mark.parametrize("layout", [grid, runs])
def test_fit_over_an_x_range_is_the_least_squares_of_those_runs(layout):
    """With x_range [lo, hi] the exponent and its standard error are the normal equations' over the runs
    with lo ≤ σ ≤ hi alone (depth 2: σ = 1, 2, 4 of 0.5…4); fewer than 3 such points give NaN (depth 3,
    whose σ = 4 diverged)."""
    out = compute("power_law", layout(), name="fit", x="sigma", y="t_half", by="depth", x_range=[1.0, 4.0])
    slope, stderr = least_squares(np.log(np.array(SIGMA[1:])), np.log(T_HALF[0, 1:]))
    got = out.sel(depth=2) if "depth" in out.dims else out.where(layout()["depth"] == 2, drop=True).isel(run=0)
    np.testing.assert_allclose([float(got["fit"]), float(got["fit_stderr"])], [slope, stderr], rtol=1e-10)
    other = out.sel(depth=3) if "depth" in out.dims else out.where(layout()["depth"] == 3, drop=True).isel(run=0)
    assert np.isnan(float(other["fit"]))


@pytest.mark.computes("summary:endpoints")
def test_endpoints_table_is_the_first_and_last_finite_value():
    out = compute("endpoints", grid(), name="table", y="loss")["table"]
    assert out.dims == ("checkpoint", "depth", "sigma") and list(out["checkpoint"].values) == ["init", "end"]
    np.testing.assert_array_equal(out.sel(checkpoint="init").values, LOSS[..., 0])
    expected_end = LOSS[..., -1].copy()
    expected_end[1, 3] = LOSS[1, 3, 0]  # the diverged run's last finite value
    np.testing.assert_array_equal(out.sel(checkpoint="end").values, expected_end)


def test_records_declare_what_they_add():
    """Every kind's ``attrs`` describes exactly the variables its ``compute`` adds (fits and endpoints here;
    the phases in tests/test_phase_diagram.py), and each options model is a SummaryOptions of its own kind."""
    study = type("Study", (), {"axis_keys": {}})()
    for kind, options in (("power_law", dict(x="sigma", y="t_half", by="depth")), ("log_law", dict(x="sigma", y="t_half")),
                          ("endpoints", dict(y="loss"))):
        record = SUMMARY_KINDS[kind]
        s = record.options(name="s", kind=kind, **options)
        assert set(record.attrs(s, study)) == set(record.compute(s, grid(), None).data_vars)
    for name, record in SUMMARY_KINDS.items():
        assert issubclass(record.options, SummaryOptions) and name in str(record.options.model_fields["kind"].annotation)
    assert FitOptions(name="f", kind="log_law", x="a", y="b").model_dump() == \
        {"name": "f", "kind": "log_law", "x": "a", "y": "b", "by": None}
    assert EndpointsOptions(name="e", kind="endpoints", y="loss").by_axes == []


STUDY = """\
data: {source: linear_teacher, dim: 2, n_train: 4}
model: {depth: 2, width: 4}
train: {optimizer: {name: gd, lr: 0.1}, steps: 4}
measure: [loss, t_half]
sweep: {sigma: [0.5, 1.0, 2.0]}
summaries:
  - {name: slope, kind: power_law, x: sigma, y: t_half}
"""


def problems(tmp_path, summary: str) -> list[str]:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.replace("  - {name: slope, kind: power_law, x: sigma, y: t_half}", summary))
    with pytest.raises(SpecError) as err:
        load_study(path, data_files=False)
    return err.value.problems


def test_each_kind_validates_its_own_keys(tmp_path):
    """An unknown kind, a key the kind does not take, a bad value and the kind's own rules: each at its line
    and key, with the fix."""
    assert problems(tmp_path, "  - {name: slope, kind: power_lw, x: sigma, y: t_half}") == [
        "line 7: summaries.0.kind: unknown summary kind 'power_lw' (did you mean 'power_law'?); use one of "
        + ", ".join(SUMMARY_KINDS)]
    assert problems(tmp_path, "  - {name: slope, kind: power_law, x: sigma, y: t_half, stderrs: 2}") == [
        "line 7: summaries.0.stderrs: unknown key for a 'power_law' summary (allowed: name, kind, x, y, by, x_range)"]
    assert problems(tmp_path, "  - {name: slope, kind: power_law, x: sigma, y: t_half, x_range: [2, 1]}") == [
        "line 7: summaries.0.x_range: x_range [2, 1] is empty: give [lo, hi] with lo < hi"]
    assert problems(tmp_path, "  - {name: slope, kind: endpoints, y: loss, x: sigma}") == [
        "line 7: summaries.0: an 'endpoints' summary takes only 'y' (a series)"]
    assert problems(tmp_path, "  - {name: slope, kind: log_law, x: sigma}") == [
        "line 7: summaries.0.y: required key is missing"]
    assert problems(tmp_path, "  - {name: slope, kind: power_law, x: sigma, y: loss}") == [
        "line 7: summaries.0.y: 'loss' is a series variable; this needs a scalar one"]
    assert problems(tmp_path, "  - {name: slope, kind: endpoints, y: t_half}") == [
        "line 7: summaries.0.y: 't_half' is a scalar variable; this needs a series one"]
