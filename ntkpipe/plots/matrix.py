"""``kind: matrix`` figures: a variable with two dims of its own as an annotated heatmap, such as
the kernel specialization matrix KSM(c, d) = A(K^{c,c}, y_d y_dᵀ) (kernel-alignment Sec. 4.3,
Figs. 3A–B, 4D), whose diagonal stands out when each output's kernel specializes to its own target.

The variable's own dims follow the sweep axes (as in every study dataset); the first is drawn down
the rows, the second across the columns. Everything else (e.g. seeds) is averaged after ``where``;
a series is taken at its last finite time; diverged runs are left out (and counted in the panel's
title; a panel without a finite cell says why). One panel per value of ``col``, and with ``theory``
a second row of panels drawing the theory's matrix under each (e.g. the final NTK Gram over the
training points and K∞ of silent-alignment Eq. 63, Fig. E.3b); rows and columns NaN in every panel
(a case with fewer points in a NaN-padded union) are left out. One colour scale and colour bar for all
panels (spanning the theory and the ``scale_with`` variables too, said in the colour bar's label; none
where no panel has a finite cell, whose empty panels then take their full width for the note).
A small matrix (at most :data:`ANNOTATED` rows and columns) has each cell annotated with its value in
black or white, whichever reads better on the cell's colour; a larger one is read off the colour bar.
"""

from __future__ import annotations

from typing import cast

import matplotlib
import matplotlib.cm
import numpy as np
import xarray as xr
from matplotlib.colors import Normalize
from matplotlib.ticker import MaxNLocator

from ntkpipe.labels import axis_label, coordinate_names, variable_label
from ntkpipe.layout import axis_values, final_value, select, sub_grid
from ntkpipe.plots.finish import explain_empty, finish_figure
from ntkpipe.plots.style import diverged_label, hue_label, is_numeric, new_figure, number, without_diverged

CMAP = "viridis"
ANNOTATED = 12
"""A matrix with at most this many rows and columns gets its values in its cells and a tick per
coordinate; a larger one (a P×P Gram) is read off the colour bar, with a few ticks."""
CELL = 0.42
"""Inches per row and column of an annotated matrix (its two-decimal numbers fit)."""
TICK_CHAR = 0.068
"""Inches per character of a tick label (8 pt): an annotated matrix's columns are as wide as their
labels (CIFAR-10's class names; cells wider than high), so that none is left out for overlapping
its neighbour."""


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


def _tick_labels(ds: xr.Dataset, dim: str, values) -> list[str]:
    """Coordinates as tick labels: by the names their coordinate gives them (the classes outputs and
    targets stand for: digit 0 … digit 9), else integers as integers (output 1, 2, …), labels as they are."""
    return coordinate_names(ds, dim, list(values)) or [number(v) if is_numeric([v]) else str(v) for v in values]


def _crop(panels: list[xr.DataArray]) -> list[xr.DataArray]:
    """The panels without the rows and columns that are NaN in every one of them (a union sub-grid's
    smaller matrices, e.g. the Grams of a case with fewer training points, are NaN-padded)."""
    rows, columns = panels[0].dims
    finite = np.any([np.isfinite(p.values) for p in panels], axis=0)
    keep = {rows: finite.any(axis=1), columns: finite.any(axis=0)}
    if not (keep[rows].any() and keep[columns].any()):
        return panels
    return [p.isel(keep) for p in panels]


def _ticks(ax, ds: xr.Dataset, matrix: xr.DataArray, n_rows: int, n_cols: int) -> None:
    """Every coordinate as a tick of a small matrix; a large one gets ticks at a few round values of
    its coordinates (training points μ = 10, 20, …)."""
    rows, columns = cast("tuple[str, str]", matrix.dims)  # ntkpipe names its dimensions by str
    for axis, dim, n in ((ax.xaxis, columns, n_cols), (ax.yaxis, rows, n_rows)):
        values = matrix[dim].values
        positions = list(range(n))
        if n > ANNOTATED and is_numeric(values):
            nice = MaxNLocator(5, integer=True, steps=[1, 2, 5, 10]).tick_values(values.min(), values.max())
            positions = [int(np.flatnonzero(values == v)[0]) for v in nice if v in values]
        elif n > ANNOTATED:
            positions = positions[:: -(-n // 5)]
        axis.set_ticks(positions, _tick_labels(ds, dim, values[positions]), fontsize=8)


def plot_matrix(ds: xr.Dataset, spec, title: str):
    ds = select(ds, spec.where)
    cols = axis_values(ds, spec.col) if spec.col else [None]
    subs = [sub_grid(ds, {spec.col: c} if spec.col else None) for c in cols]
    rows_drawn = [spec.variable] + ([spec.theory] if spec.theory else [])
    grid = _crop([matrix_mean(without_diverged(sub[v], sub)) for v in rows_drawn for sub in subs])
    panels = [grid[i * len(subs):(i + 1) * len(subs)] for i in range(len(rows_drawn))]
    rows, columns = cast("tuple[str, str]", grid[0].dims)  # ntkpipe names its dimensions by str
    n_rows, n_cols = grid[0].shape
    shared = [matrix_mean(without_diverged(sub[v], sub)) for v in spec.scale_with for sub in subs]
    finite = np.concatenate([p.values.ravel() for p in grid + shared])
    finite = finite[np.isfinite(finite)]
    norm = Normalize(finite.min(), finite.max()) if finite.size else Normalize(0.0, 1.0)
    cmap = matplotlib.colormaps[CMAP]
    annotated = max(n_rows, n_cols) <= ANNOTATED
    fontsize = 9 if n_cols <= 6 else 7
    cell = max(CELL, TICK_CHAR * max(map(len, _tick_labels(ds, columns, grid[0][columns].values))))
    size = ((max(3.0, cell * n_cols + 1.6), max(2.6, CELL * n_rows + 1.0)) if annotated else (3.2, 3.0))
    fig, axes = new_figure(len(rows_drawn), len(cols), width=size[0], height=size[1])
    for i, (name, row) in enumerate(zip(rows_drawn, panels)):
        for ax, c, matrix, sub in zip(axes[i], cols, row, subs):
            values = matrix.values
            ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest", aspect=CELL / cell if annotated else 1.0)
            for r, k in np.ndindex(values.shape) if annotated else ():
                if np.isfinite(values[r, k]):
                    ax.text(k, r, f"{values[r, k]:.2f}", ha="center", va="center", fontsize=fontsize,
                            color=text_color(cmap(norm(values[r, k]))))
            _ticks(ax, sub, matrix, n_rows, n_cols)
            if i == len(rows_drawn) - 1:
                ax.set_xlabel(axis_label(columns, ds))
            ax.set_ylabel(axis_label(rows, ds))
            heading = [hue_label(spec.col, c)] if spec.col else []
            heading += [variable_label(name)] if spec.theory else []
            heading += [note] if (note := diverged_label(sub)) else []
            if heading:
                ax.set_title("\n".join(heading), fontsize=10)
            if explain_empty(ax, sub):
                ax.set_aspect("auto")  # no cells to keep in shape: the panel's width for its note
    if not finite.size:  # no value in any panel: no colour scale to show
        return finish_figure(fig, title)
    label = variable_label(spec.variable)
    others = ([variable_label(spec.theory)] if spec.theory else []) + [variable_label(v) for v in spec.scale_with]
    if others:
        label += f"\n(scale shared with {', '.join(others)})"
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, label=label, shrink=0.8)
    return finish_figure(fig, title)
