"""Relations of numbers along one axis: ``monotone`` (every step in one direction), ``spearman`` (the sign of
Spearman's rank correlation ρ with the axis) and ``ordering`` (values in a given order of an axis' values,
e.g. the cases of a case axis)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from ntkpipe.claims.record import Outcome, Relation, RelationOptions, number

Direction = Literal["increasing", "decreasing"]


def along_values(values, axis: str) -> tuple[list, np.ndarray]:
    """The axis' values and the quantity's, in the axis' order (ValueError if other dims are left)."""
    if values.dims != (axis,):
        raise ValueError(f"the quantity has dims ({', '.join(map(str, values.dims))}) after reducing; a trend "
                         f"along {axis!r} needs that one dim alone: select the others with where or name them in reduce")
    return values[axis].values.tolist(), np.asarray(values.values, dtype=float)


def axis_value(x) -> str:
    """An axis value as written in a spec: a float to 4 significant digits (a log-spaced σ reads 0.0317, not
    0.0316978638492), anything else as it is."""
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _listed(xs: list, ys: np.ndarray, axis: str) -> str:
    return f"{', '.join(number(y) for y in ys)} at {axis} = {', '.join(axis_value(x) for x in xs)}"


def _steps(o, xs: list, ys: np.ndarray, slack) -> Outcome:
    """Every step of ``ys`` in ``o.direction``: the worst step (sign flipped for decreasing) against 0."""
    sign = 1 if o.direction == "increasing" else -1
    worst = float(np.min(sign * np.diff(ys))) if len(ys) > 1 else np.nan
    allowed = 0.0 if getattr(o, "strict", False) else slack(float(np.max(np.abs(ys[np.isfinite(ys)]), initial=0.0)))
    holds = worst > 0 if getattr(o, "strict", False) else worst >= -allowed
    return Outcome(worst, 0.0, bool(np.isfinite(worst) and holds),
                   f"{o.direction}: {_listed(xs, ys, o.along)}; worst step {number(worst)}")


class MonotoneOptions(RelationOptions):
    """``monotone``: the quantity is monotone along ``along``: every step q_{i+1} − q_i ≥ −tol in the
    ``direction`` (> 0 with ``strict``, which takes no tolerance); measured: the worst step."""

    kind: Literal["monotone"]
    """the relation: monotone"""
    along: str
    """the sweep axis or dimension the quantity is read along (its values ascending)"""
    direction: Direction = "increasing"
    """increasing or decreasing along the axis"""
    strict: bool = False
    """every step strictly in the direction (no tolerance)"""


def monotone(o: MonotoneOptions, values, read, slack) -> Outcome:
    xs, ys = along_values(values, o.along)
    return _steps(o, xs, ys, slack)


def _monotone_problems(o: MonotoneOptions, check) -> list:
    if o.strict and check.claim.tolerance is not None:
        return check.problem(("tolerance",), "a strict monotone claim takes no tolerance; remove it or set strict "
                                             "to false")
    return []


def spearman_rho(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ: Pearson's correlation of the ranks (ties given their mean rank)."""
    def ranks(v: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):
            r[v == value] = r[v == value].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    scale = np.sqrt((rx ** 2).sum() * (ry ** 2).sum())
    return float((rx * ry).sum() / scale) if scale > 0 else np.nan


class SpearmanOptions(RelationOptions):
    """``spearman``: the quantity rises (``sign`` positive) or falls (negative) with ``along`` in rank:
    s·ρ > at_least, ρ Spearman's rank correlation of the quantity with the axis (finite values only)."""

    kind: Literal["spearman"]
    """the relation: spearman"""
    along: str
    """the numeric sweep axis or dimension ranked against"""
    sign: Literal["positive", "negative"] = "positive"
    """the sign s of ρ claimed"""
    at_least: float = Field(0.0, ge=0, lt=1)
    """the margin: s·ρ must exceed it"""


def spearman(o: SpearmanOptions, values, read, slack) -> Outcome:
    xs, ys = along_values(values, o.along)
    finite = np.isfinite(ys)
    rho = spearman_rho(np.asarray(xs, dtype=float)[finite], ys[finite]) if finite.sum() > 1 else np.nan
    s = 1 if o.sign == "positive" else -1
    return Outcome(rho, s * o.at_least, bool(np.isfinite(rho) and s * rho > o.at_least),
                   f"ρ = {number(rho)}: {_listed(xs, ys, o.along)}")


def _spearman_problems(o: SpearmanOptions, check) -> list:
    out = check.problem(("tolerance",), "a spearman claim takes no tolerance (at_least is its margin)") \
        if check.claim.tolerance is not None else []
    labels = check.labels(o.along)
    if labels:
        out += check.problem(("relation", "along"), f"{o.along!r} takes labels ({', '.join(labels)}), which have no "
                                                    "rank; use an ordering claim with their order")
    return out


class OrderingOptions(RelationOptions):
    """``ordering``: the quantity at the values ``order`` of ``along`` (e.g. the cases of a case axis) is
    increasing (or ``direction`` decreasing) in that order: every step ≥ −tol."""

    kind: Literal["ordering"]
    """the relation: ordering"""
    along: str
    """the sweep axis (e.g. a case axis) whose values are ordered"""
    order: list[Any] = Field(min_length=2)
    """the axis' values in the order claimed"""
    direction: Direction = "increasing"
    """the quantity increases (or decreases) along order"""


def ordering(o: OrderingOptions, values, read, slack) -> Outcome:
    along_values(values, o.along)
    ys = np.asarray(values.sel({o.along: o.order}).values, dtype=float)
    return _steps(o, o.order, ys, slack)


def _ordering_problems(o: OrderingOptions, check) -> list:
    known = check.values(o.along)
    missing = [v for v in o.order if known is not None and v not in known]
    if missing:
        return check.problem(("relation", "order"), f"{', '.join(map(repr, missing))} not among the values of "
                                                    f"{o.along!r} ({', '.join(map(repr, known or []))})")
    return []


KINDS = [
    Relation("monotone", MonotoneOptions, monotone,
             lambda o: f"{'strictly ' if o.strict else ''}{o.direction} in {o.along}", lambda o: o.along,
             _monotone_problems),
    Relation("spearman", SpearmanOptions, spearman, lambda o: f"ρ {'>' if o.sign == 'positive' else '<'} "
             f"{'' if o.sign == 'positive' else '−'}{number(o.at_least)} along {o.along}", lambda o: o.along,
             _spearman_problems),
    Relation("ordering", OrderingOptions, ordering,
             lambda o: f"{o.direction} over {o.along} = {', '.join(map(str, o.order))}", lambda o: o.along,
             _ordering_problems),
]
