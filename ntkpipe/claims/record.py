"""The parts of a claim that every relation shares: the quantity it reads (:class:`QuantitySpec`), its
tolerance (:class:`ToleranceSpec`), and the record of a relation (:class:`Relation`), whose options a
spec writes under ``claims[].relation`` (a :class:`RelationOptions` with ``kind: Literal[name]``).

A relation's ``evaluate(options, values, read, slack)`` gets the claim's quantity as a DataArray (a
number, or numbers along the relation's axis), ``read`` (a quantity or a number → its DataArray, for a
bound that is another quantity) and ``slack(scale)`` (the tolerance: its value, times ``scale`` when
relative; 0 without one), and returns an :class:`Outcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import xarray as xr
from pydantic import Field

from ntkpipe.strict import Strict

Problem = tuple[tuple, str]
Reduction = Literal["mean", "median", "min", "max", "final", "initial"]


class QuantitySpec(Strict):
    """A number read from the study dataset: the variable ``variable`` (measured, a summary or a theory
    residual) restricted by ``where`` (sweep axes or the variable's own dims, as in figures), then every
    remaining dim but the relation's ``along`` reduced: by ``reduce`` where it names the dim, else a
    series' time to its last finite value (``final``) and any other dim (seeds, …) to its mean over the
    finite values."""

    variable: str
    """the dataset variable read (a measured variable, a summary variable or a <theory>_residual)"""
    where: dict[str, Any] = {}
    """selection before reducing, {axis or dimension: value} (e.g. {sigma: 0.01}, {output: 1})"""
    reduce: dict[str, Reduction] = {}
    """{dim: mean | median | min | max | final | initial}: how each remaining dim is reduced (final and initial: time only; default time final, others mean)"""


class ToleranceSpec(Strict):
    """How far a claim may miss and still hold, with why that much: ``value`` absolute, or times the
    relation's scale (|expected|, or the largest |value| of a trend) with ``relative``."""

    value: float = Field(ge=0)
    """the slack: a difference in the quantity's units, or a fraction of the scale with relative"""
    relative: bool = False
    """the value is a fraction of |expected| (approx, less, greater, before) or of the largest |value| (trends)"""
    reason: str = Field(min_length=1)
    """one line: why this tolerance (the noise measured over seeds, the paper's own spread, …)"""


class RelationOptions(Strict):
    """The keys every relation takes: its ``kind``."""

    kind: str
    """the relation: approx, less, greater, before, monotone, spearman or ordering"""


@dataclass(frozen=True)
class Outcome:
    """A claim's verdict: the ``measured`` number, the ``expected`` one it is compared with, whether it
    ``passed``, and ``detail``: the numbers behind both, in one line."""

    measured: float
    expected: float
    passed: bool
    detail: str


@dataclass(frozen=True)
class Relation:
    """One ``claims[].relation.kind``: its ``options`` model, ``evaluate`` (see the module), ``along``
    (the axis it reads the quantity along; None: the quantity is one number), ``problems(options, check)``
    (its checks against the study, through :class:`ntkpipe.study.claim_checks.ClaimCheck`) and ``text``
    (the relation in words, for tables)."""

    name: str
    options: type[RelationOptions]
    evaluate: Callable[[Any, xr.DataArray, Callable, Callable[[float], float]], Outcome]
    text: Callable[[Any], str]
    along: Callable[[Any], str | None] = lambda options: None
    problems: Callable[[Any, Any], list[Problem]] = lambda options, check: []


def number(x: float) -> str:
    """``x`` to 3 significant digits."""
    return f"{x:.3g}"


def judged_in(claim, variant: str) -> bool:
    """Whether ``claim`` is judged on the runs of ``variant`` (its ``variants``, or every variant)."""
    return not claim.variants or variant in claim.variants
