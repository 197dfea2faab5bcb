"""Shared figure conventions: hue labels and colours, numbers in labels, selection, diverged runs, saving.

Figures use matplotlib's object API (no pyplot state), so several plotting jobs may run in
threads of one Snakemake process. They select with :func:`ntkpipe.layout.select` and draw each
panel from the :func:`ntkpipe.layout.sub_grid` of its runs, so both dataset layouts draw alike.
Measurements of diverged runs are left out of every line, mean and band (:func:`without_diverged`),
so the y range comes from the runs drawn, and a panel that left runs out says so in its legend
(:func:`note_diverged`).
"""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path
from typing import cast

import matplotlib
import numpy as np
import xarray as xr
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from ntkpipe.labels import AXIS_SYMBOLS, axis_label, coordinate_names, display_name
from ntkpipe.layout import sub_grid


def hue_label(axis_name: str, value) -> str:
    """``σ = 0.25``, ``N = 2048``; a label (a case, a model kind) by its display name."""
    if isinstance(value, str):
        return display_name(value)
    return f"{AXIS_SYMBOLS.get(axis_name) or axis_label(axis_name)} = {value_text(value)}"


def hue_labels(ds: xr.Dataset, axis_name: str, values: list) -> list[str]:
    """The labels of ``values`` of a hue ``axis_name`` in ``ds``: the names its coordinate gives them
    (:func:`ntkpipe.labels.coordinate_names`: ``digit 2`` for target 3 of ten-class digits), else
    :func:`hue_label` each."""
    return coordinate_names(ds, axis_name, values) or [hue_label(axis_name, v) for v in values]


def value_text(value) -> str:
    """A coordinate's value as labels show it: a number by :func:`number`, else (a label, a
    boolean) by its display name."""
    return number(value) if is_numeric([value]) else display_name(value)


PLAIN = (1e-4, 1e6)
"""Magnitudes written as plain decimals (0.0001 … 999999); others as powers of ten."""
SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def number(value, digits: int = 3) -> str:
    """``value`` for a label or tick: an integer as an integer (2048), else a plain decimal of
    ``digits`` significant digits (0.25, 0.333) when its magnitude is in :data:`PLAIN`, else a power
    of ten (:func:`power_of_ten`)."""
    v = float(value)
    if not np.isfinite(v) or v == 0:
        return f"{v:g}"
    if not PLAIN[0] <= abs(v) < PLAIN[1]:
        return power_of_ten(v, digits)
    if v == round(v):
        return str(int(v))
    return np.format_float_positional(v, precision=digits, fractional=False, trim="-")


def power_of_ten(value: float, digits: int = 3) -> str:
    """``value`` as m×10ⁿ with ``digits`` significant digits of m (10⁻⁴, 2.5×10⁻⁶, -10³)."""
    exponent = math.floor(math.log10(abs(value)))
    mantissa = float(f"{value / 10.0 ** exponent:.{digits}g}")
    if abs(mantissa) >= 10:  # 9.9996 rounded up
        mantissa, exponent = mantissa / 10, exponent + 1
    head = {1.0: "", -1.0: "-"}.get(mantissa, f"{mantissa:g}×")
    return f"{head}10{str(exponent).translate(SUPERSCRIPTS)}"


def darker(color) -> tuple:
    """A darker shade of ``color``: theory lines are dashed in the darker shade of their data."""
    return tuple(0.55 * c for c in to_rgb(color))


def is_numeric(values) -> bool:
    return np.asarray(values).dtype.kind in "iuf"


def hue_colors(values) -> list:
    """Categorical colours (tab10) for few, non-numeric or consecutive-integer values (classes,
    targets 0–9), a viridis ramp for more numbers (an ordered sweep)."""
    n = len(values)
    if n <= 10 and (n <= 6 or not is_numeric(values) or _consecutive_integers(values)):
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    return [matplotlib.colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, n)]


def _consecutive_integers(values) -> bool:
    v = np.sort(np.asarray(values, np.float64))
    return bool(np.all(v == np.round(v)) and np.all(np.diff(v) == 1))


def run_counts(ds: xr.Dataset) -> tuple[int, int]:
    """(diverged runs, runs) in ``ds`` (either layout; a grid's holes are no runs)."""
    if "diverged" not in ds:
        return 0, 0
    present = ds["run_id"] != "" if "run_id" in ds else xr.ones_like(ds["diverged"], dtype=bool)
    return int(((ds["diverged"] > 0) & present).sum()), int(present.sum())


def without_diverged(var: xr.DataArray, ds: xr.Dataset) -> xr.DataArray:
    """``var`` with the values of the runs of ``ds`` that diverged set to NaN (a variable that is not one
    value per run, such as a summary over fewer axes, as it is)."""
    if "diverged" not in ds or not set(ds["diverged"].dims) <= set(var.dims):
        return var
    return var.where(ds["diverged"] == 0)


def diverged_runs(ds: xr.Dataset, shown: int = 3) -> str | None:
    """"k of n runs diverged: σ=0.5; σ=1" (the axis values of the first ``shown`` of them, "…" for
    more; none without a sweep), or None when no run of ``ds`` diverged."""
    diverged, total = run_counts(ds)
    if not diverged:
        return None
    which = _which_diverged(ds, shown)
    return f"{diverged} of {total} runs diverged" + (f": {which}" if which else "")


def _which_diverged(ds: xr.Dataset, shown: int = 3) -> str:
    """"σ=0.5; σ=1": the axis values of the first ``shown`` runs of ``ds`` that diverged ("…" for
    more; empty without a sweep)."""
    ds = sub_grid(ds)  # the runs by their axes' values (either layout)
    present = ds["run_id"] != "" if "run_id" in ds else True
    flags = (ds["diverged"] > 0) & present
    dims = cast("tuple[str, ...]", flags.dims)  # ntkpipe names its dimensions by str
    runs = [", ".join(f"{AXIS_SYMBOLS.get(d) or axis_label(d)}={value_text(ds[d].values[i])}" for d, i in zip(dims, index))
            for index in np.argwhere(flags.values)]
    return "; ".join(runs[:shown]) + ("; …" if len(runs) > shown else "")


def drawable(ax, x, y) -> np.ndarray:
    """Which points (x, y) ``ax`` can draw: finite, and positive along a log axis (matplotlib would
    clip the others to the axes' edge)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    if ax.get_xscale() == "log":
        keep &= x > 0
    if ax.get_yscale() == "log":
        keep &= y > 0
    return keep


def diverged_label(ds: xr.Dataset) -> str | None:
    """"k of n runs diverged, not drawn:" and, on a line of its own, which (the first two by their
    axes' values, :func:`_which_diverged`) when k > 0 of the runs of ``ds`` diverged, else None."""
    diverged, total = run_counts(ds)
    if not diverged:
        return None
    which = _which_diverged(ds, shown=2)
    return f"{diverged} of {total} runs diverged, not drawn" + (f":\n{which}" if which else "")


def note_diverged(ax, ds: xr.Dataset):
    """An empty line labelled :func:`diverged_label` on ``ax`` (so the axes' legend, placed away from
    the data, says how many runs were left out), or None when no run of ``ds`` diverged."""
    label = diverged_label(ds)
    return ax.plot([], [], ls="none", label=label)[0] if label else None


DPI = 130


def new_figure(n_rows: int, n_cols: int, *, width: float = 4.2, height: float = 3.3,
               height_ratios: list[float] | None = None):
    """A constrained-layout figure of panels ``width`` × ``height`` inches at the saved resolution
    (so that what :mod:`ntkpipe.plots.checks` measures is what the PNG shows); ``height_ratios``
    sets the rows' heights relative to each other (e.g. a small residual panel), the figure's height
    staying ``height`` × their sum."""
    total = sum(height_ratios) if height_ratios else n_rows
    fig = Figure(figsize=(width * n_cols, height * total), dpi=DPI, layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False,
                        gridspec_kw={"height_ratios": height_ratios} if height_ratios else None)
    return fig, axes


def save(fig: Figure, path: str | Path, metadata: dict[str, str] | None = None, *, drawn: bool = False) -> Path:
    """Write a PNG atomically (temporary name, then rename), with ``metadata`` as its text chunks.
    ``drawn``: ``fig`` was just drawn on its Agg canvas (:func:`ntkpipe.plots.checks.draw`) and not changed
    since, so its pixels are written as they are, not drawn a second time by ``savefig`` (the same PNG,
    at the figure's resolution, :data:`DPI`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{uuid.uuid4().hex[:8]}.png")
    if drawn:
        from PIL import Image
        from PIL.PngImagePlugin import PngInfo

        info = PngInfo()
        for key, value in {"Software": f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/",
                           **(metadata or {})}.items():
            info.add_text(key, value)  # iTXt where it is not Latin-1, as savefig writes it
        width, height = fig.canvas.get_width_height(physical=True)
        Image.frombuffer("RGBA", (width, height), fig.canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(  # pyright: ignore[reportAttributeAccessIssue]  # Agg canvas, drawn
            tmp, format="png", pnginfo=info, dpi=(fig.dpi, fig.dpi))
    else:
        fig.savefig(tmp, dpi=DPI, metadata=metadata)
    os.replace(tmp, path)
    return path
