"""``kind: time_series`` figures: measurements against training time.

One row per variable (one shared panel with ``overlay``), one column per value of ``col``, one
line per value of ``hue`` (a sweep axis or a variable's own dimension such as ``mode``), averaged
over the remaining dimensions. Theory is dashed in a darker shade of the line's colour; a scalar
theory is a horizontal dashed line. Numeric hues with many values get a colour bar. Diverged runs
are not drawn; the legend of each column's top panel says how many of its runs were left out.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import xarray as xr
from matplotlib.colors import LogNorm, Normalize

from ntkpipe.layout import axis_values, select, sub_grid
from ntkpipe.plots.finish import finish_figure
from ntkpipe.plots.style import (TIME_LABEL, axis_label, darker, final_value, hue_colors, hue_label, is_numeric,
                                 new_figure, note_diverged, variable_label, without_diverged)

OVERLAY_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]


def _mean_line(var: xr.DataArray) -> xr.DataArray:
    other = [d for d in var.dims if d != "time"]
    return var.mean(other, skipna=True) if other else var


def _reference(var: xr.DataArray, how: str) -> xr.DataArray:
    """The value a variable is divided by: its first or its last finite value."""
    return var.isel(time=0) if how == "initial" else final_value(var)


def _draw(ax, t, values, logx, **style) -> None:
    keep = np.isfinite(values) & ((t > 0) if logx else True)
    if keep.any():
        ax.plot(t[keep], values[keep], **style)


def _theory(ax, theory: xr.DataArray, color, logx: bool, how: str | None, reference: xr.DataArray) -> None:
    if "time" in theory.dims:
        line = _mean_line(theory)
        if how is not None:
            line = line / float(_reference(reference, how).mean(skipna=True))
        _draw(ax, line["time"].values, line.values, logx, color=darker(color), ls="--", lw=1.5, zorder=3)
    else:
        level = float(theory.mean(skipna=True))
        if np.isfinite(level):
            ax.axhline(level, color=darker(color), ls="--", lw=1.3, zorder=3)


def plot_time_series(ds: xr.Dataset, spec, title: str):
    reference = sub_grid(ds, spec.reference) if spec.reference else None
    ds = select(ds, spec.where)
    cols = axis_values(ds, spec.col) if spec.col else [None]
    hues = _drawn_values(sub_grid(ds), spec.hue, spec.variables) if spec.hue else [None]
    colors, norm = _hue_scheme(hues)
    rows = [spec.variables] if spec.overlay else [[v] for v in spec.variables]
    fig, axes = new_figure(len(rows), len(cols))
    notes = {}
    for j, c in enumerate(cols):
        sub = sub_grid(ds, {spec.col: c} if spec.col else None)
        present = set(sub[spec.hue].values.tolist()) if spec.hue else {None}
        for i, names in enumerate(rows):
            ax = axes[i, j]
            for k, name in enumerate(names):
                how = spec.normalize.get(name)
                for color, h in zip(colors, hues):
                    if h not in present:  # a union sub-grid without this hue value
                        continue
                    if spec.overlay and spec.hue is None:
                        color = OVERLAY_COLORS[k % len(OVERLAY_COLORS)]
                    var = without_diverged(sub[name], sub)
                    var = var.sel({spec.hue: h}) if spec.hue else var
                    line = _mean_line(var / _reference(var, how) if how else var)
                    label = variable_label(name) + (" / initial" if how == "initial" else " / final" if how else "")
                    if spec.hue:
                        label = hue_label(spec.hue, h) if not spec.overlay else f"{label}, {hue_label(spec.hue, h)}"
                    _draw(ax, line["time"].values, line.values, spec.logx, color=color, lw=1.5, label=label)
                    if name in spec.theory:
                        theory = sub[spec.theory[name]]
                        theory = theory.sel({spec.hue: h}) if spec.hue and spec.hue in theory.dims else theory
                        _theory(ax, theory, color, spec.logx, how, var)
                if reference is not None:
                    ref = without_diverged(reference[name], reference)
                    ref = ref.sel({spec.col: c}) if spec.col in ref.dims else ref
                    line = _mean_line(ref / _reference(ref, how) if how else ref)
                    shown = ", ".join(f"{k}={v}" for k, v in spec.reference.items())
                    _draw(ax, line["time"].values, line.values, spec.logx, color="black", ls="--", lw=1.5,
                          label=shown)
            ax.set_xscale("log" if spec.logx else "linear")
            ax.set_yscale("log" if any(n in spec.logy for n in names) else "linear")
            ax.set_ylabel(("normalized value" if spec.normalize else "value") if spec.overlay else
                          variable_label(names[0]) + (f" / {spec.normalize[names[0]]}" if names[0] in spec.normalize else ""))
            ax.grid(True, alpha=0.3)
            if i == len(rows) - 1:
                ax.set_xlabel(TIME_LABEL)
            if i == 0 and spec.col:
                ax.set_title(hue_label(spec.col, c), fontsize=10)
        notes[j] = note_diverged(axes[0, j], sub)
    if spec.theory:
        axes[0, -1].plot([], [], "--", color="0.3", label="theory (dashed)")
    if norm is not None:
        mappable = matplotlib.cm.ScalarMappable(norm=norm, cmap=matplotlib.colormaps["viridis"])
        fig.colorbar(mappable, ax=axes, label=axis_label(spec.hue, ds), shrink=0.8)
    legend = norm is None and bool(spec.hue or spec.overlay or spec.theory or spec.reference)
    legend_axes = [axes[0, -1]] if legend else []
    for j, note in notes.items():  # other columns' legends: only the note
        if note is not None and not (legend and j == len(cols) - 1):
            axes[0, j].legend(handles=[note], fontsize=8, frameon=False)
            legend_axes.append(axes[0, j])
    return finish_figure(fig, title, legend_axes)


def _hue_scheme(hues: list):
    """Colours per hue value, and the colour-bar norm when a numeric hue has many values."""
    if not (hues[0] is not None and is_numeric(hues) and len(hues) > 6):
        return hue_colors(hues), None
    lo, hi = float(min(hues)), float(max(hues))
    norm = LogNorm(lo, hi) if lo > 0 and hi / lo > 20 else Normalize(lo, hi)
    return [matplotlib.colormaps["viridis"](float(norm(h))) for h in hues], norm


def _drawn_values(ds: xr.Dataset, dim: str, variables: list[str]) -> list:
    """Values of ``dim`` at which some variable has data (a union sweep leaves others empty)."""
    values = list(ds[dim].values)
    if dim not in ds.dims:
        return values
    finite = [bool(any(np.isfinite(ds[v].sel({dim: x})).any() for v in variables if dim in ds[v].dims))
              for x in values]
    return [x for x, keep in zip(values, finite) if keep] or values
