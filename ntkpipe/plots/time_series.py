"""``kind: time_series`` figures: measurements against training time.

One row per variable, one column per value of ``col``, one line per value of ``hue`` (mean over the
remaining axes, e.g. seeds). Numeric hues with many values get a colour bar instead of a legend.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import xarray as xr
from matplotlib.colors import LogNorm, Normalize

from ntkpipe.plots.style import (TIME_LABEL, axis_label, hue_colors, hue_label, is_numeric, new_figure,
                                 select, variable_label)


def plot_time_series(ds: xr.Dataset, spec, title: str):
    ds = select(ds, spec.where)
    cols = list(ds[spec.col].values) if spec.col else [None]
    hues = list(ds[spec.hue].values) if spec.hue else [None]
    colors, norm = _hue_scheme(hues)
    fig, axes = new_figure(len(spec.variables), len(cols))
    for j, c in enumerate(cols):
        sub_col = ds.sel({spec.col: c}) if spec.col else ds
        for i, name in enumerate(spec.variables):
            ax = axes[i, j]
            for color, h in zip(colors, hues):
                var = sub_col[name].sel({spec.hue: h}) if spec.hue else sub_col[name]
                other = [d for d in var.dims if d != "time"]
                line = var.mean(other, skipna=True) if other else var
                t, v = line["time"].values, line.values
                keep = np.isfinite(v) & ((t > 0) if spec.logx else True)
                if keep.any():
                    ax.plot(t[keep], v[keep], color=color, lw=1.4,
                            label=hue_label(spec.hue, h) if spec.hue else variable_label(name))
            ax.set_xscale("log" if spec.logx else "linear")
            ax.set_yscale("log" if name in spec.logy else "linear")
            ax.set_ylabel(variable_label(name))
            ax.grid(True, alpha=0.3)
            if i == len(spec.variables) - 1:
                ax.set_xlabel(TIME_LABEL)
            if i == 0 and spec.col:
                ax.set_title(hue_label(spec.col, c), fontsize=10)
    if norm is not None:
        mappable = matplotlib.cm.ScalarMappable(norm=norm, cmap=matplotlib.colormaps["viridis"])
        fig.colorbar(mappable, ax=axes, label=axis_label(spec.hue), shrink=0.8)
    elif spec.hue:
        axes[0, -1].legend(fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig


def _hue_scheme(hues: list):
    """Colours per hue value, and the colour-bar norm when a numeric hue has many values."""
    if not (hues[0] is not None and is_numeric(hues) and len(hues) > 6):
        return hue_colors(hues), None
    lo, hi = float(min(hues)), float(max(hues))
    norm = LogNorm(lo, hi) if lo > 0 and hi / lo > 20 else Normalize(lo, hi)
    return [matplotlib.colormaps["viridis"](float(norm(h))) for h in hues], norm
