"""Figure kinds rendered from synthetic study datasets: what is drawn equals the data, and the
figure checks (``plots.checks``) find each defect they name and none in any figure kind."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from pydantic import TypeAdapter

from ntkpipe.plots import PLOTTERS
from ntkpipe.plots.checks import draw, drawn_tick_labels, figure_defects, line_style
from ntkpipe.plots.finish import (finish_figure, integer_ticks, separate_coincident_lines, thin_tick_labels,
                                  wrap_to)
from ntkpipe.plots.style import new_figure, save
from ntkpipe.spec.schema import FigureSpec, MatrixFigure, StudySpec
from ntkpipe.spec.titles import figure_title

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
    separate_coincident_lines(ax)
    synthetic, digits, other = ax.get_lines()
    assert digits.get_marker() == "s" and digits.get_fillstyle() == "none"
    assert synthetic._unscaled_dash_pattern == (0.0, (3.0, 3.0))
    assert digits._unscaled_dash_pattern == (3.0, (3.0, 3.0))  # the colours alternate along the line
    assert other.get_linestyle() == "-" and other.get_marker() == "o"
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
    "images": (images_dataset, {"kind": "images", "variable": "nad_directions", "rows": "architecture"}),
}


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
