"""Figure kinds rendered from synthetic study datasets: what is drawn equals the data."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from ntkpipe.plots import PLOTTERS
from ntkpipe.plots.style import save
from ntkpipe.spec.schema import MatrixFigure

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
