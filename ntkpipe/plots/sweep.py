"""``kind: sweep`` figures: measurements against a sweep axis, one colour per hue value.

Lines are the mean over every other axis (e.g. seeds) with a ±1 sd band, dots the individual runs;
a series measurement is taken at its last finite time. Diverged runs are not drawn (the axes say
how many in the legend), nor are points a log axis cannot show (≤ 0); a figure with nothing to
draw says why in the panel. Several y variables with a hue go to one panel each (train and test
accuracy do not overlap); without a hue they share a panel in colours of their own and differ in
marker. ``col`` gives a column of panels per value of a sweep axis (``mark_col``: a thin grey line at
x = that value, e.g. i = j). One legend for the figure, titled by the hue axis. ``theory`` is drawn dashed in a darker shade of the colour (dashes mean theory, only theory); ``fit``
draws the fitted curve thin over the range fitted and adds its exponent (power law) or slope in ln x
(log law, naming the x axis) with its standard error to the legend -- or why there is no fit.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.ticker import NullFormatter

from ntkpipe.labels import AXIS_SYMBOLS, axis_label, coordinate_names, display_name, variable_label
from ntkpipe.layout import axis_values, final_value, select, sub_grid
from ntkpipe.measure.fits import FITS
from ntkpipe.measure.registry import residual_name
from ntkpipe.plots.checks import FIT, THEORY
from ntkpipe.plots.finish import explain_empty, figure_legend, finish_figure
from ntkpipe.plots.style import (
    darker,
    drawable,
    hue_colors,
    hue_label,
    hue_labels,
    is_numeric,
    new_figure,
    note_diverged,
    number,
    without_diverged,
)

STYLES = [("-", "o"), ("-", "s"), ("-", "^")]  # several y: one marker each (dashes mean theory)


def _positions(values, labels: list) -> np.ndarray:
    """Numeric x values as they are; labels (e.g. ``checkpoint`` = init, end) at their index in ``labels``."""
    if is_numeric(values):
        return np.asarray(values, np.float64)
    return np.array([labels.index(v) for v in values], dtype=np.float64)


def _reduce(var: xr.DataArray, x: str, labels: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x positions, mean and sd over the other dims, and all (x, y) pairs as a (2, n) array."""
    other = [d for d in var.dims if d != x]
    mean = var.mean(other, skipna=True).values if other else var.values
    sd = var.std(other, skipna=True).values if other else np.zeros_like(mean)
    positions = _positions(var[x].values, labels)
    xs = np.broadcast_to(positions.reshape([-1 if d == x else 1 for d in var.dims]), var.shape)
    return positions, mean, sd, np.stack([xs.ravel(), var.values.ravel()])


def plot_sweep(ds: xr.Dataset, spec, title: str):
    reference = sub_grid(ds, spec.reference) if spec.reference else None
    ds = select(ds, spec.where)
    ys = [spec.y] if isinstance(spec.y, str) else list(spec.y)
    hues = axis_values(ds, spec.hue) if spec.hue else [None]
    x_values = axis_values(ds, spec.x)
    panels = [[y] for y in ys] if spec.hue and len(ys) > 1 else [ys]  # colours tell hues apart: y by panel
    cols = axis_values(ds, spec.col) if spec.col else [None]
    grid = (len(panels), len(cols)) if spec.col else (1, len(panels))  # col: a column each, y down the rows
    width = 5.4 if grid == (1, 1) else 4.4 if grid[1] <= 3 else 3.4
    if spec.residual:  # a small panel of the theory's residual under the one panel
        fig, both = new_figure(2, 1, width=width, height=4.1 / 1.35, height_ratios=[1.0, 0.35])
        axes, below = both[:1], both[1, 0]
    else:
        fig, axes = new_figure(*grid, width=width, height=4.1 if grid[0] == 1 else 3.4)
    for j, c in enumerate(cols):
        sub = sub_grid(ds, {spec.col: c}) if spec.col else ds
        for i, names in enumerate(panels):
            ax = axes[i, j] if spec.col else axes[0, i]
            _panel(ax, sub, spec, names, hues, x_values, reference)
            beyond = _mark(ax, c, spec) if spec.mark_col and spec.col else ""
            if spec.col and i == 0:
                ax.set_title(hue_label(spec.col, c) + beyond, fontsize=10)
            explain_empty(ax, sub)
    if spec.residual:
        _residual_panel(below, axes[0, 0], ds, spec, hues, x_values)
    note_diverged(axes[0, -1], ds)
    order = hue_labels(ds, spec.hue, hues) if spec.hue else []
    return finish_figure(fig, title, figure_legend(axes, order, title=axis_label(spec.hue, ds) if spec.hue else None))


def _panel(ax, ds: xr.Dataset, spec, names: list[str], hues: list, x_values: list, reference) -> None:
    """One panel: the variables ``names`` against x, a line (mean ± sd band, dots for runs) per hue."""
    ax.set_xscale("log" if spec.logx and is_numeric(x_values) else "linear")  # labels sit at 0, 1, …
    ax.set_yscale("log" if spec.logy else "linear")
    shown_hue = dict(zip(hues, hue_labels(ds, spec.hue, hues))) if spec.hue else {}
    for color, h in zip(hue_colors(hues), hues):
        sub = sub_grid(ds, {spec.hue: h} if spec.hue else None)
        for (style, marker), name in zip(STYLES, names):
            xv, mean, sd, pairs = _reduce(final_value(without_diverged(sub[name], sub)), spec.x, x_values)
            keep = drawable(ax, xv, mean)
            if not keep.any():
                continue
            parts = [shown_hue[h]] if spec.hue else []
            if len(names) > 1 or not spec.hue:
                parts.append(variable_label(name))
            label = ", ".join(parts)
            if spec.fit:
                label += f" ({_draw_fit(ax, spec.fit, pairs, color, _fit_name(spec.fit, spec.x, ds))})"
            ax.plot(xv[keep], mean[keep], linestyle=style, marker=marker, color=color, label=label, lw=1.6, ms=4)
            ax.fill_between(xv[keep], (mean - sd)[keep], (mean + sd)[keep], color=color, alpha=0.12, lw=0)
            runs = drawable(ax, *pairs)
            ax.plot(pairs[0][runs], pairs[1][runs], ".", color=color, alpha=0.35, ms=3)
        if spec.theory:
            xv, theory, _, _ = _reduce(final_value(sub[spec.theory]), spec.x, x_values)
            ok = drawable(ax, xv, theory)
            ax.plot(xv[ok], theory[ok], "--", color=darker(color), lw=1.6, zorder=3, gid=THEORY)
    if spec.theory:
        ax.plot([], [], "--", color="0.3", label=variable_label(spec.theory), gid=THEORY)
    if reference is not None:
        level = float(final_value(without_diverged(reference[names[0]], reference)).mean(skipna=True))
        shown = ", ".join(hue_label(k, v) for k, v in spec.reference.items())
        if drawable(ax, 1.0, level):
            ax.axhline(level, color="black", lw=1.0, alpha=0.7, label=f"{shown} ({number(level)})")
    if not is_numeric(x_values):
        ax.set_xticks(_positions(x_values, x_values), [display_name(v) for v in x_values])
        ax.set_xmargin(0.15)
    elif (shown_x := coordinate_names(ds, spec.x, x_values)) is not None:  # numbers that stand for something
        ax.set_xticks(_positions(x_values, x_values), shown_x)  # (Stein test vectors: v1, …, random; digits)
        ax.set_xmargin(0.15)
    elif spec.logx and len(x_values) <= 12:  # ticks at the swept values; no crowded minor labels
        shown = [v for v in x_values if v > 0]
        ax.set_xticks(shown, [number(v) for v in shown])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(axis_label(spec.x, ds))
    ax.set_ylabel(spec.ylabel if spec.ylabel and len(names) == len(spec.plotted()) else
                  " / ".join(variable_label(v) for v in names))
    ax.grid(True, which="major", alpha=0.3)


def _residual_panel(ax, above, ds: xr.Dataset, spec, hues: list, x_values: list) -> None:
    """The theory's relative residual (``<theory>_residual``, mean over the other axes) against x,
    one line per hue in its colour, about a grey zero line; the panel above loses its x label."""
    name = residual_name(spec.theory)
    ax.set_xscale(above.get_xscale())
    ax.axhline(0.0, color="0.6", lw=0.8, zorder=1)
    for color, h in zip(hue_colors(hues), hues):
        sub = sub_grid(ds, {spec.hue: h} if spec.hue else None)
        if name not in sub:
            continue
        xv, mean, _, _ = _reduce(final_value(without_diverged(sub[name], sub)), spec.x, x_values)
        keep = drawable(ax, xv, mean)
        ax.plot(xv[keep], mean[keep], "-", marker="o", color=color, lw=1.2, ms=3)
    ax.set_xlim(above.get_xlim())
    ax.set_xticks(above.get_xticks(), [t.get_text() for t in above.get_xticklabels()])
    ax.set_xlim(above.get_xlim())
    ax.set_xlabel(above.get_xlabel())
    above.set_xlabel("")
    ax.set_ylabel("residual", fontsize=9)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    ax.grid(True, alpha=0.3)
    ax.set_title("relative residual (theory − measured) / |measured|", fontsize=9)


def _mark(ax, value, spec) -> str:
    """A thin grey vertical line at x = ``value`` (the panel's col value: e.g. i = j); when the x axis
    does not reach it, the note for the panel's title instead (else "")."""
    lo, hi = ax.get_xlim()
    if lo <= float(value) <= hi:
        sym = AXIS_SYMBOLS.get(spec.col) or axis_label(spec.col)
        ax.axvline(float(value), color="0.45", lw=1.0, zorder=1, label=f"{AXIS_SYMBOLS.get(spec.x) or 'x'} = {sym}")
        return ""
    return " (beyond the x range measured)"


def _fit_name(fit: str, x: str, ds: xr.Dataset) -> str:
    """What a fitted slope is in the legend: the exponent of a power law, the slope of a log law in
    ln of the x axis (by its symbol, e.g. "slope in ln σ", else its label)."""
    if fit == "power_law":
        return "exponent"
    return f"slope in ln {AXIS_SYMBOLS.get(x) or axis_label(x, ds)}"


def _draw_fit(ax, fit: str, pairs: np.ndarray, color, name: str) -> str:
    """Fit every run's (x, y) (:data:`ntkpipe.measure.fits.FITS`), draw the fitted curve over the x
    range fitted (thin, solid: a fit is no theory) and return the legend's text: the slope with its
    standard error, or why there is none (fewer than 3 usable points, an error larger than the slope)."""
    slope, intercept, stderr = FITS[fit](pairs[0], pairs[1])
    if not (np.isfinite(slope) and np.isfinite(stderr)):
        return "no fit: fewer than 3 usable points"
    if stderr > abs(slope):
        return f"no {'power' if fit == 'power_law' else 'log'} law: {name} {slope:.2f} ± {stderr:.2f}"
    x = pairs[0][np.isfinite(pairs[0]) & (pairs[0] > 0)]
    grid = np.geomspace(x.min(), x.max(), 50)
    curve = np.exp(intercept) * grid**slope if fit == "power_law" else intercept + slope * np.log(grid)
    keep = drawable(ax, grid, curve)
    ax.plot(grid[keep], curve[keep], color=color, lw=0.9, alpha=0.6, gid=FIT)
    return f"{name} {slope:.2f} ± {stderr:.2f}"
