"""Sweep grammar: which runs a study contains.

A sweep node is a mapping whose entries are combined as a Cartesian product:

    axis: values            an axis (see ``axes.AXES``) and its values
    zip: {a: [...], b: [...]}   axes varied together (equal lengths)
    union: [node, node]     the concatenation of sub-grids (e.g. σ ranges per depth); a sub-grid may
                            leave out an axis the others set (e.g. a task without an eigenfunction
                            index): its runs sit at that axis' coordinate 0 (numbers) or "none"
    product: [node, node]   an explicit product of sub-nodes
    cases: {name: {label: overrides}}   a new axis ``name`` whose values are labels, each a set of
                            spec overrides merged into the run (e.g. two datasets that differ in
                            several keys); its coordinate in the dataset is the label. A case axis
                            named like a spec axis (``activation: {relu: {...}, linear: {...}}``)
                            also sets that axis to the label, after the overrides (which may not
                            set it themselves). Overrides may also change the study's ``scaling``
                            powers (e.g. one case per scaling of a phase diagram)

Values are a list, or ``{logspace: [e0, e1, n]}`` (10^e, numpy.logspace), ``{geomspace: [a, b, n]}``,
``{linspace: [a, b, n]}`` or ``{range: [start, stop, step]}`` (integers, stop exclusive).
An empty sweep is one run.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ntkpipe.lang.axes import AMBIGUOUS, AXES, dimension, suggest
from ntkpipe.lang.identity import significant
from ntkpipe.lang.paths import MISSING, get_path

Point = dict[str, Any]
SPECIAL = ("zip", "union", "product", "cases")
CASE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
RESERVED_NAMES = ("time", "step", "epoch", "method", "tolerance", "drop")  # dims, or keywords of xarray's .sel
OVERRIDABLE = ("seed", "data", "model", "train", "scaling")
GENERATORS = ("logspace", "geomspace", "linspace", "range")


class SweepError(ValueError):
    """``key_path`` locates the problem inside the ``sweep`` mapping."""

    def __init__(self, message: str, key_path: tuple = ()):
        super().__init__(message)
        self.key_path = key_path


def clean_number(value):
    """Round floats to 12 significant digits (:func:`~ntkpipe.lang.identity.significant`) so 0.1 and
    10**-1 are one coordinate."""
    if isinstance(value, (float, np.floating)):
        return significant(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _generator_args(spec, key_path: tuple) -> tuple[str, list]:
    """The name and checked arguments of a value generator ``{name: [a, b, n]}``: numbers (not
    booleans), ``n`` a positive integer count, or for ``range`` three integers with a non-zero step."""
    (gen, args), = spec.items()
    if gen not in GENERATORS:
        raise SweepError(f"unknown value generator {gen!r}{suggest(gen, GENERATORS)}; "
                         f"use one of {', '.join(GENERATORS)} or a list", key_path + (gen,))
    if not (isinstance(args, list) and len(args) == 3
            and all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)):
        raise SweepError(f"{gen} takes three numbers [start, stop, count_or_step], got {args!r}",
                         key_path + (gen,))
    if gen == "range":
        if not all(isinstance(a, int) for a in args) or args[2] == 0:
            raise SweepError(f"range takes three integers [start, stop, step] with a non-zero step, got {args!r}",
                             key_path + (gen,))
    elif not isinstance(args[2], int) or args[2] < 1:
        raise SweepError(f"{gen} count must be a positive integer, got {args[2]!r}", key_path + (gen,))
    return gen, args


def axis_length(spec) -> int:
    """How many values :func:`axis_values` gives, without making them (SweepError as it would raise)."""
    if isinstance(spec, list):
        return len(spec)
    if isinstance(spec, dict) and len(spec) == 1:
        gen, (a, b, n) = _generator_args(spec, ())
        return len(range(a, b, n)) if gen == "range" else n
    return 0  # not an axis: reported by axis_values


def axis_values(spec, key_path: tuple) -> list:
    """Expand one axis' value spec into a list."""
    if isinstance(spec, list):
        if not spec:
            raise SweepError("an axis needs at least one value", key_path)
        return [clean_number(v) for v in spec]
    if isinstance(spec, dict) and len(spec) == 1:
        gen, (a, b, n) = _generator_args(spec, key_path)
        if gen == "range":
            values = list(range(a, b, n))
        else:
            fn = {"logspace": np.logspace, "geomspace": np.geomspace, "linspace": np.linspace}[gen]
            if gen == "geomspace" and (a <= 0 or b <= 0):
                raise SweepError("geomspace endpoints must be positive", key_path + (gen,))
            values = list(fn(a, b, n))
        if not values:
            raise SweepError(f"{gen}{[a, b, n]} gives no values", key_path + (gen,))
        return [clean_number(v) for v in values]
    raise SweepError(f"axis values must be a list or one of {{{', '.join(GENERATORS)}: [...]}}, "
                     f"got {spec!r} (write a single value as [value])", key_path)


def _product(left: list[Point], right: list[Point], key_path: tuple) -> list[Point]:
    out = []
    for p in left:
        for q in right:
            shared = set(p) & set(q)
            if shared:
                raise SweepError(f"axis {sorted(shared)[0]!r} is set twice in one product", key_path)
            out.append({**p, **q})
    return out


def expand(node, key_path: tuple = (), extra: tuple[str, ...] = (), errors: list[SweepError] | None = None) -> list[Point]:
    """All points of a sweep node, in order; ``extra`` names axes besides the spec's (``d`` of a
    study with a ``scaling``). With an ``errors`` list, every broken entry is appended to it (and
    left out) instead of raising at the first."""
    if node is None or node == {}:
        return [{}]
    if not isinstance(node, dict):
        raise SweepError(f"a sweep node must be a mapping, got {type(node).__name__}", key_path)
    points: list[Point] = [{}]
    for key, value in node.items():
        here = key_path + (key,)
        try:
            points = _product(points, _entry(key, value, here, extra, errors), here)
        except SweepError as err:
            if errors is None:
                raise
            errors.append(err)
    return points


def _entry(key, value, here: tuple, extra: tuple[str, ...], errors: list[SweepError] | None) -> list[Point]:
    """The points of one entry ``key: value`` of a sweep node."""
    if key == "zip":
        return _zip(value, here, extra)
    if key == "cases":
        sub = [{}]
        for name, labels in _cases(value, here).items():
            sub = _product(sub, [{name: label} for label in labels], here)
        return sub
    if key in ("union", "product"):
        if not isinstance(value, list) or not value:
            raise SweepError(f"{key} takes a non-empty list of sweep nodes", here)
        parts = [expand(v, here + (i,), extra, errors) for i, v in enumerate(value)]
        if key == "union":
            return [p for part in parts for p in part]
        sub = [{}]
        for part in parts:
            sub = _product(sub, part, here)
        return sub
    if key in AXES or key in extra:
        return [{key: v} for v in axis_values(value, here)]
    if key in AMBIGUOUS:
        raise SweepError(_ambiguous(key), here)
    hint = " (the axis d needs a 'scaling' block)" if key == "d" else ""
    raise SweepError(f"unknown sweep axis {key!r}{suggest(key, list(AXES) + list(SPECIAL))}{hint}", here)


def count_points(node, axis: str | None = None) -> tuple[int, int]:
    """How many points :func:`expand` gives for a sweep node, and how many of them set ``axis``,
    computed from the axis lengths without making the points (sums over unions, products
    otherwise). Broken entries count as one value (:func:`expand` reports them)."""
    if not isinstance(node, dict):
        return 1, 0
    total, with_axis = 1, 0
    for key, value in node.items():
        if key in ("union", "product") and isinstance(value, list) and value:
            parts = [count_points(v, axis) for v in value]
            if key == "union":
                n, w = sum(p[0] for p in parts), sum(p[1] for p in parts)
            else:
                n, w = _product_counts(parts)
        elif key == "cases" and isinstance(value, dict):
            n, w = math.prod(len(labels) if isinstance(labels, dict) else 1 for labels in value.values()), 0
        elif key == "zip" and isinstance(value, dict) and value:
            n = max(_safe_length(v) for v in value.values())
            w = n if axis in value else 0
        else:
            n = _safe_length(value)
            w = n if key == axis else 0
        total, with_axis = _product_counts([(total, with_axis), (n, w)])
    return total, with_axis


def _product_counts(parts: list[tuple[int, int]]) -> tuple[int, int]:
    """(points, points that set the axis) of a product: those that set it in any factor."""
    total, without = math.prod(n for n, _ in parts), math.prod(n - w for n, w in parts)
    return total, total - without


def _safe_length(spec) -> int:
    try:
        return max(axis_length(spec), 1)
    except SweepError:
        return 1


def _ambiguous(key: str) -> str:
    return (f"axis {key!r} names several spec keys; write {' or '.join(repr(k) for k in AMBIGUOUS[key])} "
            f"(the dataset dimension is still {key!r})")


def to_dimensions(points: list[Point]) -> tuple[list[Point], dict[str, str]]:
    """Points keyed by dataset dimension (``model.gamma`` → ``gamma``), and dimension → axis key."""
    keys: dict[str, str] = {}
    for key in dict.fromkeys(k for p in points for k in p):
        dim = dimension(key)
        if keys.setdefault(dim, key) != key:
            raise SweepError(f"the sweep sets both {keys[dim]!r} and {key!r}, which would share the dataset "
                             f"dimension {dim!r}; vary one of them with a case axis")
    return [{dimension(k): v for k, v in p.items()} for p in points], keys


def _zip(value, key_path: tuple, extra: tuple[str, ...] = ()) -> list[Point]:
    if not isinstance(value, dict) or not value:
        raise SweepError("zip takes a mapping of axis: values", key_path)
    columns = {}
    for key, spec in value.items():
        if key in AMBIGUOUS:
            raise SweepError(_ambiguous(key), key_path + (key,))
        if key not in AXES and key not in extra:
            raise SweepError(f"unknown sweep axis {key!r}{suggest(key, AXES)}", key_path + (key,))
        columns[key] = axis_values(spec, key_path + (key,))
    lengths = {k: len(v) for k, v in columns.items()}
    if len(set(lengths.values())) != 1:
        raise SweepError(f"zip needs equal lengths, got {lengths}", key_path)
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


def _cases(value, key_path: tuple) -> dict[str, dict[str, dict]]:
    """Validate a ``cases`` block: {axis name: {label: overrides}}."""
    if not isinstance(value, dict) or not value:
        raise SweepError("cases takes a mapping of new axis names to {label: overrides}", key_path)
    for name, labels in value.items():
        here = key_path + (name,)
        if name in AMBIGUOUS:
            raise SweepError(f"{name!r} names several spec keys ({', '.join(AMBIGUOUS[name])}); give the case "
                             "axis another name", here)
        if name in RESERVED_NAMES:
            raise SweepError(f"case axis name {name!r} is reserved ({', '.join(RESERVED_NAMES)}); choose another", here)
        if not CASE_NAME.match(str(name)):
            raise SweepError(f"case axis {name!r}: use lowercase letters, digits and underscores", here)
        if not isinstance(labels, dict) or not labels:
            raise SweepError(f"case axis {name!r} takes a mapping of labels to overrides", here)
        for label, overrides in labels.items():
            if not isinstance(overrides, dict):
                raise SweepError(f"case {name}={label!r} must be a mapping of spec keys to override",
                                 here + (label,))
            for key in overrides:
                if key not in OVERRIDABLE:
                    raise SweepError(f"case {name}={label!r} may override {', '.join(OVERRIDABLE)}, not {key!r}"
                                     f"{suggest(key, OVERRIDABLE)}", here + (label, key))
            scaling = overrides.get("scaling")
            if isinstance(scaling, dict) and "d" in scaling:
                raise SweepError(f"case {name}={label!r}: the values of d are the study's (scaling.d); a case may "
                                 "override scaling.powers and scaling.reference", here + (label, "scaling", "d"))
            if name in AXES and get_path(overrides, AXES[name], MISSING) is not MISSING:
                raise SweepError(f"case {name}={label!r} sets {'.'.join(AXES[name])}, which the label sets; "
                                 "remove it from the overrides", here + (label,))
    return value


def case_overrides(node, key_path: tuple = ()) -> dict[str, dict[str, tuple[tuple, dict]]]:
    """Every case axis in a sweep: name → {label: (key path of its definition, overrides)}.

    Sub-grids of a union may each list some labels of one case axis (e.g. ``optimizer_case: sgd``
    in one, ``adam`` in another); a label defined twice must have the same overrides.
    """
    found: dict[str, dict[str, tuple[tuple, dict]]] = {}

    def add(name: str, label: str, path: tuple, overrides: dict) -> None:
        known = found.setdefault(name, {})
        if label in known and known[label][1] != overrides:
            raise SweepError(f"case {name}={label!r} is defined twice with different overrides", path)
        known.setdefault(label, (path, overrides))

    def visit(sub, path: tuple) -> None:
        if isinstance(sub, dict):
            for key, value in sub.items():
                if key == "cases" and isinstance(value, dict):
                    for name, labels in value.items():
                        for label, overrides in (labels.items() if isinstance(labels, dict) else ()):
                            add(name, label, path + (key, name, label), overrides)
                else:
                    visit(value, path + (key,))
        elif isinstance(sub, list):
            for i, value in enumerate(sub):
                visit(value, path + (i,))

    visit(node, key_path)
    return found


def check_unique(points: list[Point]) -> None:
    """Two identical points would be one run listed twice: an error, not a silent dedup."""
    seen = {}
    for i, p in enumerate(points):
        key = tuple(sorted(p.items(), key=lambda kv: kv[0]))
        if key in seen:
            raise SweepError(f"the sweep lists the point {p} twice (points {seen[key]} and {i})")
        seen[key] = i


NOT_SET = {True: 0, False: "none"}
"""Coordinate of a point that does not set an axis: 0 on a numeric axis, "none" on a label axis."""


def fill_unset_axes(points: list[Point]) -> list[Point]:
    """Points with every axis of the sweep, those a union sub-grid leaves out at :data:`NOT_SET`."""
    axes = list(dict.fromkeys(k for p in points for k in p))
    filled = [dict(p) for p in points]
    for a in axes:
        given = [p[a] for p in points if a in p]
        if len(given) == len(points):
            continue
        fill = NOT_SET[all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given)]
        for p in filled:
            p.setdefault(a, fill)
    filled = [{a: p[a] for a in axes} for p in filled]
    try:
        check_unique(filled)
    except SweepError as err:
        raise SweepError(f"{err}: a union sub-grid that leaves an axis out sits at its coordinate 0 or "
                         "'none'; give that axis in every sub-grid, or tell the sub-grids apart by a case axis") from None
    return filled
