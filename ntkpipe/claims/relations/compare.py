"""Relations of one number: ``approx`` (q ≈ v ± tol), ``less`` and ``greater`` (q < b, q > b, b a number or
another quantity) and ``before`` (time q before time b, by a factor)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ntkpipe.claims.record import Outcome, QuantitySpec, Relation, RelationOptions, number


def scalar(values, what: str = "the quantity") -> float:
    """The one number of a reduced quantity (ValueError naming the dims left when it is not one)."""
    if values.ndim:
        raise ValueError(f"{what} has dims {', '.join(map(str, values.dims))} left after reducing; select them "
                         "with where or name them in reduce")
    return float(values)


class ApproxOptions(RelationOptions):
    """``approx``: the quantity q equals ``value`` v (a number, or another quantity) within the tolerance,
    |q − v| ≤ tol (or tol·|v| with relative); it needs a tolerance."""

    kind: Literal["approx"]
    """the relation: approx"""
    value: float | QuantitySpec
    """the value v the paper states or its theory predicts: a number, or a quantity ({variable, where, reduce})"""


def approx(o: ApproxOptions, values, read, slack) -> Outcome:
    q, v = scalar(values), scalar(read(o.value), "the value")
    allowed = slack(abs(v))
    return Outcome(q, v, bool(abs(q - v) <= allowed), f"{number(q)} vs {number(v)} ± {number(allowed)}")


class LessOptions(RelationOptions):
    """``less``: the quantity q is below ``than`` (a number or another quantity b): q < b + tol (or
    b + tol·|b| with relative)."""

    kind: Literal["less"]
    """the relation: less"""
    than: float | QuantitySpec
    """the bound b: a number, or a quantity ({variable, where, reduce}) read like the claim's"""


class GreaterOptions(RelationOptions):
    """``greater``: the quantity q is above ``than`` (a number or another quantity b): q > b − tol (or
    b − tol·|b| with relative)."""

    kind: Literal["greater"]
    """the relation: greater"""
    than: float | QuantitySpec
    """the bound b: a number, or a quantity ({variable, where, reduce}) read like the claim's"""


def _bound(o, values, read, slack, sign: int) -> Outcome:
    q, b = scalar(values), scalar(read(o.than), "the bound 'than'")
    allowed = slack(abs(b))
    holds = sign * (q - b) > -allowed
    word = "<" if sign < 0 else ">"
    tol = f" (tolerance {number(allowed)})" if allowed else ""
    return Outcome(q, b, bool(holds), f"{number(q)} {word} {number(b)}?{tol}")


def _quantity_problems(o, check) -> list:
    return check.quantity(o.than, ("relation", "than")) if isinstance(o.than, QuantitySpec) else []


class BeforeOptions(RelationOptions):
    """``before``: the time the quantity gives (t_a) comes before the time ``than`` gives (t_b), both
    gradient-flow times t = η₀·step: factor·t_a < t_b (factor > 1 claims a separation, e.g. alignment
    well before growth, silent-alignment Sec. 3)."""

    kind: Literal["before"]
    """the relation: before"""
    than: QuantitySpec
    """the later time t_b, a quantity ({variable, where, reduce}) of time units"""
    factor: float = Field(1.0, gt=0)
    """the separation claimed: factor·t_a < t_b (1: just before)"""


def before(o: BeforeOptions, values, read, slack) -> Outcome:
    a, b = scalar(values), scalar(read(o.than), "the time 'than'")
    holds = bool(np.isfinite(a) and np.isfinite(b) and o.factor * a < b + slack(abs(b)))
    factor = f"{number(o.factor)}·" if o.factor != 1 else ""
    return Outcome(a, b, holds, f"{factor}{number(a)} < {number(b)}? (ratio t_b/t_a = {number(b / a) if a else 'inf'})")


def _time_problems(o: BeforeOptions, check) -> list:
    """Both quantities are times."""
    return (check.time(check.claim.quantity.variable, ("quantity", "variable")) + check.quantity(o.than, ("relation", "than"))
            + check.time(o.than.variable, ("relation", "than", "variable")))


KINDS = [
    Relation("approx", ApproxOptions, approx,
             lambda o: f"≈ {o.value.variable if isinstance(o.value, QuantitySpec) else number(o.value)}",
             problems=lambda o, check: check.needs_tolerance("approx") + (
                 check.quantity(o.value, ("relation", "value")) if isinstance(o.value, QuantitySpec) else [])),
    Relation("less", LessOptions, lambda o, v, read, slack: _bound(o, v, read, slack, -1),
             lambda o: f"< {o.than.variable if isinstance(o.than, QuantitySpec) else number(o.than)}",
             problems=_quantity_problems),
    Relation("greater", GreaterOptions, lambda o, v, read, slack: _bound(o, v, read, slack, 1),
             lambda o: f"> {o.than.variable if isinstance(o.than, QuantitySpec) else number(o.than)}",
             problems=_quantity_problems),
    Relation("before", BeforeOptions, before,
             lambda o: f"before {o.than.variable}" + (f" by ×{number(o.factor)}" if o.factor != 1 else ""),
             problems=_time_problems),
]
