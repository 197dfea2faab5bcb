"""``kind: matrix`` figures: a variable with two dims of its own as an annotated heatmap, such as
the kernel specialization matrix KSM(c, d) = A(K^{c,c}, y_d y_dᵀ) (kernel-alignment Sec. 4.3,
Figs. 3A–B, 4D), whose diagonal stands out when each output's kernel specializes to its own target.

The variable's own dims follow the sweep axes (as in every study dataset); the first is drawn down
the rows, the second across the columns. Everything else (e.g. seeds) is averaged after ``where``;
a series is taken at its last finite time; diverged runs are left out (and counted in the panel's
title; a panel without a finite cell says why). One panel per value of ``col``, one colour scale
and colour bar for all panels (spanning the ``scale_with`` variables too, said in the colour bar's
label, when figures are to be compared), each cell annotated with its value in black or white, whichever
reads better on the cell's colour.
"""

from __future__ import annotations

from typing import cast

import matplotlib
import matplotlib.cm
import numpy as np
import xarray as xr
from matplotlib.colors import Normalize

from ntkpipe.labels import axis_label, variable_label
from ntkpipe.layout import axis_values, final_value, select, sub_grid
from ntkpipe.plots.finish import explain_empty, finish_figure
from ntkpipe.plots.style import diverged_label, hue_label, is_numeric, new_figure, number, without_diverged

CMAP = "viridis"


def matrix_mean(var: xr.DataArray) -> xr.DataArray:
    """The (rows, columns) matrix of ``var``: its last two own dims, averaged over all others."""
    var = final_value(var)
    rows, columns = var.dims[-2:]
    others = [d for d in var.dims if d not in (rows, columns)]
    return (var.mean(others, skipna=True) if others else var).transpose(rows, columns)


def text_color(rgba) -> str:
    """Black on light cells, white on dark ones (relative luminance of the cell's colour)."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "white"


def _tick_labels(values) -> list[str]:
    """Coordinates as tick labels: integers as integers (output 0, 1, …), labels as they are."""
    return [number(v) if is_numeric([v]) else str(v) for v in values]


def plot_matrix(ds: xr.Dataset, spec, title: str):
    ds = select(ds, spec.where)
    cols = axis_values(ds, spec.col) if spec.col else [None]
    subs = [sub_grid(ds, {spec.col: c} if spec.col else None) for c in cols]
    panels = [matrix_mean(without_diverged(sub[spec.variable], sub)) for sub in subs]
    rows, columns = cast("tuple[str, str]", panels[0].dims)  # ntkpipe names its dimensions by str
    n_rows, n_cols = panels[0].shape
    shared = [matrix_mean(without_diverged(sub[v], sub)) for v in spec.scale_with for sub in subs]
    finite = np.concatenate([p.values.ravel() for p in panels + shared])
    finite = finite[np.isfinite(finite)]
    norm = Normalize(finite.min(), finite.max()) if finite.size else Normalize(0.0, 1.0)
    cmap = matplotlib.colormaps[CMAP]
    fontsize = 9 if n_cols <= 6 else 7
    fig, axes = new_figure(1, len(cols), width=max(3.0, 0.42 * n_cols + 1.6), height=max(2.6, 0.42 * n_rows + 1.0))
    for ax, c, matrix, sub in zip(axes[0], cols, panels, subs):
        values = matrix.values
        ax.imshow(values, cmap=cmap, norm=norm)
        for i, j in np.ndindex(values.shape):
            if np.isfinite(values[i, j]):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=fontsize,
                        color=text_color(cmap(norm(values[i, j]))))
        ax.set_xticks(range(n_cols), _tick_labels(matrix[columns].values), fontsize=8)
        ax.set_yticks(range(n_rows), _tick_labels(matrix[rows].values), fontsize=8)
        ax.set_xlabel(axis_label(columns, ds))
        ax.set_ylabel(axis_label(rows, ds))
        heading = [hue_label(spec.col, c)] if spec.col else []
        heading += [note] if (note := diverged_label(sub)) else []
        if heading:
            ax.set_title("\n".join(heading), fontsize=10)
        explain_empty(ax, sub)
    label = variable_label(spec.variable)
    if spec.scale_with:
        label += f"\n(scale shared with {', '.join(variable_label(v) for v in spec.scale_with)})"
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, label=label, shrink=0.8)
    return finish_figure(fig, title)
