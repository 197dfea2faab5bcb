"""Text summaries of a result store's time series for ``ntkpipe show``: one line per series with
its long name and units, the range, the final value per sweep point and a sparkline of the mean
over runs (each run's gaps between its checkpoints filled linearly)."""

from __future__ import annotations

from typing import cast

import numpy as np
import xarray as xr

from ntkpipe.layout import final_value

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 24
MAX_FINALS = 6
"""Sweep points whose final values are listed; with more, their min, median and max."""


def sparkline(values, width: int = SPARK_WIDTH) -> str:
    """``values`` (NaN dropped) as at most ``width`` bars from ▁ (min) to █ (max), each bar the mean
    of consecutive values; on a log scale (suffix " (log)") when positive and spanning over 100×."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return "(no finite values)"
    log = bool(np.all(values > 0) and values.max() > 100 * values.min())
    if log:
        values = np.log10(values)
    values = np.array([chunk.mean() for chunk in np.array_split(values, min(width, values.size))])
    low, span = values.min(), np.ptp(values)
    levels = np.zeros(values.size, int) if span == 0 else np.rint((values - low) / span * (len(BARS) - 1)).astype(int)
    return "".join(BARS[i] for i in levels) + (" (log)" if log else "")


def _final_values(var: xr.DataArray, sweep: list[str]) -> xr.DataArray:
    """Each sweep point's last finite value, averaged over the series' own dimensions (mode, …)."""
    last = final_value(var)
    return last.mean([d for d in last.dims if d not in sweep])


def _format_finals(final: xr.DataArray) -> str:
    values = final.values.ravel()
    finite = values[np.isfinite(values)]
    if values.size <= MAX_FINALS:
        points = [", ".join(f"{d}={final[d].values[i]}" for d, i in zip(final.dims, index))
                  for index in np.ndindex(final.shape)] if final.dims else [""]
        return "; ".join(f"{p} {v:.4g}".strip() for p, v in zip(points, values))
    if finite.size == 0:
        return f"all NaN over {values.size} points"
    return (f"min {finite.min():.4g}, median {np.median(finite):.4g}, max {finite.max():.4g} "
            f"over {finite.size} points")


def series_line(name: str, var: xr.DataArray, sweep: list[str]) -> str:
    """``name — long_name [units]: sparkline  range [min, max]  final …`` for one series."""
    label = var.attrs.get("long_name", name)
    units = f" [{var.attrs['units']}]" if var.attrs.get("units") else ""
    values = var.values[np.isfinite(var.values)]
    if values.size == 0:
        return f"{name} — {label}{units}: all NaN"
    # runs checkpoint at different times (NaN at the others): fill each run's gaps linearly first
    mean = var.interpolate_na("time").mean([d for d in var.dims if d != "time"])
    return (f"{name} — {label}{units}: {sparkline(mean.values)}  range [{values.min():.4g}, {values.max():.4g}]  "
            f"final {_format_finals(_final_values(var, sweep))}")


def series_lines(ds: xr.Dataset, max_lines: int = 40) -> list[str]:
    """A header, then one :func:`series_line` per variable with a ``time`` dimension (at most
    ``max_lines``); no lines without one."""
    names = cast("list[str]", [n for n, v in ds.data_vars.items() if "time" in v.dims and v.dtype.kind in "iuf"])
    if not names:
        return []
    sweep = cast("list[str]", [d for d in ds.dims if d in ds.coords and "axis" in ds[d].attrs])  # str names
    time = ds["time"]
    units = f" [{time.attrs['units']}]" if time.attrs.get("units") else ""
    lines = [f"time series over {time.size} checkpoints, t = {float(time.min()):.4g} … {float(time.max()):.4g}"
             f"{units}; sparkline: the mean over runs and own dimensions, one bar per checkpoint or group of them"]
    lines += [series_line(n, ds[n], sweep) for n in names[:max_lines]]
    if len(names) > max_lines:
        lines.append(f"… and {len(names) - max_lines} more series")
    return lines
