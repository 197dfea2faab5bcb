"""The rules every figure of every study keeps (issue 27), asserted on the artists of figures drawn
from small synthetic datasets for every figure kind, and the checker (``plots.checks``) seeing each
rule broken: dashes mean theory only, labels render as math (no raw markup, ids as display names),
one legend, nothing outside the figure, the spread over seeds drawn, fits drawn where they are
given, initial values shown on log time axes, y ranges from the data."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import PolyCollection
from pydantic import TypeAdapter

from ntkpipe.labels import AXIS_LABELS, DISPLAY_NAMES, display_name
from ntkpipe.lang.schema import FigureSpec
from ntkpipe.measure.registry import VARIABLES
from ntkpipe.plots import PLOTTERS
from ntkpipe.plots.checks import FIT, THEORY, dashed, data_lines, draw, drawn_tick_labels, figure_defects, legends
from ntkpipe.plots.finish import finish_figure
from ntkpipe.plots.mathtext import as_math, math_error, raw_markup
from ntkpipe.plots.style import new_figure
from ntkpipe.plots.time_series import START
from tests.conftest import warnings_as_errors
from tests.test_plots import FIGURES


def spec_of(name: str, settings: dict):
    return TypeAdapter(FigureSpec).validate_python({"name": name, **settings})


def drawn(ds: xr.Dataset, settings: dict, title: str = "a study"):
    spec = spec_of("f", settings)
    with warnings_as_errors():  # no warning (e.g. a glyph mathtext lacks) while drawing
        fig = PLOTTERS[spec.kind](ds, spec, title)
        draw(fig)
    return fig


def texts(fig) -> list[str]:
    """Every drawn text: titles, labels, legend entries and title, annotations, tick labels."""
    from ntkpipe.plots.checks import _texts

    return [t.get_text() for t in _texts(fig)]


def seeds_dataset() -> xr.Dataset:
    """Loss over time (t = 0 included) for two ids of model kinds and 3 seeds, with its theory
    reaching far below the data (1e-200, as layer_alignment's closed form does), and a power-law
    final loss over width with a markup-laden label (‖K‖_F, η_u / η_W)."""
    time = np.concatenate([[0.0], np.geomspace(0.01, 100.0, 40)])
    rng = np.random.default_rng(7)
    seed = 1.0 + 0.2 * rng.standard_normal((2, 3, 1))
    loss = 0.5 * np.exp(-np.outer([1.0, 2.0], time))[:, None, :] * seed + 1e-6
    theory = np.broadcast_to(0.5 * np.exp(-5.0 * time), (2, 3, 41))
    width = np.array([16.0, 64.0, 256.0, 1024.0])
    norm = 3.0 * width[:, None] ** -0.5 * (1.0 + 0.01 * rng.standard_normal((4, 3)))
    return xr.Dataset({"loss": (("model_kind", "seed", "time"), loss),
                       "loss_theory": (("model_kind", "seed", "time"), theory),
                       "kernel_norm": (("width", "seed"), norm)},
                      coords={"model_kind": ["ofe_fit", "kgd"], "seed": [0, 1, 2], "time": time, "width": width})


def modes_dataset() -> xr.Dataset:
    """Two modes' logistic strengths m_k = s_k/(1 + e^{−4(t − τ_k)}) (half at τ_k = 2, 8) with their
    theory 10 % earlier, and the learning times of both."""
    time = np.concatenate([[0.0], np.geomspace(0.1, 100.0, 61)])
    s, tau = np.array([1.0, 0.5]), np.array([2.0, 8.0])
    strength = s[:, None] / (1.0 + np.exp(-4.0 * (time[None] - tau[:, None])))
    theory = s[:, None] / (1.0 + np.exp(-4.0 * (time[None] - 0.9 * tau[:, None])))
    return xr.Dataset({"mode_strength": (("mode", "time"), strength),
                       "mode_strength_theory": (("mode", "time"), theory),
                       "mode_half_time": (("mode",), tau), "mode_half_time_theory": (("mode",), 0.9 * tau)},
                      coords={"mode": [1, 2], "time": time})


MARKS = {"kind": "time_series", "variables": ["mode_strength"], "hue": "mode",
         "theory": {"mode_strength": "mode_strength_theory"},
         "marks": {"mode_strength": ["mode_half_time", "mode_half_time_theory"]}}


CASES = {**FIGURES,
         "time_series_marks": (modes_dataset, MARKS),
         "time_series_seeds_theory": (seeds_dataset, {"kind": "time_series", "variables": ["loss"], "hue": "model_kind",
                                                      "theory": {"loss": "loss_theory"}, "logy": ["loss"]}),
         "sweep_fit_markup": (seeds_dataset, {"kind": "sweep", "x": "width", "y": "kernel_norm", "logx": True,
                                              "logy": True, "fit": "power_law"})}


@pytest.mark.parametrize("case", CASES)
def test_every_figure_kind_keeps_the_rules(case):
    """Asserted on the artists, not through the checker: dashed lines are exactly the theory lines,
    every text renders (mathtext parses) and shows no raw markup or id, at most one legend,
    every text inside the figure, and the checker agrees."""
    make, settings = CASES[case]
    fig = drawn(make(), settings, "Growth of K_V^{c,c} along y_c (Kernel alignment Fig. 7A)")
    for ax in fig.axes:
        for line in data_lines(ax):
            assert dashed(line) == (line.get_gid() == THEORY), (case, line.get_label())
    shown = texts(fig)
    assert shown and not [t for t in shown if raw_markup(t)]
    assert not [t for t in shown if math_error(t)]
    assert "$K_V^{c,c}$" in fig.texts[0].get_text()  # the title's markup as math
    assert len(legends(fig)) <= 1
    renderer = draw(fig)
    box = fig.bbox.padded(1.0)
    for ax in fig.axes:
        tight = ax.get_tightbbox(renderer)
        assert box.x0 <= tight.x0 and tight.x1 <= box.x1 and box.y0 <= tight.y0 and tight.y1 <= box.y1
    assert figure_defects(fig) == []


@pytest.mark.computes("figure:time_series")
def test_marks_sit_on_their_lines_at_their_times():
    """Each mode's learning time is a dot on its measured line and the ODE's an open diamond on the
    theory line, at the value interpolated on the drawn segment (linear in ln t on the
    log time axis); the legend names both."""
    ds = modes_dataset()
    fig = drawn(ds, MARKS)
    ax = fig.axes[0]
    dots = [line for line in ax.get_lines() if line.get_marker() == "o" and len(line.get_xydata())]
    diamonds = [line for line in ax.get_lines() if line.get_marker() == "D" and len(line.get_xydata())]
    assert len(dots) == len(diamonds) == 2 and all(d.get_markerfacecolor() == "none" for d in diamonds)
    t = ds["time"].values[1:]
    for k in range(2):
        for marks, curve, when in ((dots, ds["mode_strength"], ds["mode_half_time"]),
                                   (diamonds, ds["mode_strength_theory"], ds["mode_half_time_theory"])):
            at = float(when[k])
            expected = np.interp(np.log(at), np.log(t), curve.values[k, 1:])
            (x, y), = marks[k].get_xydata()
            assert (x, y) == (pytest.approx(at), pytest.approx(expected, rel=1e-12))
    (legend,) = legends(fig)
    labels = [text.get_text() for text in legend.get_texts()]
    assert {as_math(VARIABLES[n].label) for n in ("mode_half_time", "mode_half_time_theory")} <= set(labels), labels


def test_theory_lines_in_the_legend_are_dashed_samples_not_words():
    fig = drawn(*(lambda m, s: (m(), s))(*CASES["time_series_seeds_theory"]))
    (legend,) = legends(fig)
    labels = [t.get_text() for t in legend.get_texts()]
    assert "theory" in labels and not [label for label in labels if "dashed" in label]
    sample = legend.legend_handles[labels.index("theory")]
    assert dashed(sample)


def test_a_mean_over_seeds_is_drawn_with_its_spread_and_the_seed_count():
    ds = seeds_dataset()
    fig = drawn(ds, CASES["time_series_seeds_theory"][1])
    ax = fig.axes[0]
    (legend,) = legends(fig)
    assert "mean ± sd over 3 seeds (band)" in [t.get_text() for t in legend.get_texts()]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2  # one per model kind
    loss = ds["loss"].sel(model_kind="ofe_fit")
    mean, sd = loss.mean("seed").values, loss.std("seed").values
    vertices = bands[0].get_paths()[0].vertices
    edges = {round(float(v), 12) for v in vertices[:, 1]}
    assert {round(float(v), 12) for v in (mean + sd)[1:]} <= edges
    assert {round(float(v), 12) for v in (mean - sd)[1:]} <= edges


def test_initial_values_show_on_a_log_time_axis():
    ds = seeds_dataset()
    fig = drawn(ds, CASES["time_series_seeds_theory"][1])
    ax = fig.axes[0]
    starts = [line for line in ax.get_lines() if line.get_marker() == START and len(line.get_xydata())]
    data_starts = sorted(float(line.get_ydata()[0]) for line in starts if line.get_gid() != THEORY)
    expected = sorted(ds["loss"].isel(time=0).mean("seed").values.tolist())
    assert data_starts == pytest.approx(expected, rel=1e-12)
    draw(fig)  # the axes' final position
    for line in starts:  # x in axes coordinates: drawn at the left spine, whatever the time axis shows
        assert line.get_transform().transform((0.0, line.get_ydata()[0]))[0] == pytest.approx(ax.bbox.x0)
    assert "value at t = 0 (left edge)" in [t.get_text() for t in legends(fig)[0].get_texts()]


def test_the_y_range_follows_the_data_not_the_theory():
    ds = seeds_dataset()
    fig = drawn(ds, CASES["time_series_seeds_theory"][1])
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    data = ds["loss"].mean("seed").values[:, 1:]
    assert lo > 0.1 * data.min() and hi < 10 * data.max()  # the theory (down to 0.5 e^-500) is clipped
    assert ds["loss_theory"].values.min() < 1e-100


def test_a_fit_is_drawn_over_the_range_fitted_with_the_least_squares_exponent():
    ds = seeds_dataset()
    fig = drawn(ds, CASES["sweep_fit_markup"][1])
    ax = fig.axes[0]
    (fit,) = [line for line in ax.get_lines() if line.get_gid() == FIT]
    x, y = xr.broadcast(ds["width"], ds["kernel_norm"])
    slope, intercept = np.polyfit(np.log(x.values.ravel()), np.log(y.values.ravel()), 1)
    fx, fy = fit.get_xdata(), fit.get_ydata()
    assert (fx.min(), fx.max()) == pytest.approx((16.0, 1024.0))
    assert fy == pytest.approx(np.exp(intercept) * fx**slope, rel=1e-9)
    (label,) = [t.get_text() for t in legends(fig)[0].get_texts() if "exponent" in t.get_text()]
    assert label.startswith(f"$‖K‖_F$ (exponent {slope:.2f} ± ")
    two = ds.isel(width=[0, 1], seed=[0])  # two points: no fit, and the legend says why
    fig = drawn(two, CASES["sweep_fit_markup"][1])
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == FIT]
    assert any("no fit: fewer than 3 usable points" in t for t in texts(fig))


def test_coincident_data_are_told_apart_by_markers_and_a_note_never_by_dashes():
    make, settings = FIGURES["sweep_coincident_integer_depth"]
    fig = drawn(make(), settings)
    ax = fig.axes[0]
    synthetic, digits = (line for line in ax.get_lines() if line.get_label() in ("synthetic", "digits"))
    assert not dashed(synthetic) and not dashed(digits)
    assert synthetic.get_marker() != digits.get_marker() and digits.get_fillstyle() == "none"
    assert "synthetic, digits coincide" in [t.get_text() for t in legends(fig)[0].get_texts()]


def test_a_coincidence_note_appears_once_per_panel_it_applies_to():
    """depth_scaling/training_curves: the σ curves coincide in two panels of one column (alignment and
    cos at L = 2, independent of σ) and nowhere else. The figure's one legend lists one note per such
    panel, named by its column and its row's quantity, and none for the other panels."""
    time = np.geomspace(0.01, 100.0, 60)
    sigma = [0.01, 0.1]
    same = np.broadcast_to(np.tanh(time), (2, 60))
    apart = np.stack([np.tanh(s * 10 * time) for s in sigma])
    loss = np.stack([0.5 / (1.0 + (s * 10 * time) ** 2) for s in sigma])
    ds = xr.Dataset({"alignment": (("depth", "sigma", "time"), np.stack([same, apart])),
                     "first_layer_alignment": (("depth", "sigma", "time"), np.stack([same, apart])),
                     "loss": (("depth", "sigma", "time"), np.stack([loss, loss * 0.5]))},
                    coords={"depth": [2, 3], "sigma": sigma, "time": time})
    fig = drawn(ds, {"kind": "time_series", "variables": ["loss", "alignment", "first_layer_alignment"],
                     "hue": "sigma", "col": "depth", "logy": ["loss"]})
    notes = [" ".join(t.get_text().split()) for t in legends(fig)[0].get_texts() if "coincide" in t.get_text()]
    assert notes == [as_math(f"L = 2, {VARIABLES[v].label}: σ = 0.01, σ = 0.1 coincide")
                     for v in ("alignment", "first_layer_alignment")]
    assert figure_defects(fig) == []


def test_every_variable_and_axis_label_renders_as_math_without_raw_markup():
    for label in [v.label for v in VARIABLES.values()] + list(AXIS_LABELS.values()):
        math = as_math(label)
        assert not raw_markup(math), (label, math)
        assert math_error(math) is None, (label, math)
    assert as_math("learning-rate ratio η_u / η_W") == "learning-rate ratio $η_u$ / $η_W$"
    assert as_math("|w − w_min|") == r"|w − $w_{\mathrm{min}}|$"
    assert as_math("y_dᵀK_V^{c,c}y_d") == "$y_dᵀK_V^{c,c}y_d$"
    assert as_math("‖K‖_F: γ = 0, γ = 1 coincide") == "$‖K‖_F$: γ = 0, γ = 1 coincide"  # a panel's note
    assert as_math("already $x_1$ math_y") == "already $x_1$ math_y"  # the author's mathtext as written


def test_ids_are_shown_by_display_names():
    assert display_name("ofe_fit") == DISPLAY_NAMES["ofe_fit"]
    assert display_name("xavier_corollary3") == "xavier corollary3"
    assert display_name("relu_kernel") == "ReLU kernel"
    fig = drawn(seeds_dataset(), CASES["time_series_seeds_theory"][1])
    labels = [t.get_text() for t in legends(fig)[0].get_texts()]
    assert DISPLAY_NAMES["ofe_fit"] in labels and DISPLAY_NAMES["kgd"] in labels
    assert legends(fig)[0].get_title().get_text() == "model"  # the legend names the quantity


# --- the checker sees each rule broken ------------------------------------------------------------

def plain_figure():
    fig, axes = new_figure(1, 1)
    return fig, axes[0, 0]


def test_checker_finds_a_dashed_data_line_and_a_solid_theory_line():
    fig, ax = plain_figure()
    ax.plot([1, 2, 3], [1.0, 2.0, 4.0], "--", label="network")
    ax.plot([1, 2, 3], [1.0, 2.5, 3.0], gid=THEORY)
    defects = figure_defects(fig)
    assert "axes 0: data line 'network' is dashed: dashes mean theory, only theory" in defects
    assert "axes 0: theory line (3 points) is solid: dashes mean theory, only theory" in defects


def test_checker_finds_raw_markup_ids_and_broken_mathtext():
    fig, ax = plain_figure()
    ax.plot([0, 1], [0, 1])
    ax.set_ylabel("‖K‖_F")
    ax.set_xlabel("model_case")
    defects = figure_defects(fig)
    assert any("'‖K‖_F' shows raw markup" in d for d in defects)
    assert any("'model_case' shows raw markup or ids" in d for d in defects)
    assert math_error(r"$\notacommand{x}$") is not None  # matplotlib would fail to draw it
    ax.set_title(r"$\notacommand{x}$")  # a spec's broken mathtext: shown as written, reported
    finish_figure(fig, "broken")
    assert any(r"'\\$\\notacommand{x}\\$' shows raw markup" in d for d in figure_defects(fig))
    ax.set_ylabel(as_math("‖K‖_F"))
    ax.set_xlabel(display_name("model_case"))
    ax.set_title("")
    assert figure_defects(fig) == []


def test_checker_finds_a_fit_in_the_legend_without_a_fitted_curve():
    fig, ax = plain_figure()
    ax.plot([1, 2, 4], [1.0, 0.5, 0.25], "o-", label="L = 3 (exponent -1.00 ± 0.01)")
    ax.set_xscale("log")
    ax.legend(loc="upper right")
    assert figure_defects(fig) == ["legend gives a fit ('L = 3 (exponent -1.00 ± 0.01)') but no fitted curve is drawn"]
    ax.plot([1, 4], [1.0, 0.25], color="0.5", lw=0.8, gid=FIT)
    assert figure_defects(fig) == []


def test_checker_finds_two_legends():
    fig, axes = new_figure(1, 2)
    for ax in axes[0]:
        ax.plot([0, 1], [0, 1], label="a")
        ax.legend(loc="lower right")
    assert "2 legends: one legend per figure lists every line" in figure_defects(fig)


def test_checker_finds_a_y_range_set_by_theory_and_finish_sets_it_from_the_data():
    fig, ax = plain_figure()
    t = np.geomspace(0.01, 10.0, 30)
    ax.plot(t, 0.5 + 0.1 * t, label="loss")
    ax.plot(t, np.exp(-50 * t), "--", gid=THEORY)
    ax.set_xscale("log")
    ax.set_yscale("log")
    assert any("y range set by theory" in d for d in figure_defects(fig))
    finish_figure(fig, "loss", [ax])
    lo, hi = ax.get_ylim()
    assert 0.3 < lo < 0.5 and 1.5 < hi < 3.0
    assert figure_defects(fig) == []


def test_log_axes_write_integers_and_plain_decimals_within_a_decade():
    for (lo, hi), expected in {(15.0, 70.0): ["20", "30", "40", "60"], (0.3, 0.9): ["0.3", "0.4", "0.6"],
                               (2e-4, 3e-4): ["0.0002", "0.0003"]}.items():
        fig, ax = plain_figure()
        ax.plot([1, 2], [lo, hi])
        ax.set_yscale("log")
        finish_figure(fig, "ticks")
        draw(fig)
        assert [t.get_text() for _, t in sorted(drawn_tick_labels(ax.yaxis), key=lambda p: p[0])] == expected


# --- every PNG says where it came from; every study has an index ---------------------------------

def test_png_metadata_and_the_study_index(tmp_path, repo):
    import hashlib

    from PIL import Image

    from ntkpipe import __version__
    from ntkpipe.plots.style import save
    from ntkpipe.report import figure_metadata, figure_text, study_index
    from ntkpipe.workflow import build_index

    plan = build_index(repo / "specs", tmp_path / "results", studies=["depth_alignment"]).plans["depth_alignment"]
    figures = {name: tmp_path / f"{name}.png" for name in plan.figure_paths}
    for k, (name, path) in enumerate(figures.items()):
        fig, ax = plain_figure()
        ax.plot([0, 1], [0, 1])
        save(fig, path, figure_metadata(plan, name, ["axes 0: legend covers data ('a')"] if k == 0 else []))
    first, second = figures
    meta = Image.open(figures[first]).text
    spec = plan.study.spec.figures[0]
    digest = hashlib.sha256((repo / "specs" / "depth_alignment.yaml").read_bytes()).hexdigest()[:16]
    assert meta["Source"] == f"depth_alignment.yaml (sha256 {digest}), study depth_alignment"
    assert meta["Software"] == f"ntkpipe {__version__}"
    assert meta["Description"] == f"Reproduces {spec.reproduces}. {figure_text(plan, first)}"
    assert meta["Title"] and "\n" not in meta["Title"] and meta["Warning"] == "axes 0: legend covers data ('a')"
    assert "Warning" not in Image.open(figures[second]).text
    caption = figure_text(plan, first)
    assert caption.startswith("Kernel alignment A(t), training loss against time, one line per depth L")
    assert caption.endswith(f"{len(plan.study.points)} runs, 2 seeds per point.")
    table = tmp_path / "t.csv"
    table.write_text("depth,diverged\n2,0\n3,0\n4,0\n")
    index = study_index(plan, figures, table)
    assert f"![{first}](figures/{first}.png)" in index and f"![{second}](figures/{second}.png)" in index
    assert f"Reproduces: {spec.reproduces}." in index and caption in index
    assert "- axes 0: legend covers data ('a')" in index  # the checker's defects, read from the PNG
    assert "[`t.csv`](t.csv): 3 rows" in index


def test_checker_flags_a_colour_bar_replacing_a_legend():
    """Five targets (categories) drawn in a viridis ramp with a colour bar and no legend
    (two_layer_components/digits_output3, eigenfunction_tasks/training_curves before the fix): the
    checker asks for a legend; the time-series figure of many σ values keeps its colour bar unflagged."""
    import matplotlib

    fig, axes = new_figure(1, 1)
    t = np.linspace(0.0, 1.0, 20)
    for k in range(5):
        axes[0, 0].plot(t, t * (k + 1), color=matplotlib.colormaps["viridis"](k / 4))
    fig.colorbar(matplotlib.cm.ScalarMappable(cmap="viridis"), ax=axes, label="target")
    finish_figure(fig, "outputs per target")
    assert any("colour bar tells 5 unlabelled line colours apart" in d for d in figure_defects(fig))
    make, settings = FIGURES["time_series_colour_bar"]
    assert not [d for d in figure_defects(drawn(make(), settings)) if "colour bar" in d]


def test_checker_finds_texts_over_each_other():
    """A legend drawn over the axes title and a note under the legend are flagged; the same figure
    with its legend moved clear of both is not."""
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    ax.plot([0, 1], [0, 1], label="network")
    ax.set_title("final alignment")
    legend = ax.legend(loc="lower center", bbox_to_anchor=(0.5, 0.97))  # straddles the title
    note = ax.text(0.5, 1.02, "2 of 20 runs diverged", transform=ax.transAxes, ha="center")
    defects = [d for d in figure_defects(fig) if "overlap" in d]
    assert any("the legend ('network', …)" in d and "'final alignment'" in d for d in defects)
    assert any("the legend" in d and "'2 of 20 runs diverged'" in d for d in defects)
    legend.remove()
    note.remove()
    ax.legend(loc="lower right")
    assert [d for d in figure_defects(fig) if "overlap" in d] == []
