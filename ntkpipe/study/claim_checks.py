"""Checks of a study's ``claims:`` against what the study produces: each claim's quantity is a variable
of the study dataset (measured, a summary's, or a theory residual), its ``where``, ``reduce`` and the
relation's axis are sweep axes or dims of that variable, and the relation passes its own checks
(:class:`ClaimCheck`). Problems are ``(key path, message)`` pairs like :mod:`ntkpipe.study.checks`'."""

from __future__ import annotations

from dataclasses import dataclass, field

from ntkpipe.claims.record import QuantitySpec, judged_in
from ntkpipe.claims.relations import RELATIONS
from ntkpipe.lang.axes import suggest
from ntkpipe.lang.schema import StudySpec
from ntkpipe.measure.registry import TIME_UNITS, Variable, residual_name
from ntkpipe.study.checks import _check_variable, _summary_options, _variables, _where_problems
from ntkpipe.summaries import SUMMARY_KINDS

Problem = tuple[tuple, str]
ANY = ("scalar", "series", "array")


@dataclass(frozen=True)
class _AxisKeys:
    """What a summary kind's ``attrs`` reads of a study to name its variables (labels need no axis keys)."""

    axis_keys: dict = field(default_factory=dict)


def dataset_variables(spec: StudySpec) -> dict[str, Variable]:
    """Every variable the study dataset will hold: measured ones (and endpoint tables), the summaries'
    (one value per group of their ``by`` axes) and ``<theory>_residual`` of each theory measured with
    its measurement."""
    out = dict(_variables(spec))
    for options in _summary_options(spec):
        if options is not None:
            for name in SUMMARY_KINDS[options.kind].attrs(options, _AxisKeys()):
                out.setdefault(name, Variable(name, name, ()))
    for v in list(out.values()):
        if v.theory_of in out:
            out[residual_name(v.name)] = Variable(residual_name(v.name), v.label, tuple(d for d in v.dims if d != "time"))
    return out


class ClaimCheck:
    """What a relation's ``problems(options, check)`` checks with; key paths are below the claim's."""

    def __init__(self, claim, variables: dict[str, Variable], points: list[dict] | None, where: tuple):
        self.claim, self.variables, self.points, self.where = claim, variables, points, where

    def problem(self, key: tuple, message: str) -> list[Problem]:
        return [(self.where + key, message)]

    def axis(self, name: str, variable: str, key: tuple, what: str) -> list[Problem]:
        """``name`` is a sweep axis or a dimension of ``variable``."""
        if self.points is None or (self.points and name in self.points[0]):
            return []
        dims = [d for d in self.variables[variable].dims] if variable in self.variables else []
        if name in dims:
            return []
        choices = (list(self.points[0]) if self.points else []) + dims
        return self.problem(key, f"{what} {name!r} is neither a sweep axis nor a dimension of {variable!r}"
                                 f"{suggest(name, choices)}; choose one of {', '.join(choices) or '(none: no sweep)'}")

    def quantity(self, q: QuantitySpec, key: tuple, along: str | None = None) -> list[Problem]:
        """The variable exists, ``where`` selects sweep points or its dims, ``reduce`` names its dims or
        sweep axes (final and initial: time), and ``along`` is neither selected to one value nor reduced."""
        out = _check_variable(q.variable, self.variables, ANY, self.where + key + ("variable",))
        if out:
            return out
        out += _where_problems(q.where, self.points, self.where + key + ("where",), [self.variables[q.variable]])
        for dim, how in q.reduce.items():
            out += self.axis(dim, q.variable, key + ("reduce", dim), "reduce")
            if how in ("final", "initial") and dim != "time":
                out += self.problem(key + ("reduce", dim), f"{how} reduces time only; use mean, median, min or max "
                                                           f"over {dim!r}")
        if along is not None:
            out += self.axis(along, q.variable, ("relation", "along"), "along")
            if along in q.reduce or (along in q.where and not isinstance(q.where[along], list)):
                out += self.problem(("relation", "along"), f"the quantity is read along {along!r}; do not reduce it "
                                                           "or select one value of it")
        return out

    def time(self, variable: str, key: tuple) -> list[Problem]:
        """``variable`` is a time (units t = η₀·step)."""
        v = self.variables.get(variable)
        if v is None or v.units == TIME_UNITS:
            return []
        times = [n for n, x in self.variables.items() if x.units == TIME_UNITS]
        return self.problem(key, f"{variable!r} is not a time; 'before' compares times ({', '.join(times) or 'none measured'})")

    def needs_tolerance(self, kind: str) -> list[Problem]:
        if self.claim.tolerance is None:
            return self.problem(("tolerance",), f"an {kind} claim needs a tolerance: {{value: …, reason: …}} (the "
                                                "spread it allows and why)")
        return []

    def values(self, axis: str) -> list | None:
        """The sweep values of ``axis`` (None: not a sweep axis, or the sweep has problems)."""
        if not self.points or axis not in self.points[0]:
            return None
        return list(dict.fromkeys(p[axis] for p in self.points))

    def labels(self, axis: str) -> list[str]:
        """The values of ``axis`` that are labels, not numbers."""
        return sorted({str(v) for v in self.values(axis) or [] if not isinstance(v, (int, float))})


def figure_problems(claim, figures: list[str], where: tuple) -> list[Problem]:
    """Each of the claim's ``figures`` is a figure of the study, named once."""
    out: list[Problem] = []
    for j, name in enumerate(claim.figures):
        key = where + ("figures", j)
        if name not in figures:
            out.append((key, f"figure {name!r} is not a figure of this study{suggest(name, figures)}; choose one of "
                             f"{', '.join(figures) or '(none: add it under figures:)'}"))
        elif claim.figures.index(name) != j:
            out.append((key, f"figure {name!r} is named twice; name it once"))
    return out


def variant_problems(claim, variants: list[str], where: tuple) -> list[Problem]:
    """Each of the claim's ``variants`` is a variant of the study ('default' or a name under variants:)."""
    return [(where + ("variants", j), f"variant {name!r} is not a variant of this study{suggest(name, variants)}; "
                                     f"choose among {', '.join(variants)}")
            for j, name in enumerate(claim.variants) if name not in variants]


def claim_problems(spec: StudySpec, points: list[dict] | None, variant: str = "default",
                   variants: list[str] | None = None) -> list[Problem]:
    """Names are unique; each claim names variants of the study; the figures, quantity and relation of a
    claim judged in ``variant`` are the study's and pass :class:`ClaimCheck` (a claim of another variant is
    checked when that variant is loaded: its selection may name sweep values, variables and figures only
    that variant has)."""
    variables = dataset_variables(spec)
    names = [c.name for c in spec.claims]
    figures = [f.name for f in spec.figures]
    out: list[Problem] = []
    for i, claim in enumerate(spec.claims):
        where = ("claims", i)
        if names.count(claim.name) > 1:
            out.append((where + ("name",), f"claim name {claim.name!r} is used twice"))
        out += variant_problems(claim, variants or ["default"], where)
        if not judged_in(claim, variant):
            continue
        out += figure_problems(claim, figures, where)
        check = ClaimCheck(claim, variables, points, where)
        relation = RELATIONS[claim.relation.kind]
        found = check.quantity(claim.quantity, ("quantity",), relation.along(claim.relation))
        out += found
        if not found:
            out += relation.problems(claim.relation, check)
    return out
