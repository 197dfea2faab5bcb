"""Figure kinds rendered from synthetic study datasets: what is drawn equals the data, and the
figure checks (``plots.checks``) find each defect they name and none in any figure kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from pydantic import TypeAdapter

from ntkpipe.errors import SpecError
from ntkpipe.jobs.aggregate import aggregate_study
from ntkpipe.jobs.plot import draw_figure, plot_figure
from ntkpipe.jobs.worker_processes import use_worker_processes
from ntkpipe.labels import coordinate_names
from ntkpipe.lang.schema import FigureSpec, MatrixFigure, StudySpec
from ntkpipe.lang.titles import figure_title
from ntkpipe.measure.registry import VARIABLES
from ntkpipe.plots import PLOTTERS
from ntkpipe.plots.checks import EMPTY_PANEL, draw, drawn_tick_labels, figure_defects, legends, line_style
from ntkpipe.plots.finish import finish_figure, integer_ticks, separate_coincident_lines, thin_tick_labels, wrap_to
from ntkpipe.plots.mathtext import as_math
from ntkpipe.plots.style import hue_label, new_figure, save
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from tests.conftest import run_study_jobs, warnings_as_errors

SIGMAS = [0.5, 1.0]


def ksm_dataset() -> xr.Dataset:
    """``ksm`` over sweep axes (sigma, seed) and its own dims (output, target): a diagonal that
    grows with σ plus seed noise; ``ksm_t`` the same as a series whose last time is NaN for seed 0."""
    rng = np.random.default_rng(0)
    base = np.stack([0.2 + s * np.eye(3, 4) for s in SIGMAS])[:, None]  # (sigma, 1, output, target)
    ksm = base + 0.05 * rng.standard_normal((2, 3, 3, 4))
    coords = {"sigma": SIGMAS, "seed": [0, 1, 2], "output": [0, 1, 2], "target": [0, 1, 2, 3]}
    series = np.stack([np.zeros_like(ksm), ksm, np.full_like(ksm, 9.0)], axis=2)  # (sigma, seed, time, o, t)
    series[:, 0, 2] = np.nan
    series[:, 1:, 2] = ksm[:, 1:]
    return xr.Dataset({"ksm": (("sigma", "seed", "output", "target"), ksm),
                       "ksm_t": (("sigma", "seed", "time", "output", "target"), series)},
                      coords={**coords, "time": [0.0, 1.0, 2.0]})


def gram_dataset() -> xr.Dataset:
    """Final NTK Grams K = c_L[(L − 1)yyᵀ + I] (+ noise) over training points μ, ν and their theory
    (no noise) for depths 2, 3 on 30 points of one case and 40 of another: the union NaN-pads the
    first case's Grams to 40 × 40, as aggregation does."""
    rng = np.random.default_rng(3)
    gram = np.full((2, 2, 40, 40), np.nan)
    theory = np.full_like(gram, np.nan)
    for c, p in enumerate((30, 40)):
        y = rng.standard_normal(p)
        for i, depth in enumerate((2, 3)):
            theory[c, i, :p, :p] = (depth - 1) * np.outer(y, y) + np.eye(p)
            gram[c, i, :p, :p] = theory[c, i, :p, :p] + 0.01 * rng.standard_normal((p, p))
    dims = ("dataset", "depth", "train_point", "train_point_nu")
    return xr.Dataset({"final_ntk_gram": (dims, gram), "final_ntk_gram_theory": (dims, theory)},
                      coords={"dataset": ["synthetic", "digits"], "depth": [2, 3],
                              "train_point": np.arange(1, 41), "train_point_nu": np.arange(1, 41)})


GRAM = {"kind": "matrix", "variable": "final_ntk_gram", "theory": "final_ntk_gram_theory", "col": "depth",
        "where": {"dataset": "synthetic"}}


def test_a_gram_and_its_theory_are_drawn_on_one_scale_without_numbers_in_cells():
    """Silent-alignment Fig. E.3b: one panel per depth for the Gram and one under it for its theory,
    cropped to the case's 30 points (its NaN padding left out), one colour scale and bar for all six,
    no per-cell numbers for a 30 × 30 matrix, ticks at round point indices, display names."""
    ds = gram_dataset()
    fig = PLOTTERS["matrix"](ds, matrix_figure(**GRAM), "Final NTK Gram (one colour scale)")
    assert figure_defects(fig) == []
    *panels, colorbar = fig.axes
    assert len(panels) == 4
    sub = ds.sel(dataset="synthetic").isel(train_point=slice(0, 30), train_point_nu=slice(0, 30))
    lo = min(float(sub[v].min()) for v in ("final_ntk_gram", "final_ntk_gram_theory"))
    hi = max(float(sub[v].max()) for v in ("final_ntk_gram", "final_ntk_gram_theory"))
    for k, ax in enumerate(panels):
        name, depth = ("final_ntk_gram", "final_ntk_gram_theory")[k // 2], (2, 3)[k % 2]
        image = ax.get_images()[0]
        np.testing.assert_array_equal(image.get_array(), sub[name].sel(depth=depth).values)
        assert (image.norm.vmin, image.norm.vmax) == pytest.approx((lo, hi))
        assert not ax.texts  # no numbers in 900 cells
        assert ax.get_title() == as_math(f"L = {depth}\n{VARIABLES[name].label}")
        assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "30"]
        assert ax.get_ylabel() == "training point μ"
    assert [ax.get_xlabel() for ax in panels] == ["", "", "training point ν", "training point ν"]
    assert colorbar.get_ylabel() == as_math("final NTK K(x_μ, x_ν)\n(scale shared with K∞(x_μ, x_ν) theory)")


def texts_inside(fig) -> None:
    """Every drawn text lies within the figure: titles, axis and tick labels, annotations, colour bar.

    (Axes' tight boxes cover only the ticks they draw; stale ticks outside the view are skipped.)"""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox.padded(1)
    drawn = [ax.get_tightbbox(renderer) for ax in fig.axes]
    drawn += [t.get_window_extent(renderer) for t in fig.texts + [t for ax in fig.axes for t in ax.texts]]
    assert fig.texts and all(box.containsx(b.x0) and box.containsx(b.x1) and box.containsy(b.y0)
                             and box.containsy(b.y1) for b in drawn)


def cell_values(ax, shape) -> np.ndarray:
    """The annotated numbers of a heatmap panel, placed at their (row, column)."""
    out = np.full(shape, np.nan)
    for text in ax.texts:
        j, i = text.get_position()
        out[round(i), round(j)] = float(text.get_text())
    return out


def matrix_figure(**kw) -> MatrixFigure:
    return MatrixFigure.model_validate({"name": "ksm", "kind": "matrix", "variable": "ksm", **kw})


def test_matrix_panels_show_the_seed_mean_of_each_cell(tmp_path):
    ds = ksm_dataset()
    fig = PLOTTERS["matrix"](ds, matrix_figure(col="sigma"), "kernel specialization matrix")
    path = save(fig, tmp_path / "ksm.png")
    assert path.exists() and path.stat().st_size > 0
    texts_inside(fig)
    panels, colorbar = fig.axes[:2], fig.axes[2:]
    assert len(fig.axes) == 3 and len(colorbar) == 1  # one shared colour bar
    for ax, sigma in zip(panels, SIGMAS):
        expected = ds["ksm"].sel(sigma=sigma).mean("seed").values
        np.testing.assert_array_equal(cell_values(ax, (3, 4)), np.round(expected, 2))
        assert ax.get_title() == f"σ = {sigma:g}"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2"]
        assert ax.get_xlabel() == "target" and ax.get_ylabel() == "output"
        image = ax.get_images()[0]
        np.testing.assert_allclose(image.get_array(), expected)
        assert image.norm.vmin == pytest.approx(float(ds["ksm"].mean("seed").min()))  # one scale for all
        assert image.norm.vmax == pytest.approx(float(ds["ksm"].mean("seed").max()))
    colors = {t.get_text(): t.get_color() for t in panels[1].texts}
    high = f"{ds['ksm'].sel(sigma=1.0).mean('seed').values.max():.2f}"
    low = f"{ds['ksm'].sel(sigma=0.5).mean('seed').values.min():.2f}"
    assert colors[high] == "black"  # light (yellow) cell
    assert {t.get_text(): t.get_color() for t in panels[0].texts}[low] == "white"  # dark (purple) cell


def test_matrix_where_selects_and_a_series_is_taken_at_its_last_finite_time(tmp_path):
    ds = ksm_dataset()
    fig = PLOTTERS["matrix"](ds, matrix_figure(variable="ksm_t", where={"sigma": 1.0}), "ksm at the end")
    save(fig, tmp_path / "ksm_t.png")
    texts_inside(fig)
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == ""
    expected = ds["ksm"].sel(sigma=1.0).mean("seed").values  # seed 0 ends at time 1, the others at time 2
    np.testing.assert_array_equal(cell_values(fig.axes[0], (3, 4)), np.round(expected, 2))


# --- figure checks: the checker finds each defect; every figure kind is drawn without any --------

def bad_figure(width: float = 4.0, height: float = 3.0):
    """A plain matplotlib figure without ntkpipe's clean-up (the defects are made by hand)."""
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return fig, fig.subplots()


def drawn_labels(axis) -> list[str]:
    """The tick labels the last drawing showed, along the axis."""
    return [text.get_text() for _, text in sorted(drawn_tick_labels(axis), key=lambda item: item[0])]


def test_checker_finds_a_clipped_title():
    fig, ax = bad_figure()
    ax.plot([0.0, 0.5], [0.0, 0.5])
    fig.suptitle("A title far too long to fit on this small figure, which clips it at both edges")
    defects = figure_defects(fig)
    assert len(defects) == 1
    assert defects[0].startswith("text 'A title far too long to fit on this small figure, which c...' extends "
                                 "beyond the figure (left by ")
    assert "right by" in defects[0]
    wrap_to(fig.texts[0], fig.bbox.width - 16, draw(fig))  # the clean-up wraps it
    assert figure_defects(fig) == []


def test_checker_finds_overlapping_tick_labels():
    fig, ax = bad_figure()
    ax.plot([0.03, 0.045], [0.2, 0.9])
    ax.set_xticks([0.03, 0.031, 0.04], ["3×10⁻²", "3.1×10⁻²", "4×10⁻²"])
    assert figure_defects(fig) == ["axes 0: x tick labels '3×10⁻²' and '3.1×10⁻²' overlap"]
    assert thin_tick_labels(fig, draw(fig))  # the clean-up leaves the second label out
    assert figure_defects(fig) == []
    assert drawn_labels(ax.xaxis) == ["3×10⁻²", "4×10⁻²"]


def test_checker_finds_fractional_ticks_on_an_integer_axis():
    fig, ax = bad_figure()
    ax.plot([2, 3, 4], [2.0, 3.0, 3.9])
    ax.set_xlabel("depth L")
    assert figure_defects(fig) == ["axes 0: x axis plots integers (depth L) but has ticks at 2.5, 3.5"]
    integer_ticks(ax)
    assert figure_defects(fig) == []
    assert drawn_labels(ax.xaxis) == ["2", "3", "4"]


def test_checker_finds_a_line_hidden_under_another():
    fig, ax = bad_figure()
    ax.plot([2, 3, 4], [2.0, 3.0, 4.0], "o-", label="synthetic")
    ax.plot([2, 3, 4], [2.0, 3.0, 4.0 + 1e-4], "o-", label="digits")  # within a pixel
    ax.plot([2, 3, 4], [2.0, 3.5, 4.0], "o-", label="other")  # differs: not hidden
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    hidden = "axes 0: line 'synthetic' is hidden under 'digits' (same points, same style and marker)"
    assert figure_defects(fig) == [hidden]
    assert separate_coincident_lines(ax) == ["synthetic, digits coincide"]
    synthetic, digits, other = ax.get_lines()
    assert digits.get_marker() == "s" and digits.get_fillstyle() == "none"
    assert [line.get_linestyle() for line in (synthetic, digits, other)] == ["-"] * 3  # dashes mean theory
    assert synthetic.get_marker() == other.get_marker() == "o"
    assert figure_defects(fig) == []


def test_checker_finds_a_legend_over_data():
    fig, ax = bad_figure()
    x = np.linspace(0.0, 1.0, 50)
    ax.plot(x, x, label="rising")
    ax.plot(x, 1.0 - x, label="falling")
    ax.legend(loc="center")
    assert figure_defects(fig) == ["axes 0: legend covers data ('rising', 'falling')"]
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.set_layout_engine("constrained")
    assert figure_defects(fig) == []


def test_finish_moves_a_legend_that_covers_data_outside_and_widens_the_figure():
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    x = np.linspace(0.0, 1.0, 40)
    for k in range(8):  # lines through every region of the axes: no inside place is free
        ax.plot(x, (x * (k + 1) * 7.3) % 1.0, label=f"line {k}")
    width = fig.get_figwidth()
    finish_figure(fig, "crowded")
    assert ax.get_legend() is None  # legends only where asked
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    for k in range(8):
        ax.plot(x, (x * (k + 1) * 7.3) % 1.0, label=f"line {k}")
    finish_figure(fig, "crowded", [ax])
    renderer = draw(fig)
    assert ax.get_legend().get_window_extent(renderer).x0 > ax.get_window_extent(renderer).x1
    assert fig.get_figwidth() > width
    assert figure_defects(fig) == []


def sweep_dataset() -> xr.Dataset:
    """Two hues with identical data (the final NTK ratio of synthetic and digits, theory L) over
    integer depths, and a σ sweep of 12 values over less than a decade (log x, a tick labelled at
    each swept value: too close to all show)."""
    depth = np.array([2, 3, 4])
    ratio = np.broadcast_to(depth[:, None, None], (3, 2, 2)).astype(float) - 0.01 * (depth[:, None, None] == 4)
    sigma = np.geomspace(0.021, 0.09, 12)
    rng = np.random.default_rng(1)
    t_half = -2.0 * np.log(sigma)[:, None] + 0.01 * rng.standard_normal((12, 2))
    return xr.Dataset({"final_ntk_ratio": (("depth", "dataset", "seed"), ratio),
                       "final_ntk_ratio_theory": (("depth", "dataset", "seed"), np.broadcast_to(depth[:, None, None],
                                                                                               (3, 2, 2)).astype(float)),
                       "t_half": (("sigma", "seed"), t_half), "t_half_theory": (("sigma", "seed"), t_half + 0.05)},
                      coords={"depth": depth, "dataset": ["synthetic", "digits"], "seed": [0, 1], "sigma": sigma})


def series_dataset() -> xr.Dataset:
    """Loss and alignment over time for 2 (identical) and 8 σ values."""
    time = np.geomspace(0.01, 100.0, 60)
    sigma = np.geomspace(0.01, 0.3, 8)
    loss = 0.5 / (1.0 + (time[None, :] * sigma[:, None] * 10) ** 2)
    alignment = np.broadcast_to(np.tanh(time), (8, 60))  # the same curve at every σ
    return xr.Dataset({"loss": (("sigma", "time"), loss), "alignment": (("sigma", "time"), alignment.copy())},
                      coords={"sigma": sigma, "time": time})


def scatter_dataset() -> xr.Dataset:
    rng = np.random.default_rng(2)
    net = rng.standard_normal((2, 30))
    return xr.Dataset({"prediction_network": (("dataset", "test_point"), net),
                       "prediction_final_ntk": (("dataset", "test_point"), net + 0.05 * rng.standard_normal((2, 30))),
                       "prediction_init_ntk": (("dataset", "test_point"), 0.3 * net + 0.5 * rng.standard_normal((2, 30)))},
                      coords={"dataset": ["digits", "synthetic"]})


def images_dataset() -> xr.Dataset:
    rng = np.random.default_rng(3)
    return xr.Dataset({"nad_directions": (("architecture", "nad", "row", "column", "channel"),
                                          rng.standard_normal((2, 10, 8, 8, 1)))},
                      coords={"architecture": ["lenet", "mlp"]})


def phases_dataset() -> xr.Dataset:
    """A measured_phase summary over task × scaling (grid layout): one phase that disagrees, one group
    whose runs all diverged (no fit), one exponent with a zero standard error (lazy training)."""
    scalings = ["ntk_fixed_lr", "mean_field_stable_lr", "kaiming_fixed_lr", "lazy_corollary2"]
    measured = [["kernel", "learning", "unstable", "learning"], ["kernel", "kernel", "unstable", "learning"]]
    predicted = [["kernel", "learning", "unstable", "learning"]] * 2
    b = [[-1.01, 0.015, np.nan, -9e-17], [-0.88, -0.5, np.nan, 2e-16]]
    s = [[0.056, 0.025, np.nan, 7e-18], [0.03, 0.1, np.nan, 8e-17]]
    p = [[-1.0, 0.0, -2.0, 0.0]] * 2
    dims = ("task", "scaling")
    return xr.Dataset({"measured_phase": (dims, measured), "predicted_phase": (dims, predicted),
                       "measured_phase_exponent": (dims, b), "measured_phase_exponent_stderr": (dims, s),
                       "measured_phase_predicted_exponent": (dims, p), "diverged": (dims, [[0, 0, 1, 0]] * 2),
                       "run_id": (dims, [["a", "b", "c", "d"], ["e", "f", "g", "h"]])},
                      coords={"task": ["linear", "digits"], "scaling": scalings})


PHASES = {"kind": "phases", "measured": "measured_phase", "predicted": "predicted_phase", "rows": "scaling",
          "col": "task"}


FIGURES = {  # every figure kind, with data that made the old figures defective
    "sweep_coincident_integer_depth": (sweep_dataset, {"kind": "sweep", "x": "depth", "y": "final_ntk_ratio",
                                                       "hue": "dataset", "theory": "final_ntk_ratio_theory"}),
    "sweep_log_law_narrow_log_x": (sweep_dataset, {"kind": "sweep", "x": "sigma", "y": "t_half", "fit": "log_law",
                                                   "theory": "t_half_theory", "logx": True}),
    "time_series_coincident_hues": (series_dataset, {"kind": "time_series", "variables": ["alignment", "loss"],
                                                     "hue": "sigma", "where": {"sigma": [0.01, 0.3]},
                                                     "logy": ["loss"]}),
    "time_series_colour_bar": (series_dataset, {"kind": "time_series", "variables": ["loss"], "hue": "sigma",
                                                "logy": ["loss"]}),
    "scatter": (scatter_dataset, {"kind": "scatter", "x": "prediction_network", "col": "dataset",
                                  "y": ["prediction_final_ntk", "prediction_init_ntk"]}),
    "matrix": (ksm_dataset, {"kind": "matrix", "variable": "ksm", "col": "sigma"}),
    "matrix_gram_theory": (gram_dataset, GRAM),
    "images": (images_dataset, {"kind": "images", "variable": "nad_directions", "rows": "architecture"}),
    "phases": (phases_dataset, PHASES),
}


def test_phases_figure_names_each_phase_and_marks_disagreement():
    """Solvable-model Table 1 as a figure: per task a panel, per scaling a row; the fitted exponent
    ± 2 s.e. in the measured phase's colour, the predicted exponent dashed, the phases on the right
    axis (✗ in red where they disagree), and how many agree in each title."""
    fig = PLOTTERS["phases"](phases_dataset(), TypeAdapter(FigureSpec).validate_python({"name": "p", **PHASES}), "t")
    assert figure_defects(fig) == []
    linear, digits = (ax for ax in fig.axes if ax.get_title())
    assert "agree in 4 of 4" in linear.get_title() and "agree in 3 of 4" in digits.get_title()
    right = [ax for ax in fig.axes if ax.get_ylabel() == "predicted / measured phase"][1]
    labels = right.get_yticklabels()
    assert labels[1].get_text() == "learning / kernel ✗" and labels[1].get_color() == "tab:red"
    assert labels[0].get_text() == "kernel / kernel ✓"
    (dot,) = [line for line in digits.get_lines() if line.get_marker() == "o" and line.get_ydata()[0] == 1]
    assert dot.get_xdata()[0] == -0.5 and dot.get_color() == "tab:blue"  # measured kernel
    assert any("no fit" in t.get_text() for t in digits.texts)  # kaiming fixed lr: every run diverged


def test_every_figure_kind_is_checked():
    assert {spec["kind"] for _, spec in FIGURES.values()} == set(PLOTTERS)


@pytest.mark.parametrize("case", FIGURES)
def test_figure_kind_has_no_defects(case):
    make, settings = FIGURES[case]
    spec = TypeAdapter(FigureSpec).validate_python({"name": case, **settings})
    # wide capitals and symbols: the old estimate of 0.6 em per character clipped this title
    title = ("KSM(c, d) AFTER TRAINING: MEASURED ‖K‖ OF THE RELU AND LINEAR NETWORKS WITH WHITENED INPUTS\n"
             "(Silent alignment Fig. 3)")
    fig = PLOTTERS[spec.kind](make(), spec, title)
    assert figure_defects(fig) == []
    assert fig.texts[0].get_text().replace("\n", " ") == title.replace("\n", " ")


def test_sweep_fixes_the_shipped_defects():
    """deep_linear_final/final_ntk_ratio: integer depth ticks, both datasets visible; the log-law
    legend names the axis (two_layer_dynamics/t_half_vs_sigma)."""
    make, settings = FIGURES["sweep_coincident_integer_depth"]
    fig = PLOTTERS["sweep"](make(), TypeAdapter(FigureSpec).validate_python({"name": "r", **settings}), "ratio")
    ax = fig.axes[0]
    draw(fig)
    assert drawn_labels(ax.xaxis) == ["2", "3", "4"]
    synthetic, digits = (line for line in ax.get_lines() if line.get_label() in ("synthetic", "digits"))
    assert line_style(synthetic) != line_style(digits)
    make, settings = FIGURES["sweep_log_law_narrow_log_x"]
    fig = PLOTTERS["sweep"](make(), TypeAdapter(FigureSpec).validate_python({"name": "t", **settings}), "t½")
    (label,) = [t.get_text() for t in fig.axes[0].get_legend().get_texts() if "slope" in t.get_text()]
    ds = make()
    x, y = xr.broadcast(np.log(ds["sigma"]), ds["t_half"])
    slope = np.polyfit(x.values.ravel(), y.values.ravel(), 1)[0]  # t½ = a + slope · ln σ
    assert label.startswith(f"t½ (slope in ln σ {slope:.2f} ± ")


def test_figure_title_comes_from_the_spec_and_names_the_paper_figure():
    study = StudySpec.model_construct(description="Depth scaling of t½")  # only the description is read
    figure = TypeAdapter(FigureSpec).validate_python({"name": "t_half_vs_sigma", "kind": "sweep", "x": "sigma",
                                                      "y": "t_half"})
    assert figure_title(study, figure) == "Depth scaling of t½"
    figure = figure.model_copy(update={"title": "Half-loss time", "reproduces": "Silent alignment Fig. 3"})
    assert figure_title(study, figure) == "Half-loss time\n(Silent alignment Fig. 3)"


def test_every_shipped_figure_has_a_title_and_the_paper_figure_it_reproduces(repo):
    for path in sorted((repo / "specs").glob("*.yaml")):
        for fig in yaml.safe_load(path.read_text())["figures"]:
            assert fig.get("title") and fig.get("reproduces"), f"{path.name}: figure {fig['name']}"


# --- studies without a sweep, diverged runs, values a log axis cannot show ------------------------

SIGMAS3 = [0.5, 1.0, 2.0]


def single_run_datasets() -> dict[str, tuple[xr.Dataset, dict]]:
    """One run (no sweep axis) for every figure kind, as the aggregation writes a study without a sweep."""
    rng = np.random.default_rng(4)
    time = np.geomspace(0.01, 10.0, 12)
    one = {"diverged": 0, "run_id": "r0"}
    return {
        "sweep": (xr.Dataset({"input_spectrum": ("spectrum_index", [4.0, 1.0, 0.25]), **one},
                             coords={"spectrum_index": [1, 2, 3]}),
                  {"kind": "sweep", "x": "spectrum_index", "y": "input_spectrum", "logy": True}),
        "time_series": (xr.Dataset({"loss": ("time", 1.0 / (1.0 + time)), "alignment": ("time", np.tanh(time)), **one},
                                   coords={"time": time}),
                        {"kind": "time_series", "variables": ["loss", "alignment"], "logy": ["loss"]}),
        "scatter": (xr.Dataset({"prediction_network": ("test_point", rng.standard_normal(20)),
                                "prediction_final_ntk": ("test_point", rng.standard_normal(20)), **one}),
                    {"kind": "scatter", "x": "prediction_network", "y": ["prediction_final_ntk"]}),
        "matrix": (xr.Dataset({"ksm": (("output", "target"), rng.random((3, 3))), **one},
                              coords={"output": [0, 1, 2], "target": [0, 1, 2]}),
                   {"kind": "matrix", "variable": "ksm"}),
        "images": (xr.Dataset({"nad_directions": (("nad", "row", "column", "channel"),
                                                  rng.standard_normal((4, 6, 6, 1))), **one}),
                   {"kind": "images", "variable": "nad_directions", "count": 4}),
        "phases": (xr.Dataset({"measured_phase": "kernel", "predicted_phase": "kernel", "measured_phase_exponent": -1.0,
                               "measured_phase_exponent_stderr": 0.05, "measured_phase_predicted_exponent": -1.0, **one}),
                   {"kind": "phases", "measured": "measured_phase", "predicted": "predicted_phase", "rows": "scaling"}),
    }


def figure_spec(name: str, settings: dict):
    return TypeAdapter(FigureSpec).validate_python({"name": name, **settings})


def draw_quietly(ds: xr.Dataset, spec, title: str = "a study"):
    """The figure of ``spec``, every warning (matplotlib's, numpy's) raised as an error."""
    with warnings_as_errors():
        fig = PLOTTERS[spec.kind](ds, spec, title)
        draw(fig)
    return fig


def empty_texts(fig) -> list[str]:
    return [" ".join(t.get_text().split()) for ax in fig.axes for t in ax.texts if t.get_gid() == EMPTY_PANEL]


def test_every_figure_kind_draws_a_study_without_a_sweep(tmp_path):
    cases = single_run_datasets()
    assert {settings["kind"] for _, settings in cases.values()} == set(PLOTTERS)
    for kind, (ds, settings) in cases.items():
        fig = draw_quietly(ds, figure_spec(kind, settings))
        assert figure_defects(fig) == [] and empty_texts(fig) == [], kind
        assert save(fig, tmp_path / f"{kind}.png").stat().st_size > 0
    ds, settings = cases["sweep"]
    lines = draw_quietly(ds, figure_spec("s", settings)).axes[0].get_lines()
    (line,) = [line for line in lines if line.get_marker() == "o"]
    np.testing.assert_array_equal(line.get_xydata(), [[1, 4.0], [2, 1.0], [3, 0.25]])
    ds, settings = cases["time_series"]
    loss_panel = draw_quietly(ds, figure_spec("t", settings)).axes[0]
    np.testing.assert_array_equal(loss_panel.get_lines()[0].get_ydata(), ds["loss"].values)


def diverged_datasets() -> dict[str, tuple[xr.Dataset, dict]]:
    """Every figure kind of a σ sweep whose 3 runs all diverged (every measurement NaN)."""
    out = {}
    for kind, (ds, settings) in single_run_datasets().items():
        ds = ds.expand_dims(sigma=SIGMAS3).copy(deep=True)
        ds["diverged"] = ("sigma", [1, 1, 1])
        ds["run_id"] = ("sigma", ["a", "b", "c"])
        for name, var in ds.data_vars.items():
            if var.dtype.kind == "f":
                ds[name] = var.where(False)
        out[kind] = (ds, settings)
    ds, settings = out["sweep"]
    ds["t_half"] = ds["diverged"] * np.nan
    out["sweep_sigma"] = (ds, {"kind": "sweep", "x": "sigma", "y": "t_half", "theory": "t_half",
                               "logx": True, "logy": True})
    out["time_series_col"] = (out["time_series"][0], {**out["time_series"][1], "col": "sigma"})
    out["scatter"] = (out["scatter"][0], {**out["scatter"][1], "col": "sigma"})
    out["images"] = (out["images"][0], {**out["images"][1], "rows": "sigma"})
    out["sweep"] = (out["sweep"][0], {**out["sweep"][1], "hue": "sigma", "logx": True})
    return out


@pytest.mark.parametrize("case", list(diverged_datasets()))
def test_every_figure_kind_says_why_it_is_empty_when_every_run_diverged(case, tmp_path):
    ds, settings = diverged_datasets()[case]
    fig = draw_quietly(ds, figure_spec(case, settings))
    assert save(fig, tmp_path / f"{case}.png").stat().st_size > 0
    assert figure_defects(fig) == []
    log = settings["kind"] in ("sweep", "time_series")
    what = "no finite positive values to draw on a log axis" if log else "no finite values to draw"
    per_panel = settings.get("col") or (settings["kind"] == "images" and settings.get("rows"))
    expected = ([f"{what} (1 of 1 runs diverged)"] * 3 if per_panel  # the panel's title names its σ
                else [f"{what} (3 of 3 runs diverged: σ=0.5; σ=1; σ=2)"])
    panels = {"time_series": 2, "time_series_col": 2}.get(case, 1)  # a text in each (loss, alignment) row
    assert sorted(empty_texts(fig)) == sorted(expected * panels)


def test_values_a_log_axis_cannot_show_are_left_out_without_warnings(tmp_path):
    """A sweep with some means ≤ 0 and a loss that reaches 0 at time 0 (log time axis) and below:
    the lines keep exactly the positive points, nothing warns, the figures are written."""
    x = np.array([0.0, 0.5, 1.0, 2.0])
    y = np.array([[-1.0, 0.5], [0.2, 0.4], [1.0, -2.0], [3.0, 0.0]])  # means -0.25, 0.3, -0.5, 1.5
    time = np.array([0.0, 0.1, 1.0, 10.0])
    ds = xr.Dataset({"t_half": (("gamma", "seed"), y), "loss": ("time", [1.0, 0.0, -0.5, 0.2])},
                    coords={"gamma": x, "seed": [0, 1], "time": time})
    fig = draw_quietly(ds, figure_spec("s", {"kind": "sweep", "x": "gamma", "y": "t_half", "logx": True, "logy": True}))
    (mean,) = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose(mean.get_xydata(), [[0.5, 0.3], [2.0, 1.5]])
    runs = [line for line in fig.axes[0].get_lines() if line.get_marker() == "."][0]
    np.testing.assert_allclose(runs.get_xydata(), [[0.5, 0.2], [0.5, 0.4], [1.0, 1.0], [2.0, 3.0]])
    save(fig, tmp_path / "sweep.png")
    fig = draw_quietly(ds, figure_spec("t", {"kind": "time_series", "variables": ["loss"], "logy": ["loss"]}))
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_xydata(), [[10.0, 0.2]])
    assert figure_defects(fig) == [] and empty_texts(fig) == []
    save(fig, tmp_path / "series.png")


DIVERGING = """\
data: {source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}
model: {depth: 2, width: 8, activation: linear, sigma: 0.5}
train: {optimizer: {name: gd, lr: 1000.0}, max_time: 2000, checkpoints: {per_decade: 2}}
measure: [loss, alignment, t_half, t_half_theory]
sweep:
  union:
    - {depth: [2], sigma: [0.5, 1.0]}
    - {depth: [3], sigma: [0.5]}
figures:
  - {name: t_half, kind: sweep, x: sigma, y: t_half, hue: depth, theory: t_half_theory, logx: true, logy: true}
  - {name: curves, kind: time_series, variables: [loss, alignment], hue: sigma, col: depth, logy: [loss]}
"""


def test_a_study_whose_every_run_diverged_draws_its_figures(tmp_path):
    """End to end (union sweep, runs layout): the old sweep figure failed with 'Data cannot be
    log-scaled because all values are <= 0'."""
    plan, stores = run_study_jobs(DIVERGING, tmp_path)
    assert all(int(store["diverged"]) for store in stores.values())
    aggregate_study(plan, plan.dataset_path)
    for figure in plan.study.spec.figures:
        with warnings_as_errors():
            path = plot_figure(plan, figure.name, tmp_path / f"{figure.name}.png")
        assert path.stat().st_size > 0
    fig = draw_figure(plan, "t_half")
    assert empty_texts(fig) == ["no finite positive values to draw on a log axis (3 of 3 runs diverged: "
                                "L=2, σ=0.5; L=2, σ=1; L=3, σ=0.5)"]
    fig = draw_figure(plan, "curves")
    assert sorted(empty_texts(fig)) == sorted(
        ["no finite positive values to draw on a log axis (2 of 2 runs diverged: σ=0.5; σ=1)"] * 2
        + ["no finite positive values to draw on a log axis (1 of 1 runs diverged: σ=0.5)"] * 2)


CLASSES = """\
data: {source: digits, classes: [3, 5, 8], n_train: 12, n_test: 3}
model: {depth: 2, width: 8, activation: relu}
train: {optimizer: {name: gd, lr: 0.2}, steps: 10, checkpoints: {per_decade: 2}}
measure: [loss, kernel_specialization, {name: kernel_components, every: 1}]
sweep:
  cases:
    task:
      digits: {}
      mixture: {data: {source: gaussian_mixture, dim: 6, clusters: 3, noise: 0.3, classes: null}}
figures:
  - {name: ksm, kind: matrix, variable: ksm, col: task}
  - {name: digits_kv, kind: time_series, variables: [kv_projection], hue: target, where: {task: digits, output: 2}}
  - {name: mixture_kv, kind: time_series, variables: [kv_projection], hue: target, where: {task: mixture, output: 2}}
"""


def test_outputs_and_targets_of_classes_are_named_by_their_class(tmp_path):
    """Digits 3, 5, 8 (one-hot: output and target c stand for the c-th kept class) are shown as
    digit 3, digit 5, digit 8 -- in the legend of one output's targets (where: {output: 2} leaves
    the other outputs out of the dataset) and on the matrix's ticks --, the Gaussian mixture's
    clusters as numbers (target = 1, …), and a panel mixing both as numbers. The PNGs drawn in worker
    processes are those drawn in the job's thread, byte for byte."""
    plan, _ = run_study_jobs(CLASSES, tmp_path)
    ds = read_store(aggregate_study(plan, plan.dataset_path))
    ids = dict(zip(ds["task"].values.tolist(), ds["run_id"].values.tolist()))
    assert json.loads(ds.attrs["output_classes"]) == {ids["digits"]: ["digit 3", "digit 5", "digit 8"]}
    for name, expected in (("digits_kv", ["digit 3", "digit 5", "digit 8"]),
                           ("mixture_kv", ["target = 1", "target = 2", "target = 3"])):
        fig = draw_figure(plan, name)
        (legend,) = legends(fig)
        assert [t.get_text() for t in legend.get_texts()][:3] == expected
        assert figure_defects(fig) == []
    fig = draw_figure(plan, "ksm")
    digits, mixture = fig.axes[:2]
    assert [t.get_text() for t in digits.get_xticklabels()] == ["digit 3", "digit 5", "digit 8"]
    assert [t.get_text() for t in digits.get_yticklabels()] == ["digit 3", "digit 5", "digit 8"]
    assert [t.get_text() for t in mixture.get_xticklabels()] == ["1", "2", "3"]
    assert figure_defects(fig) == []
    assert coordinate_names(ds, "target", [1, 2, 3]) is None  # both tasks' runs: no common names
    assert coordinate_names(ds.sel(task="digits"), "output", [3]) == ["digit 8"]
    here = {f.name: plot_figure(plan, f.name, tmp_path / "here" / f"{f.name}.png").read_bytes()
            for f in plan.study.spec.figures}
    use_worker_processes(2)  # as a Snakemake process that runs jobs as threads: figures in workers
    try:
        assert {f.name: plot_figure(plan, f.name, tmp_path / "workers" / f"{f.name}.png").read_bytes()
                for f in plan.study.spec.figures} == here
    finally:
        use_worker_processes(0)


# --- one legend for facets; numbers on log axes and in labels -------------------------------------

def faceted_dataset() -> xr.Dataset:
    """Loss and alignment over depth (columns) × lr (hue): each column draws two of the three lr
    values, and one run of each column diverged."""
    time = np.geomspace(0.01, 100.0, 30)
    lr = np.array([0.01, 0.5, 2048.0])
    loss = 0.5 / (1 + time * lr[None, :, None] * np.array([2, 3])[:, None, None])
    loss[0, 2] = np.nan
    loss[1, 0] = np.nan
    return xr.Dataset({"loss": (("depth", "lr", "time"), loss), "alignment": (("depth", "lr", "time"), 1 - loss),
                       "diverged": (("depth", "lr"), [[0, 0, 1], [1, 0, 0]]),
                       "run_id": (("depth", "lr"), [["a", "b", "c"], ["d", "e", "f"]])},
                      coords={"depth": [2, 3], "lr": lr, "time": time})


def test_faceted_time_series_has_one_legend_for_every_facet():
    spec = figure_spec("f", {"kind": "time_series", "variables": ["loss", "alignment"], "hue": "lr", "col": "depth",
                             "logy": ["loss"]})
    fig = draw_quietly(faceted_dataset(), spec)
    (legend,) = legends(fig)
    assert [t.get_text() for t in legend.get_texts()] == [
        "η = 0.01", "η = 0.5", "η = 2048", "L = 2: 1 of 3 runs diverged, not drawn:\nη=2048",
        "L = 3: 1 of 3 runs diverged, not drawn:\nη=0.01"]  # which runs, by their axes' values
    assert figure_defects(fig) == []  # no labelled line missing from it, and it covers no data


def test_checker_finds_a_line_missing_from_the_legends():
    fig = Figure(figsize=(8, 3), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot([0, 1], [0, 1], label="σ = 0.5")
    right.plot([0, 1], [1, 0], label="σ = 1")
    right.legend(loc="lower left")
    assert [d for d in figure_defects(fig) if "legend" in d] == ["axes 0: line 'σ = 0.5' is not in any legend"]


def test_log_ticks_and_hue_labels_write_integers_as_integers():
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    ax.plot([1.0, 2048.0], [1e-6, 1.0])
    ax.set_xscale("log")
    ax.set_yscale("log")
    finish_figure(fig, "ticks")
    draw(fig)
    assert drawn_labels(ax.xaxis) == ["1", "10", "100", "1000"]  # not 10⁰ … 10³, nor 2.05e+03
    assert drawn_labels(ax.yaxis) == ["10⁻⁶", "10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "10⁰"]  # 6 decades
    width = np.array([1, 8, 64, 512, 2048])
    ds = xr.Dataset({"t_half": ("width", 1.0 / width)}, coords={"width": width.astype(float)})
    fig = draw_quietly(ds, figure_spec("w", {"kind": "sweep", "x": "width", "y": "t_half", "logx": True}))
    assert drawn_labels(fig.axes[0].xaxis) == ["1", "8", "64", "512", "2048"]
    ds = xr.Dataset({"t_half": ("act", [1.0, 2.0])}, coords={"act": ["linear", "relu"]})
    fig = draw_quietly(ds, figure_spec("a", {"kind": "sweep", "x": "act", "y": "t_half", "logx": True}))
    assert drawn_labels(fig.axes[0].xaxis) == ["linear", "ReLU"]  # display names; no log scale: both drawn
    assert [hue_label("width", np.float64(2048.0)), hue_label("sigma", 0.25), hue_label("lr", 0.01),
            hue_label("lr", 3e-6), hue_label("lr", 1e-7), hue_label("sigma", 1 / 3)] == [
        "N = 2048", "σ = 0.25", "η = 0.01", "η = 3×10⁻⁶", "η = 10⁻⁷", "σ = 0.333"]


def test_sweep_col_draws_a_panel_per_value_and_marks_x_at_it(tmp_path):
    """kernel_rotation/rotation: one panel per task index j, the gain α_T/α_0 against i with i = j
    marked; a j beyond the measured i says so in its panel's title (Linearized networks Figs. 15–16)."""
    i = np.arange(1, 11)
    gain = np.ones((3, 10)) + (i[None, :] == np.array([2, 5, 50])[:, None])
    ds = xr.Dataset({"rotation": (("eigen_index", "eigenfunction"), gain)},
                    coords={"eigen_index": [2, 5, 50], "eigenfunction": i})
    spec = TypeAdapter(FigureSpec).validate_python({"name": "r", "kind": "sweep", "x": "eigenfunction", "y": "rotation",
                                                    "col": "eigen_index", "mark_col": True})
    fig = PLOTTERS["sweep"](ds, spec, "rotation")
    assert figure_defects(fig) == []
    assert [ax.get_title() for ax in fig.axes] == ["j = 2", "j = 5", "j = 50 (beyond the x range measured)"]
    marks = [[line.get_xdata()[0] for line in ax.get_lines() if line.get_label() == "i = j"] for ax in fig.axes]
    assert marks == [[2.0], [5.0], []]
    path = tmp_path / "s.yaml"
    path.write_text(DIVERGING + "  - {name: t2, kind: sweep, x: sigma, y: t_half, mark_col: true}\n")
    with pytest.raises(SpecError, match="mark_col marks x at each panel's col value: add col"):
        load_study(path)


def test_a_drawn_figure_is_saved_as_drawn_pixel_for_pixel(tmp_path):
    """The plot job saves the canvas it has just drawn (and checked) instead of drawing it again: the PNG is
    savefig's, pixel for pixel, with the same text chunks (non-Latin-1 as iTXt) and resolution."""
    from PIL import Image

    from ntkpipe.plots.checks import draw
    from ntkpipe.plots.style import new_figure, save

    fig, axes = new_figure(1, 2)
    axes[0, 0].plot([1, 2, 3], [3, 1, 2], label="$K_V$")
    axes[0, 1].loglog([1, 10, 100], [1, 0.1, 0.01])
    axes[0, 0].legend()
    fig.suptitle("$\\|K\\|_F$ against time, σ = 0.1")
    draw(fig)
    meta = {"Title": "‖K‖ ✓", "Source": "specs/x.yaml"}
    drawn, again = save(fig, tmp_path / "drawn.png", meta, drawn=True), save(fig, tmp_path / "again.png", meta)
    a, b = Image.open(drawn), Image.open(again)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert {k: a.info[k] for k in ("Title", "Source", "Software", "dpi")} == {k: b.info[k] for k in ("Title", "Source", "Software", "dpi")}


def test_ticks_set_once_per_state_draw_the_same_pixels():
    """``checks.draw`` (its ticks set and tick labels measured once per axis state, ``ticks_once``) draws
    the pixels of matplotlib's own draw -- constrained layout, log axes with labelled minor ticks, shared
    axes, a colour bar, thinned tick labels -- and leaves no memo behind."""
    from ntkpipe.plots.checks import lay_out

    def figure():
        fig, axes = new_figure(2, 2)
        for k, ax in enumerate(axes.ravel()):
            ax.loglog(np.geomspace(0.02 + k, 3.0 + 10 * k, 50), np.geomspace(1e-3, 0.5, 50), label=f"k = {k}")
        axes[0, 0].sharex(axes[1, 0])
        image = axes[1, 1].inset_axes((0.6, 0.1, 0.3, 0.3)).imshow(np.arange(12.0).reshape(3, 4))
        fig.colorbar(image, ax=axes[1, 1])
        axes[0, 1].legend()
        thin_tick_labels(fig, lay_out(fig))
        return fig

    memoized, plain = figure(), figure()
    draw(memoized)
    FigureCanvasAgg(plain).draw()
    np.testing.assert_array_equal(np.asarray(memoized.canvas.buffer_rgba()), np.asarray(plain.canvas.buffer_rgba()))  # pyright: ignore[reportAttributeAccessIssue]  # Agg canvases
    assert not [axis for ax in memoized.axes for axis in (ax.xaxis, ax.yaxis) if "_update_ticks" in vars(axis)]


def test_time_series_change_subtracts_the_initial_value(tmp_path):
    """``normalize: change`` draws value − initial value per hue line (kernel-alignment Fig. 7A: each
    trace the projection on a target with its initial value subtracted), and says so on the axis."""
    time = np.array([0.0, 1.0, 10.0])
    values = np.array([[3.0, 5.0], [4.0, 7.0], [6.0, 8.0]])  # (time, target)
    ds = xr.Dataset({"kv_projection": (("time", "target"), values)}, coords={"time": time, "target": [1, 2]})
    fig = draw_quietly(ds, figure_spec("c", {"kind": "time_series", "variables": ["kv_projection"], "hue": "target",
                                             "normalize": {"kv_projection": "change"}}))
    drawn = [line.get_xydata() for line in fig.axes[0].get_lines() if line.get_linestyle() == "-"]
    np.testing.assert_allclose(drawn[0], [[1.0, 1.0], [10.0, 3.0]])
    np.testing.assert_allclose(drawn[1], [[1.0, 2.0], [10.0, 3.0]])
    assert fig.axes[0].get_ylabel().endswith("− initial")
    assert figure_defects(fig) == []
    save(fig, tmp_path / "change.png")


def test_a_study_dataset_is_loaded_once_until_its_store_is_rewritten(tmp_path):
    """The plot jobs of one process share the dataset they draw from (each a copy of its own), and a
    store written again (renamed into place) is read again."""
    from ntkpipe.jobs.plot import study_dataset
    from ntkpipe.store import write_store

    path = tmp_path / "study.zarr"
    write_store(xr.Dataset({"loss": ("time", [1.0, 0.5])}, coords={"time": [0.0, 1.0]}), path, config={}, store_id="a")
    first = study_dataset(path)
    first["extra"] = first["loss"] * 2
    again = study_dataset(path)
    assert "extra" not in again and np.shares_memory(again["loss"].values, first["loss"].values)
    write_store(xr.Dataset({"loss": ("time", [2.0, 1.0])}, coords={"time": [0.0, 1.0]}), path, config={}, store_id="a")
    assert study_dataset(path)["loss"].values.tolist() == [2.0, 1.0]
