"""Fits across a sweep: the exponent of a power law or the slope of a log law of a scalar in a sweep
axis (silent-alignment Fig. 3: t½ ∝ σ^{−(L−2)}, or ∝ ln σ for L = 2)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import xarray as xr
from pydantic import Field

from ntkpipe.labels import axis_label, variable_label
from ntkpipe.layout import sub_grid
from ntkpipe.measure.fits import FITS
from ntkpipe.summaries.record import SummaryKind, SummaryOptions, group_keys, over, per_group


class FitOptions(SummaryOptions):
    """``power_law`` fits log y = a + b log x, ``log_law`` fits y = a + b ln x, over the runs' finite
    (positive) values, seeds pooled: ``x`` a sweep axis, ``y`` a scalar variable. The variable ``<name>``
    is the fitted exponent/slope b (NaN with fewer than 3 finite points), ``<name>_stderr`` its standard
    error. ``x_range: [lo, hi]`` fits only the runs with lo ≤ x ≤ hi (a local exponent, e.g. before a
    correction that grows with x takes over)."""

    kind: Literal["power_law", "log_law"]
    """the summary kind (this record\'s name)"""
    x: str = Field(description="the sweep axis the law is in")
    y: str = Field(description="the scalar variable fitted")
    x_range: list[float] | None = Field(
        default=None, min_length=2, max_length=2, exclude_if=lambda v: v is None,
        description="[lo, hi]: fit only the runs with lo ≤ x ≤ hi (a local exponent over part of the sweep); none: all runs")


def fit_variables(s: FitOptions, ds: xr.Dataset, study=None) -> xr.Dataset:
    """``<name>`` (the fitted exponent/slope) and ``<name>_stderr``, per group of the ``by`` axes
    (:func:`~ntkpipe.summaries.record.over`), each computed on its sub-grid."""
    by, fit = s.by_axes, FITS[s.kind]

    def one(sub: xr.Dataset) -> tuple[float, float]:
        x = np.broadcast_to(sub[s.x].values.reshape([-1 if d == s.x else 1 for d in sub[s.y].dims]), sub[s.y].shape)
        y = sub[s.y].values
        if s.x_range is not None:
            y = np.where((x >= s.x_range[0]) & (x <= s.x_range[1]), y, np.nan)
        slope, _, stderr = fit(x, y)
        return slope, stderr

    values = [one(sub_grid(ds, dict(zip(by, key)))) for key in group_keys(ds, by)]
    return xr.Dataset({s.name: over(by, ds, s.name, [v[0] for v in values]),
                       f"{s.name}_stderr": over(by, ds, s.name, [v[1] for v in values])})


def fit_text(s: FitOptions) -> str:
    """The fitted law, in words: ``log y = a + b log x`` or ``y = a + b ln x``."""
    return f"log {s.y} = a + b log {s.x}" if s.kind == "power_law" else f"{s.y} = a + b ln {s.x}"


def fit_attrs(s: FitOptions, study) -> dict[str, dict[str, str]]:
    what = "power-law exponent" if s.kind == "power_law" else "log-law slope"
    fit, by = fit_text(s), per_group(s.by_axes)
    within = f" with {s.x_range[0]:g} ≤ {s.x} ≤ {s.x_range[1]:g}" if s.x_range is not None else ""
    return {s.name: {"long_name": f"{what} of {variable_label(s.y)} in {axis_label(study.axis_keys.get(s.x, s.x))}",
                     "description": f"b of the least-squares fit {fit} over the runs' finite positive values "
                                    f"(seeds pooled){within}{by}"},
            f"{s.name}_stderr": {"long_name": f"standard error of the {what} {s.name}",
                                 "description": f"standard error of b in {fit}{by}"}}


def fit_problems(s: FitOptions, check) -> list:
    out = check.axis(s.x, ("x",), "x") + check.variable(s.y, ("scalar",), ("y",))
    if s.x_range is not None and not s.x_range[0] < s.x_range[1]:
        out += check.problem(("x_range",), f"x_range [{s.x_range[0]:g}, {s.x_range[1]:g}] is empty: give [lo, hi] with lo < hi")
    return out


KINDS = [SummaryKind(kind, FitOptions, fit_variables, fit_attrs, fit_problems) for kind in ("power_law", "log_law")]
