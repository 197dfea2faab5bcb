"""``kind: scatter`` figures: predictions against predictions (silent-alignment Fig. 1b–c).

Every y variable is plotted against x over their shared dimensions (e.g. test points and outputs),
pooling the runs left after ``where`` that did not diverge; one panel per value of ``col``. The
diagonal y = x is a thin grey line (no theory, so not dashed); one legend for the figure, giving
each variable's Pearson correlation per panel. A panel without a finite pair says why.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ntkpipe.labels import variable_label
from ntkpipe.layout import axis_values, select, sub_grid
from ntkpipe.plots.finish import explain_empty, figure_legend, finish_figure
from ntkpipe.plots.style import drawable, hue_colors, hue_label, new_figure, note_diverged, without_diverged


def plot_scatter(ds: xr.Dataset, spec, title: str):
    ds = select(ds, spec.where)
    cols = axis_values(ds, spec.col) if spec.col else [None]
    fig, axes = new_figure(1, len(cols), width=4.4, height=4.2)
    for j, c in enumerate(cols):
        ax = axes[0, j]
        sub = sub_grid(ds, {spec.col: c} if spec.col else None)
        x_all = []
        panel = f", {hue_label(spec.col, c)}" if spec.col and len(cols) > 1 else ""
        for color, name in zip(hue_colors(spec.y), spec.y):
            x, y = xr.broadcast(without_diverged(sub[spec.x], sub), without_diverged(sub[name], sub))
            x, y = x.values.ravel(), y.values.ravel()
            keep = drawable(ax, x, y)
            if not keep.any():
                continue
            r = _pearson(x[keep], y[keep])
            ax.plot(x[keep], y[keep], ".", color=color, ms=4, alpha=0.6, label=f"{variable_label(name)}{panel} (r = {r:.3f})")
            x_all.append(x[keep])
        if x_all and np.concatenate(x_all).size:
            lo, hi = np.percentile(np.concatenate(x_all), [0, 100])
            ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.9, label="y = x")
        ax.set_xlabel(spec.xlabel or variable_label(spec.x))
        ax.set_ylabel("kernel regression prediction" if len(spec.y) > 1 else variable_label(spec.y[0]))
        ax.grid(True, alpha=0.3)
        note_diverged(ax, sub)
        explain_empty(ax, sub)
        if spec.col:
            ax.set_title(hue_label(spec.col, c), fontsize=10)
    return finish_figure(fig, title, figure_legend(axes))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """The Pearson correlation of x and y; NaN for fewer than 3 points or a constant one."""
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
