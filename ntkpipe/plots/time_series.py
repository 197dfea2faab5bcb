"""``kind: time_series`` figures: measurements against training time.

One row per variable (one shared panel with ``overlay``), one column per value of ``col``, one
line per value of ``hue`` (a sweep axis or a variable's own dimension such as ``mode``), averaged
over the remaining dimensions. Theory is dashed in a darker shade of the line's colour; a scalar
theory is a horizontal dashed line. Lines are means with a ±1 sd band over the averaged dimensions
(e.g. seeds; the legend says over how many); on a log time axis the value at t = 0 is a marker at
the left edge. Numeric hues with many values get a colour bar. Diverged runs
are not drawn, nor points a log axis cannot show (time 0 on the default log time axis, values ≤ 0);
a panel with nothing to draw says why. ``marks`` puts times (e.g. each mode's learning time) on
the lines: a measured time as a dot, a theory time as an open diamond on the theory line. One legend lists the lines of every panel (each hue value
drawn in any of them) and, per column, how many of its runs diverged.
"""

from __future__ import annotations

import matplotlib
import matplotlib.cm
import numpy as np
import xarray as xr
from matplotlib.colors import LogNorm, Normalize
from matplotlib.transforms import blended_transform_factory

from ntkpipe.labels import TIME_LABEL, axis_label, variable_label
from ntkpipe.layout import axis_values, final_value, select, sub_grid
from ntkpipe.measure.registry import VARIABLES
from ntkpipe.plots.checks import THEORY
from ntkpipe.plots.finish import explain_empty, figure_legend, finish_figure
from ntkpipe.plots.style import (
    darker,
    diverged_label,
    drawable,
    hue_colors,
    hue_label,
    hue_labels,
    is_numeric,
    new_figure,
    number,
    without_diverged,
)

OVERLAY_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
START = ">"  # the marker of a value at t = 0, at the left edge of a log time axis
LEGEND_HUES = 12  # numeric hues up to this many are listed in the legend; more get a colour bar


def _mean_line(var: xr.DataArray) -> xr.DataArray:
    other = [d for d in var.dims if d != "time"]
    return var.mean(other, skipna=True) if other else var


def _spread(var: xr.DataArray) -> xr.DataArray | None:
    """The sd over the dimensions a line averages (e.g. seeds), None when it averages none."""
    other = [d for d in var.dims if d != "time"]
    return var.std(other, skipna=True) if other and any(var.sizes[d] > 1 for d in other) else None


def _averaged(ds: xr.Dataset, spec) -> str | None:
    """"mean ± sd over n seeds" when the lines average over seeds (the legend says so)."""
    n = ds.sizes.get("seed", 0) if "seed" in ds.dims else 0
    return f"mean ± sd over {n} seeds (band)" if n > 1 and spec.hue != "seed" and spec.col != "seed" else None


def _reference(var: xr.DataArray, how: str) -> xr.DataArray:
    """The value a variable is divided by (or, for ``change``, subtracted): its first or its last finite value."""
    return final_value(var) if how == "final" else var.isel(time=0)


def _normalized(var: xr.DataArray, how: str | None, reference: xr.DataArray | None = None) -> xr.DataArray:
    """``var`` over (``change``: minus) the value ``how`` names of ``reference`` (default ``var`` itself;
    a theory is normalized by the measured variable's mean value, one number)."""
    if how is None:
        return var
    ref = _reference(var if reference is None else reference, how)
    ref = ref if reference is None else float(ref.mean(skipna=True))
    return var - ref if how == "change" else var / ref


SUFFIX = {"initial": " / initial", "final": " / final", "change": " − initial"}


def _band(ax, line: xr.DataArray, sd: xr.DataArray, color) -> None:
    """The ±1 sd band around a mean line (where the axes can draw both edges)."""
    t, lo, hi = line["time"].values, (line - sd).values, (line + sd).values
    keep = drawable(ax, t, lo) & drawable(ax, t, hi)
    if keep.any():
        ax.fill_between(t[keep], lo[keep], hi[keep], color=color, alpha=0.15, lw=0)


def _draw(ax, t, values, **style) -> None:
    """The line (t, values) where the axes can draw it; on a log time axis its value at t = 0 as a
    marker at the left edge (:data:`START`), so that initial values show."""
    keep = drawable(ax, t, values)
    if keep.any():
        ax.plot(t[keep], values[keep], **style)
    start = (t == 0) & drawable(ax, np.ones_like(t), values)
    if ax.get_xscale() == "log" and start.any() and keep.any():
        edge = blended_transform_factory(ax.transAxes, ax.transData)
        ax.plot([0.0], [values[start][0]], transform=edge, clip_on=False, ls="none", marker=START, ms=5,
                color=style.get("color"), gid=THEORY if style.get("gid") == THEORY else None)


def _theory(ax, theory: xr.DataArray, color, how: str | None, reference: xr.DataArray) -> None:
    if "time" in theory.dims:
        line = _normalized(_mean_line(theory), how, reference)
        _draw(ax, line["time"].values, line.values, color=darker(color), ls="--", lw=1.5, zorder=3, gid=THEORY)
    else:
        level = float(theory.mean(skipna=True))
        if drawable(ax, 1.0, level):
            ax.axhline(level, color=darker(color), ls="--", lw=1.3, zorder=3, gid=THEORY)


def _is_theory(name: str) -> bool:
    return name in VARIABLES and bool(VARIABLES[name].theory_of)


def _mark_style(name: str, color) -> dict:
    """A measured time is a filled dot; a theory time an open diamond in the theory's shade (gid
    THEORY is kept for dashed lines)."""
    if _is_theory(name):
        return {"marker": "D", "mfc": "none", "mec": darker(color), "mew": 1.5, "ms": 7}
    return {"marker": "o", "color": color, "ms": 5}


def _mark(ax, t: float, line: xr.DataArray, theory: xr.DataArray | None, name: str, color) -> None:
    """The time ``t`` of the variable ``name`` (``marks``) on the line it belongs to: a theory time on
    the theory's series when there is one, else on the measured line, at the value interpolated on the
    drawn segment there."""
    curve = _mean_line(theory) if _is_theory(name) and theory is not None and "time" in theory.dims else line
    times = curve["time"].values
    keep = drawable(ax, times, curve.values)
    if not np.isfinite(t) or t <= 0 or not keep.any():
        return
    along = np.log if ax.get_xscale() == "log" else np.asarray  # on the drawn segment: linear in ln t on a log axis
    y = float(np.interp(along(t), along(times[keep]), curve.values[keep]))
    if bool(drawable(ax, t, y)):
        ax.plot([t], [y], ls="none", zorder=4, **_mark_style(name, color))


def plot_time_series(ds: xr.Dataset, spec, title: str):
    reference = sub_grid(ds, spec.reference) if spec.reference else None
    ds = select(ds, spec.where)
    cols = axis_values(ds, spec.col) if spec.col else [None]
    hues = _drawn_values(sub_grid(ds), spec.hue, spec.variables) if spec.hue else [None]
    colors, norm = _hue_scheme(hues)
    ranks = _column_ranks(ds, spec, cols)
    if ranks is not None:  # one colour scale per column: the k-th smallest hue of every column shares a colour
        norm = None
    rows = [spec.variables] if spec.overlay else [[v] for v in spec.variables]
    labelled = spec.overlay or (spec.hue is not None and norm is None)  # the legend tells the lines apart
    order = hue_labels(ds, spec.hue, hues) if spec.hue else []
    shown_hue = dict(zip(hues, order))
    legend_title = axis_label(spec.hue, ds) if spec.hue and not spec.overlay else None
    if ranks is not None and spec.hue is not None:
        n = len(next(iter(ranks.values())))
        colors = [matplotlib.colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, n)]
        order = [" | ".join(number(ranks[c][k]) for c in cols) for k in range(n)]
        legend_title = (f"{axis_label(spec.hue, ds)}, a colour scale per column "
                        f"({' | '.join(hue_label(spec.col, c) for c in cols)})")
    fig, axes = new_figure(len(rows), len(cols))
    for j, c in enumerate(cols):
        sub = sub_grid(ds, {spec.col: c} if spec.col else None)
        present = set(sub[spec.hue].values.tolist()) if spec.hue else {None}
        col_hues = ranks[c] if ranks is not None else hues
        for i, names in enumerate(rows):
            ax = axes[i, j]
            ax.set_xscale("log" if spec.logx else "linear")
            ax.set_yscale("log" if any(n in spec.logy for n in names) else "linear")
            for k, name in enumerate(names):
                how = spec.normalize.get(name)
                for k, (color, h) in enumerate(zip(colors, col_hues)):
                    if h not in present:  # a union sub-grid without this hue value
                        continue
                    if spec.overlay and spec.hue is None:
                        color = OVERLAY_COLORS[k % len(OVERLAY_COLORS)]
                    var = without_diverged(sub[name], sub)
                    var = var.sel({spec.hue: h}) if spec.hue else var
                    shown = _normalized(var, how)
                    line, sd = _mean_line(shown), _spread(shown)
                    if sd is not None:
                        _band(ax, line, sd, color)
                    label = variable_label(name) + SUFFIX.get(how, "")
                    if spec.hue:
                        label = shown_hue[h] if not spec.overlay else f"{label}, {shown_hue[h]}"
                        label = order[k] if ranks is not None else label
                    _draw(ax, line["time"].values, line.values, color=color, lw=1.5,
                          **({"label": label} if labelled else {}))
                    theory = None
                    if name in spec.theory:
                        theory = sub[spec.theory[name]]
                        theory = theory.sel({spec.hue: h}) if spec.hue and spec.hue in theory.dims else theory
                        _theory(ax, theory, color, how, var)
                    for mark in spec.marks.get(name, []):
                        times = sub[mark].sel({spec.hue: h}) if spec.hue and spec.hue in sub[mark].dims else sub[mark]
                        _mark(ax, float(times.mean(skipna=True)), line, theory, mark, color)
                if reference is not None:
                    ref = without_diverged(reference[name], reference)
                    ref = ref.sel({spec.col: c}) if spec.col in ref.dims else ref
                    line = _mean_line(_normalized(ref, how))
                    shown = ", ".join(hue_label(k, v) for k, v in spec.reference.items())
                    _draw(ax, line["time"].values, line.values, color="black", lw=1.2, alpha=0.8, label=shown)
            ax.set_ylabel(("normalized value" if spec.normalize else "value") if spec.overlay else
                          variable_label(names[0]) + SUFFIX.get(spec.normalize.get(names[0], ""), ""))
            ax.grid(True, alpha=0.3)
            if i == len(rows) - 1:
                ax.set_xlabel(TIME_LABEL)
            if i == 0 and spec.col:
                ax.set_title(hue_label(spec.col, c), fontsize=10)
            explain_empty(ax, sub)
        _note_diverged(axes[0, j], sub, hue_label(spec.col, c) if spec.col else None)
    if spec.theory:
        axes[0, -1].plot([], [], "--", color="0.3", label="theory", gid=THEORY)
    for mark in dict.fromkeys(m for marks in spec.marks.values() for m in marks):
        axes[0, -1].plot([], [], ls="none", **_mark_style(mark, "0.3"), label=variable_label(mark))
    if spec.logx and any(line.get_marker() == START for ax in axes.ravel() for line in ax.get_lines()):
        axes[0, -1].plot([], [], ls="none", marker=START, color="0.3", label="value at t = 0 (left edge)")
    if (averaged := _averaged(ds, spec)) and any(ax.collections for ax in axes.ravel()):  # a band is drawn
        axes[0, -1].plot([], [], ls="none", label=averaged)
    if spec.hue and norm is not None:  # the colour bar of a numeric hue
        mappable = matplotlib.cm.ScalarMappable(norm=norm, cmap=matplotlib.colormaps["viridis"])
        fig.colorbar(mappable, ax=axes, label=axis_label(spec.hue, ds), shrink=0.8)
    return finish_figure(fig, title, figure_legend(axes, order, title=legend_title))


def _note_diverged(ax, ds: xr.Dataset, facet: str | None) -> None:
    """The legend's note of the runs of a column that diverged, naming the column if there are several."""
    label = diverged_label(ds)
    if label:
        ax.plot([], [], ls="none", label=f"{facet}: {label}" if facet else label)


def _column_ranks(ds: xr.Dataset, spec, cols: list) -> dict | None:
    """Each column's hue values in order, when a numeric hue takes different values in each column
    (depth_scaling: σ over another range per depth L), more than :data:`LEGEND_HUES` in all (one
    scale would be a colour bar over every column's range) and as many in each (at most
    :data:`LEGEND_HUES`): then each column gets a colour scale of its own, the k-th value of every
    column the k-th colour, and the legend lists per colour each column's value. Else None (one
    scale for the figure)."""
    if not (spec.col and spec.hue and not spec.overlay and len(cols) > 1):
        return None
    ranks = {c: sorted(_drawn_values(sub_grid(ds, {spec.col: c}), spec.hue, spec.variables)) for c in cols}
    sizes = {len(v) for v in ranks.values()}
    values = list(ranks.values())
    if (len(sizes) != 1 or not 2 <= sizes.pop() <= LEGEND_HUES or not all(is_numeric(v) for v in values)
            or len({x for v in values for x in v}) <= LEGEND_HUES):  # few values in all: one legend lists them
        return None
    return ranks


def _hue_scheme(hues: list):
    """Colours per hue value, and the colour-bar norm when a numeric hue has many values."""
    if not (hues[0] is not None and is_numeric(hues) and len(hues) > LEGEND_HUES):
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
