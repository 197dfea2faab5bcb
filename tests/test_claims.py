"""Claims: each relation against hand-computed numbers on small synthetic datasets (both layouts), the
validation of claims against the study, and a tiny study through Snakemake whose claims are checked,
stored, tabulated, indexed and listed; editing a claim reruns only the claims job and changes no run id."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
import xarray as xr

from ntkpipe.claims.relations.trends import spearman_rho
from ntkpipe.cli import main
from ntkpipe.errors import SpecError
from ntkpipe.lang.schema import ClaimSpec
from ntkpipe.layout import RUN, index_runs
from ntkpipe.study.load import load_study, variant_names
from ntkpipe.study.plan import plan_study
from ntkpipe.verdicts.evaluate import claims_dataset, outcome, verdicts
from ntkpipe.verdicts.quantity import read_quantity
from ntkpipe.verdicts.render import tally
from ntkpipe.workflow import spec_files
from tests.conftest import REPO, run_snakemake

TIMES = [0.0, 1.0, 2.0]


def grid() -> xr.Dataset:
    """Two σ × two seeds; alignment(σ, seed, time), t_align and t_half(σ, seed)."""
    sigma, seed = [0.1, 0.2], [0, 1]
    alignment = np.array([[[0.0, 0.5, 0.8], [0.0, 0.4, 0.6]],
                          [[0.0, 0.3, 0.5], [0.0, 0.2, np.nan]]])  # last NaN: its final value is 0.2
    return xr.Dataset({"alignment": (("sigma", "seed", "time"), alignment),
                       "t_align": (("sigma", "seed"), [[1.0, 3.0], [2.0, 2.0]]),
                       "t_half": (("sigma", "seed"), [[10.0, 12.0], [4.0, 6.0]]),
                       "depth_curve": (("sigma", "seed"), [[3.0, 3.0], [1.0, 2.0]])},
                      coords={"sigma": sigma, "seed": seed, "time": TIMES})


def runs(t_half=(5.0, 3.0, 9.0, 4.0, 1.0)) -> xr.Dataset:
    """The runs layout: depth 2 at σ 0.1, 0.2 and depth 3 at σ 0.1, 0.2, 0.4 (a union sweep)."""
    depth, sigma = [2, 2, 3, 3, 3], [0.1, 0.2, 0.1, 0.2, 0.4]
    ds = xr.Dataset({"t_half": (RUN, list(t_half))}, coords={"depth": (RUN, depth), "sigma": (RUN, sigma)})
    return index_runs(ds)


def claim(relation: dict, quantity: dict, tolerance: dict | None = None) -> ClaimSpec:
    return ClaimSpec.model_validate({"name": "c", "source": "test", "statement": "s", "regime": "r",
                                     "quantity": quantity, "relation": relation, "tolerance": tolerance})


def test_a_quantity_reduces_seeds_by_mean_and_time_to_the_last_finite_value():
    ds = grid()
    final = read_quantity(ds, claim({"kind": "less", "than": 1}, {"variable": "alignment"}).quantity)
    assert float(final) == pytest.approx(np.mean([0.8, 0.6, 0.5, 0.2]))
    q = claim({"kind": "less", "than": 1}, {"variable": "alignment", "where": {"sigma": 0.2},
                                             "reduce": {"seed": "max", "time": "initial"}}).quantity
    assert float(read_quantity(ds, q)) == 0.0
    along = read_quantity(ds, claim({"kind": "less", "than": 1}, {"variable": "t_half"}).quantity, keep="sigma")
    assert along.values.tolist() == [11.0, 5.0]


@pytest.mark.computes("relation:approx")
def test_approx_within_an_absolute_or_relative_tolerance():
    ds = grid()  # mean t_half over seeds at σ = 0.1: 11
    q = {"variable": "t_half", "where": {"sigma": 0.1}}
    assert outcome(claim({"kind": "approx", "value": 10}, q, {"value": 1, "reason": "r"}), ds).passed
    assert not outcome(claim({"kind": "approx", "value": 10}, q, {"value": 0.99, "reason": "r"}), ds).passed
    rel = outcome(claim({"kind": "approx", "value": 10}, q, {"value": 0.1, "relative": True, "reason": "r"}), ds)
    assert rel.passed and rel.measured == 11 and rel.expected == 10
    assert not outcome(claim({"kind": "approx", "value": 12.5}, q, {"value": 0.1, "relative": True,
                                                                     "reason": "r"}), ds).passed


@pytest.mark.computes("relation:less", "relation:greater")
def test_less_and_greater_than_a_number_or_another_quantity():
    ds = grid()  # means: t_align 2.0 at σ 0.1, t_half 11.0
    q = {"variable": "t_align", "where": {"sigma": 0.1}}
    other = {"variable": "t_half", "where": {"sigma": 0.1}}
    assert outcome(claim({"kind": "less", "than": other}, q), ds).passed
    assert not outcome(claim({"kind": "greater", "than": other}, q), ds).passed
    assert outcome(claim({"kind": "greater", "than": 1.5}, q), ds).passed
    assert not outcome(claim({"kind": "less", "than": 1.5}, q), ds).passed
    assert outcome(claim({"kind": "less", "than": 1.5}, q, {"value": 0.6, "reason": "r"}), ds).passed  # 2 < 1.5 + 0.6
    result = outcome(claim({"kind": "less", "than": other}, q), ds)
    assert (result.measured, result.expected) == (2.0, 11.0)


@pytest.mark.computes("relation:before")
def test_before_with_a_separation_factor():
    ds = grid()  # σ 0.2: t_align 2, t_half 5
    q, later = {"variable": "t_align", "where": {"sigma": 0.2}}, {"variable": "t_half", "where": {"sigma": 0.2}}
    assert outcome(claim({"kind": "before", "than": later, "factor": 2}, q), ds).passed  # 4 < 5
    assert not outcome(claim({"kind": "before", "than": later, "factor": 3}, q), ds).passed  # 6 > 5
    assert not outcome(claim({"kind": "before", "than": q}, later), ds).passed


@pytest.mark.computes("relation:monotone")
def test_monotone_in_either_layout_strict_or_within_a_tolerance():
    ds = grid()
    fall = {"kind": "monotone", "along": "sigma", "direction": "decreasing"}
    result = outcome(claim(fall, {"variable": "t_half"}), ds)
    assert result.passed and result.measured == 6.0  # 11 → 5
    assert not outcome(claim({**fall, "direction": "increasing"}, {"variable": "t_half"}), ds).passed
    flat = {"variable": "depth_curve", "reduce": {"seed": "min"}}  # 3, 1
    assert not outcome(claim({**fall, "direction": "increasing"}, flat), ds).passed
    assert outcome(claim({**fall, "direction": "increasing"}, flat, {"value": 2, "reason": "r"}), ds).passed
    assert not outcome(claim({**fall, "direction": "increasing"}, flat, {"value": 0.5, "relative": True,
                                                                         "reason": "r"}), ds).passed  # 0.5·3 < 2
    by_runs = runs()
    at_3 = {"variable": "t_half", "where": {"depth": 3}}  # 9, 4, 1 along σ
    assert outcome(claim({**fall, "strict": True}, at_3), by_runs).measured == 3.0
    equal = runs((5.0, 3.0, 9.0, 9.0, 1.0))
    assert outcome(claim(fall, at_3), equal).passed
    assert not outcome(claim({**fall, "strict": True}, at_3), equal).passed
    logspaced = grid().assign_coords(sigma=[0.0316978638492, 0.1])
    assert "at sigma = 0.0317, 0.1" in outcome(claim(fall, {"variable": "t_half"}), logspaced).detail


@pytest.mark.computes("relation:spearman")
def test_spearman_sign_against_hand_computed_ranks():
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0])
    assert spearman_rho(x, y) == pytest.approx(1 - 6 * 2 / (4 * 15))  # Σd² = 2: ρ = 0.8
    assert spearman_rho(x, np.array([2.0, 2.0, 1.0, 0.0])) == pytest.approx(-0.9486832980505138)  # ties: mean ranks
    ds = xr.Dataset({"v": ("width", [1.0, 3.0, 2.0, 4.0])}, coords={"width": [10, 20, 40, 80]})
    result = outcome(claim({"kind": "spearman", "along": "width"}, {"variable": "v"}), ds)
    assert result.passed and result.measured == pytest.approx(0.8)
    assert not outcome(claim({"kind": "spearman", "along": "width", "at_least": 0.9}, {"variable": "v"}), ds).passed
    assert not outcome(claim({"kind": "spearman", "along": "width", "sign": "negative"}, {"variable": "v"}), ds).passed


@pytest.mark.computes("relation:ordering")
def test_ordering_of_labelled_cases():
    ds = xr.Dataset({"accuracy": ("init", [0.9, 0.7, 0.8])}, coords={"init": ["balanced", "xavier", "mirrored"]})
    q = {"variable": "accuracy"}
    result = outcome(claim({"kind": "ordering", "along": "init", "order": ["xavier", "mirrored", "balanced"]}, q), ds)
    assert result.passed and result.measured == pytest.approx(0.1)
    assert not outcome(claim({"kind": "ordering", "along": "init", "order": ["balanced", "xavier"]}, q), ds).passed
    assert outcome(claim({"kind": "ordering", "along": "init", "order": ["balanced", "xavier"],
                          "direction": "decreasing"}, q), ds).passed


def test_a_claim_that_cannot_be_read_fails_with_the_reason():
    result = outcome(claim({"kind": "approx", "value": 1}, {"variable": "t_half"}, {"value": 1, "reason": "r"}),
                     grid().drop_vars("t_half"))
    assert not result.passed and "not evaluated" in result.detail
    diverged = grid().assign(t_half=lambda ds: ds["t_half"] * np.nan)  # every run diverged
    result = outcome(claim({"kind": "monotone", "along": "sigma"}, {"variable": "t_half"}), diverged)
    assert not result.passed and np.isnan(result.measured)


def test_verdicts_become_claim_variables():
    rows = verdicts("s", [claim({"kind": "less", "than": 100}, {"variable": "t_half"})], grid())
    ds = claims_dataset(rows)
    assert sorted(ds.data_vars) == ["claim_c_expected", "claim_c_measured", "claim_c_pass"]
    assert bool(ds["claim_c_pass"]) and float(ds["claim_c_measured"]) == 8.0 and float(ds["claim_c_expected"]) == 100
    assert all(ds[v].attrs["long_name"] and ds[v].attrs["description"] for v in ds.data_vars)


def test_a_claim_of_another_variant_is_measured_and_listed_not_judged():
    paper = ClaimSpec.model_validate({"name": "c", "source": "test", "statement": "s", "regime": "r",
                                      "quantity": {"variable": "t_half"}, "relation": {"kind": "less", "than": 1},
                                      "variants": ["paper"]})
    [here] = verdicts("s", [paper], grid())
    [there] = verdicts("s", [paper], grid(), variant="paper")
    assert (here.status, here.measured) == ("paper variant", 8.0) and "judged in the paper variant" in here.detail
    assert (there.status, there.measured) == ("FAIL", 8.0)
    assert sorted(claims_dataset([here]).data_vars) == ["claim_c_expected", "claim_c_measured"]
    assert tally([asdict(here), asdict(there)]) == "0 of 1 claims hold (1 more judged in another variant)"


# ------------------------------------------------------------------ validation


STUDY = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 60
  checkpoints: {per_decade: 10}
measure: [loss, alignment, first_layer_alignment, t_half, t_align, t_half_theory]
sweep:
  sigma: [0.1, 0.15, 0.2]
summaries:
  - {name: t_half_exponent, kind: power_law, x: sigma, y: t_half}
figures:
  - {name: t_half, kind: sweep, x: sigma, y: t_half, theory: t_half_theory, logx: true, logy: true}
claims:
  - name: t_half_falls
    source: Silent alignment Eq. 5
    statement: "the time to learn falls as the initialization grows"
    regime: small σ
    quantity: {variable: t_half}
    relation: {kind: monotone, along: sigma, direction: decreasing}
    figures: [t_half]
  - name: theory_holds
    source: Silent alignment Eq. 5
    statement: "t½ ≈ its theory"
    regime: small σ
    quantity: {variable: t_half_theory_residual, where: {sigma: 0.1}}
    relation: {kind: approx, value: 0}
    tolerance: {value: 0.3, reason: finite width 8}
  - name: alignment_first
    source: Silent alignment Sec. 3
    statement: "alignment happens before growth"
    regime: small σ
    quantity: {variable: t_align, where: {sigma: 0.1}}
    relation: {kind: before, than: {variable: t_half, where: {sigma: 0.1}}}
  - name: steep
    source: Silent alignment Eq. 5
    statement: "t½ ∝ σ^(−2(L−2)/L)... at least falls faster than 1/σ^0.1"
    regime: small σ
    quantity: {variable: t_half_exponent}
    relation: {kind: less, than: -0.1}
"""


def problems(tmp_path, text: str) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_study(path)
    return str(err.value)


VARIANTS = STUDY + """\
variants:
  paper:
    sweep:
      sigma: [0.05, 0.1, 0.15, 0.2]
"""
PAPER_CLAIM = """\
  - name: paper_only
    source: Silent alignment Eq. 5
    statement: "t½ falls at the smallest σ too"
    regime: the paper's σ
    quantity: {variable: t_half, where: {sigma: 0.05}}
    relation: {kind: greater, than: 0}
    variants: [paper]
"""


def test_a_claim_is_checked_against_the_variants_it_names(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(VARIANTS.replace("variants:\n", PAPER_CLAIM + "variants:\n"))
    assert load_study(path).spec.claims[-1].variants == ["paper"]  # σ = 0.05 exists only in the paper variant
    assert load_study(path, "paper").spec.claims[-1].name == "paper_only"
    path.write_text(VARIANTS.replace("variants:\n", PAPER_CLAIM.replace("[paper]", "[papr]") + "variants:\n"))
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert "claims.4.variants.0: variant 'papr' is not a variant of this study (did you mean 'paper'?)" in str(err.value)
    path.write_text(VARIANTS.replace("variants:\n", PAPER_CLAIM.replace("[paper]", "[default]") + "variants:\n"))
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert "claims.4.quantity.where.sigma: sigma=0.05 is not in the sweep" in str(err.value)


def test_a_claim_of_another_variant_may_name_its_figures_and_variables(tmp_path):
    """A default-only claim on a measurement the paper variant drops, shown in a figure the paper variant
    drops, validates in both variants; judged in the paper variant it would not."""
    default_only = PAPER_CLAIM.replace("paper_only", "default_only").replace("[paper]", "[default]").replace(
        "{variable: t_half, where: {sigma: 0.05}}", "{variable: alignment}") + "    figures: [alignment]\n"
    study = STUDY.replace("figures:\n", "figures:\n  - {name: alignment, kind: time_series, variables: [alignment]}\n")
    path = tmp_path / "study.yaml"
    paper = "variants:\n  paper:\n    measure: [loss, first_layer_alignment, t_half, t_align, t_half_theory]\n" \
            "    figures:\n      - {name: t_half, kind: sweep, x: sigma, y: t_half, theory: t_half_theory, logx: true, logy: true}\n"
    path.write_text(study + default_only + paper)
    assert load_study(path).spec.claims[-1].name == "default_only"
    assert load_study(path, "paper").spec.claims[-1].figures == ["alignment"]
    path.write_text(study + default_only.replace("[default]", "[paper]") + paper)
    with pytest.raises(SpecError) as err:
        load_study(path, "paper")
    assert "claims.4.figures.0: figure 'alignment' is not a figure of this study" in str(err.value)


def test_the_shipped_form_validates(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    assert [c.name for c in load_study(path).spec.claims] == ["t_half_falls", "theory_holds", "alignment_first", "steep"]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("quantity: {variable: t_half}", "quantity: {variable: t_halff}",
     "line 19: claims.0.quantity.variable: 't_halff' is not measured (did you mean 't_half'?)"),
    ("quantity: {variable: t_half}", "quantity: {variable: kernel_norm}",
     "claims.0.quantity.variable: 'kernel_norm' is not measured; add kernel_norm to 'measure'"),
    ("along: sigma, direction", "along: depth, direction",
     "claims.0.relation.along: along 'depth' is neither a sweep axis nor a dimension of 't_half'"),
    ("where: {sigma: 0.1}}\n    relation: {kind: approx", "where: {sgima: 0.1}}\n    relation: {kind: approx",
     "claims.1.quantity.where.sgima: where 'sgima' is not a sweep axis (did you mean 'sigma'?)"),
    ("where: {sigma: 0.1}}\n    relation: {kind: approx", "where: {sigma: 0.3}}\n    relation: {kind: approx",
     "claims.1.quantity.where.sigma: sigma=0.3 is not in the sweep"),
    ("quantity: {variable: t_half}", "quantity: {variable: t_half, reduce: {seed: mean}}",
     "claims.0.quantity.reduce.seed: reduce 'seed' is neither a sweep axis nor a dimension of 't_half'"),
    ("quantity: {variable: t_half}", "quantity: {variable: t_half, reduce: {sigma: final}}",
     "claims.0.quantity.reduce.sigma: final reduces time only"),
    ("    tolerance: {value: 0.3, reason: finite width 8}\n", "",
     "claims.1.tolerance: an approx claim needs a tolerance"),
    ("tolerance: {value: 0.3, reason: finite width 8}", "tolerance: {value: 0.3}",
     "claims.1.tolerance.reason: required key is missing"),
    ("direction: decreasing}", "direction: down}", "claims.0.relation.direction: Input should be 'increasing' or 'decreasing'"),
    ("direction: decreasing}", "direction: decreasing, strict: true}\n    tolerance: {value: 1, reason: r}",
     "claims.0.tolerance: a strict monotone claim takes no tolerance"),
    ("direction: decreasing}", "directon: decreasing}", "unknown key"),
    ("relation: {kind: before", "relation: {kind: after", "claims.2.relation"),
    ("quantity: {variable: t_align, where", "quantity: {variable: alignment, where",
     "claims.2.quantity.variable: 'alignment' is not a time"),
    ("name: steep", "name: t_half_falls", "claims.3.name: claim name 't_half_falls' is used twice"),
    ("relation: {kind: monotone, along: sigma, direction: decreasing}",
     "relation: {kind: ordering, along: sigma, order: [0.1, 0.25]}", "claims.0.relation.order: 0.25 not among"),
    ("variable: t_half_exponent}", "variable: t_half_exponent_stderr, where: {sigma: 0.1}}", ""),
    ("figures: [t_half]", "figures: [t_halff]",
     "claims.0.figures.0: figure 't_halff' is not a figure of this study (did you mean 't_half'?); choose one of t_half"),
    ("figures: [t_half]", "figures: [t_half, t_half]", "claims.0.figures.1: figure 't_half' is named twice"),
])
def test_a_claim_about_what_the_study_does_not_produce_is_a_spec_error(tmp_path, old, new, expected):
    assert old in STUDY
    text = STUDY.replace(old, new, 1)
    if not expected:  # a summary's other variable is one too; a sweep axis may select it
        path = tmp_path / "study.yaml"
        path.write_text(text)
        load_study(path)
        return
    message = problems(tmp_path, text)
    assert expected in message, message


# ------------------------------------------------------------------ through the workflow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    work = tmp_path_factory.mktemp("claims")
    (work / "specs").mkdir()
    (work / "specs" / "tiny.yaml").write_text(STUDY)
    return work


@pytest.fixture(scope="module")
def first_run(workdir):
    return run_snakemake(workdir)


@pytest.mark.workflow
def test_the_workflow_stores_tabulates_and_indexes_the_claims(workdir, first_run):
    assert {"results/tiny/tiny.zarr", "results/tiny/tiny_claims.csv", "results/tiny/index.md"} <= set(first_run)
    study = ds = xr.open_zarr(workdir / "results/tiny/tiny.zarr")  # the verdicts are in the study dataset
    t_half = study["t_half"].values
    assert float(ds["claim_t_half_falls_measured"]) == pytest.approx(min(-np.diff(t_half)))
    assert bool(ds["claim_t_half_falls_pass"]) == bool(np.all(np.diff(t_half) <= 0))
    assert float(ds["claim_steep_measured"]) == pytest.approx(float(study["t_half_exponent"]))
    assert float(ds["claim_theory_holds_measured"]) == pytest.approx(float(study["t_half_theory_residual"].sel(sigma=0.1)))
    table = (workdir / "results/tiny/tiny_claims.csv").read_text()
    assert table.splitlines()[0].startswith("study,claim,source,statement,regime,quantity,relation,measured,expected")
    assert len(table.splitlines()) == 5
    index = (workdir / "results/tiny/index.md").read_text()
    assert "## Claims" in index and "| tiny | alignment_first | Silent alignment Sec. 3 |" in index
    shown = index.split("### t_half", 1)[1].split("##", 1)[0]  # the figure's section lists the claim naming it
    assert "Claims shown:" in shown and "`t_half_falls` (Silent alignment Eq. 5; small σ)" in shown
    assert ("✅ pass" if bool(ds["claim_t_half_falls_pass"]) else "❌ FAIL") in shown
    assert "t_half_falls" in table.splitlines()[1] and table.splitlines()[1].endswith(",t_half")


@pytest.mark.workflow
def test_ntkpipe_claims_lists_them_and_writes_the_fidelity_table(workdir, first_run, capsys, monkeypatch):
    monkeypatch.chdir(workdir)
    readme = workdir / "README.md"
    readme.write_text("# t\n\n<!-- claims:begin (ntkpipe claims --markdown README.md) -->\nstale table\n<!-- claims:end -->\n")
    assert main(["claims", "--markdown", "README.md"]) == 0
    out = capsys.readouterr().out
    assert "tiny.t_half_falls (Silent alignment Eq. 5; small σ)" in out and "claims hold" in out
    text = readme.read_text()
    assert "stale table" not in text and "| tiny | steep | Silent alignment Eq. 5 | small σ |" in text
    assert main(["claims", "--evaluate", "tiny"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == out.splitlines()[-2]  # the same verdicts


@pytest.mark.workflow
def test_editing_a_claim_re_aggregates_and_retrains_nothing(workdir, first_run):
    spec = workdir / "specs" / "tiny.yaml"
    before = [job.id for job in plan_study(load_study(spec), workdir / "results").runs]
    spec.write_text(STUDY.replace("relation: {kind: less, than: -0.1}", "relation: {kind: greater, than: 100}"))
    assert [job.id for job in plan_study(load_study(spec), workdir / "results").runs] == before
    remade = run_snakemake(workdir)
    assert not [p for p in remade if p.startswith(("results/runs/", "results/stages/", "results/finals/"))], remade
    assert {"results/tiny/tiny.zarr", "results/tiny/tiny_claims.csv", "results/tiny/index.md"} <= set(remade)
    ds = xr.open_zarr(workdir / "results/tiny/tiny.zarr")
    assert not bool(ds["claim_steep_pass"]) and float(ds["claim_steep_expected"]) == 100


# ------------------------------------------------------------------ the shipped studies


@pytest.mark.parametrize("path", spec_files(REPO / "specs"), ids=lambda p: p.stem)
def test_every_figure_of_a_shipped_study_shows_a_claim(path):
    """Issue 26's done-when: at least one claim for each figure; every claim names the figures it is read
    from, in every variant."""
    for variant in variant_names(path):
        spec = load_study(path, variant, data_files=False).spec
        unnamed = [c.name for c in spec.claims if not c.figures]
        assert not unnamed, f"{path.name} ({variant}): claims naming no figure: {unnamed}"
        shown = {f for c in spec.claims for f in c.figures}
        bare = [f.name for f in spec.figures if f.name not in shown]
        assert not bare, f"{path.name} ({variant}): figures without a claim: {bare}"
