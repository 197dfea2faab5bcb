"""The record of a summary kind (one value of ``summaries[].kind``): a study-level result computed from
the study dataset once the runs are merged.

A :class:`SummaryKind` holds everything about its kind in one place: its ``options`` (a strict pydantic
model of the keys a spec writes under ``summaries:``; its docstring documents the kind), ``compute`` (its
variables, from the merged dataset and the study), ``attrs`` (each variable's long name and description:
the study dataset's and the study table's columns), ``problems`` (its checks against the study, through
the ``SummaryCheck`` of :mod:`ntkpipe.study.checks`) and ``tables`` (the variables it adds that figures
may plot). Each module of :mod:`ntkpipe.summaries` lists its kinds in ``KINDS``;
:data:`ntkpipe.summaries.SUMMARY_KINDS` collects them.

A summary's variables are one value per group of its ``by`` axes: over the ``by`` dims (grid layout), or
along ``run`` with each run holding its group's value (runs layout, :mod:`ntkpipe.layout`); a group
without finite data gives NaN.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ntkpipe.layout import RUN
from ntkpipe.measure.record import Variable
from ntkpipe.strict import Strict

Problem = tuple[tuple, str]


class SummaryOptions(Strict):
    """The keys every summary takes: ``name`` (its variable, and the prefix of the others it adds),
    ``kind``, and the sweep axis ``x``, the variable ``y`` and the axes ``by`` (one name or a list;
    none: one value) for the kinds that read them."""

    name: str
    """the variable it adds to the study dataset (the prefix of the others it adds, e.g. <name>_stderr)"""
    kind: str
    """the summary kind: power_law, log_law, endpoints, predicted_phase or measured_phase"""
    x: str | None = None
    """the sweep axis a fit runs over (measured_phase: the scale parameter d)"""
    y: str | None = None
    """the variable fitted (a scalar; a series at its last time) or tabulated (endpoints: a series)"""
    by: str | list[str] | None = None
    """sweep axes to compute the summary per value of (one name or a list; none: one value for the study)"""

    @property
    def by_axes(self) -> list[str]:
        return [] if self.by is None else [self.by] if isinstance(self.by, str) else list(self.by)


def _no_tables(options: Any, variables: dict[str, Variable]) -> dict[str, Variable]:
    """A summary whose variables no figure plots."""
    return {}


@dataclass(frozen=True)
class SummaryKind:
    """One ``summaries[].kind``.

    ``options``: its keys (a :class:`SummaryOptions` with ``kind: Literal[name]``). ``compute(options, ds,
    study)``: the variables it adds to the merged study dataset ``ds``. ``attrs(options, study)``: the
    ``long_name`` and ``description`` of each of them, by name. ``problems(options, check)``: its checks
    against the study (key paths below the summary's). ``tables(options, variables)``: the variables it adds
    that figures may read, given the stored ones (e.g. the endpoints table).
    """

    name: str
    options: type[SummaryOptions]
    compute: Callable[[Any, xr.Dataset, Any], xr.Dataset]
    attrs: Callable[[Any, Any], dict[str, dict[str, str]]]
    problems: Callable[[Any, Any], list[Problem]]
    tables: Callable[[Any, dict[str, Variable]], dict[str, Variable]] = _no_tables


def group_keys(ds: xr.Dataset, by: list[str]) -> list[tuple]:
    """Every combination of the ``by`` axes' values (grid), or every one that has runs, in run order (runs)."""
    if not by:
        return [()]
    if RUN in ds.dims:
        return list(dict.fromkeys(zip(*(ds[a].values.tolist() for a in by))))
    return list(itertools.product(*(ds[a].values.tolist() for a in by)))


def over(by: list[str], ds: xr.Dataset, name: str, values: list, dtype=None) -> xr.DataArray:
    """One value per group of :func:`group_keys` as a variable: over the ``by`` dims (grid), or along
    ``run``, each run holding its group's value (runs); a scalar without ``by``."""
    array = np.array(values, dtype=dtype)
    if not by:
        return xr.DataArray(array[0], name=name)
    if RUN in ds.dims:
        index = {key: i for i, key in enumerate(group_keys(ds, by))}
        return xr.DataArray(array[[index[k] for k in zip(*(ds[a].values.tolist() for a in by))]], dims=RUN,
                            name=name)
    return xr.DataArray(array.reshape([ds.sizes[a] for a in by]), dims=by, coords={a: ds[a].values for a in by},
                        name=name)


def per_group(by: list[str]) -> str:
    """The end of a description of a variable with one value per group of ``by``."""
    return f", one per {', '.join(by)}" if by else ""
