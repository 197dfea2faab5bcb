"""Hyperparameters as powers of one scale parameter d (the study key ``scaling``; solvable-model Sec. 3).

    scaling:
      d: [1, 2, 4, 8]            # values (or {geomspace: [...]}, as in a sweep): the axis ``d``
      reference: 1               # d₀: every parameter has its spec value at d = d₀
      powers: {width: 1, output_scale: -0.5, layer_variance: [0, 0], lr: 0}

gives each run p(d) = p₀ · (d/d₀)^power for every powered parameter p, p₀ its value in the run's
config (after variant and case overrides; a case axis may override ``powers`` per case, e.g. one case
per scaling of a phase diagram). Parameters are named by their sweep-axis names; integer fields are
rounded; a derived value is then validated like any other (reported at its ``powers`` key).
"""

from __future__ import annotations

import math
import types
import typing
from typing import TYPE_CHECKING, Any

from ntkpipe.lang.axes import AMBIGUOUS, AXES, SWEEPABLE_SECTIONS, models_in, suggest
from ntkpipe.lang.paths import get_path, set_path

if TYPE_CHECKING:
    from ntkpipe.lang.schema import ScalingSpec

AXIS = "d"
NUMERIC = ("int", "float")


class ScalingError(ValueError):
    """``name`` is the powered parameter the problem is about (None: the scaling block itself)."""

    def __init__(self, message: str, name: str | None = None):
        super().__init__(message)
        self.name = name


def _unwrap(annotation) -> list:
    """The non-None members of an annotation (through Annotated and unions)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) if a is not type(None) for m in _unwrap(a)]
    return [annotation]


def _scalar_kind(annotation) -> str | None:
    members = _unwrap(annotation)
    if members == [int]:
        return "int"
    if members and all(m in (int, float) for m in members):
        return "float"
    return None


def field_kind(path: tuple[str, ...]) -> str | None:
    """``int``, ``float``, ``list`` (of numbers) or None (not numeric) for a spec key path."""
    candidates: list[Any] = [SWEEPABLE_SECTIONS.get(path[0])] if path[0] != "seed" else [int]
    if path[0] == "seed":
        return "int"
    for key in path[1:]:
        found = []
        for annotation in candidates:
            for model in models_in(annotation):
                if key in model.model_fields:
                    found.append(model.model_fields[key].annotation)
        candidates = found
    for annotation in candidates:
        kind = _scalar_kind(annotation)
        if kind:
            return kind
        for member in _unwrap(annotation):
            if typing.get_origin(member) is list and _scalar_kind(typing.get_args(member)[0]):
                return "list"
    return None


def field_default(path: tuple[str, ...]):
    """The schema default of a spec key (None if it has none): what a run gets when the spec omits it."""
    candidates: list[Any] = [SWEEPABLE_SECTIONS.get(path[0])]
    default = None
    for key in path[1:]:
        found = []
        for annotation in candidates:
            for model in models_in(annotation):
                if key in model.model_fields:
                    field = model.model_fields[key]
                    found.append(field.annotation)
                    if key == path[-1] and not field.is_required() and default is None:
                        default = field.default
        candidates = found
    return default


def parameter_path(name: str) -> tuple[str, ...]:
    """The spec key path of a powered parameter; ScalingError for unknown or non-numeric names."""
    if name in AMBIGUOUS:
        raise ScalingError(f"{name!r} names several spec keys; write {' or '.join(map(repr, AMBIGUOUS[name]))}", name)
    if name not in AXES:
        numeric = [a for a in AXES if field_kind(AXES[a])]
        raise ScalingError(f"unknown parameter {name!r}{suggest(name, numeric)}; a power applies to a numeric "
                           f"spec key named as a sweep axis ({', '.join(sorted(numeric))})", name)
    if field_kind(AXES[name]) is None:
        raise ScalingError(f"{name!r} ({'.'.join(AXES[name])}) is not numeric; only numbers and lists of numbers "
                           "scale with d (vary other keys with a case axis)", name)
    return AXES[name]


def _scaled(base, power, factor_of, name: str):
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise ScalingError(f"{name} = {base!r} is not a number to scale", name)
    if not isinstance(power, (int, float)) or isinstance(power, bool):
        raise ScalingError(f"the power of {name} must be a number, got {power!r}", name)
    return float(f"{base * factor_of(power):.12g}")


def derive(config: dict, scaling: ScalingSpec, d: float) -> dict[tuple[str, ...], str]:
    """Set every powered parameter of ``config`` (a run's seed/data/model/train) to its value at
    ``d``, in place; returns key path → parameter name (for locating validation errors)."""
    ratio = d / scaling.reference

    def factor_of(power: float) -> float:
        return ratio ** power

    derived: dict[tuple[str, ...], str] = {}
    for name, power in scaling.powers.items():
        path = parameter_path(name)
        kind = field_kind(path)
        base = get_path(config, path)
        if base is None and path[0] != "seed":
            base = field_default(path)
        if base is None:
            raise ScalingError(f"{name} has no value to scale: give {'.'.join(path)} in the spec (its value at "
                               f"d = reference = {scaling.reference:g})", name)
        if kind == "list":
            if not isinstance(base, list):
                raise ScalingError(f"{'.'.join(path)} must be a list to scale", name)
            powers = power if isinstance(power, list) else [power] * len(base)
            if len(powers) != len(base):
                raise ScalingError(f"{name} has {len(base)} entries but {len(powers)} powers; give one per entry "
                                   "(or one number for all)", name)
            value = [_scaled(b, p, factor_of, name) for b, p in zip(base, powers)]
        else:
            if isinstance(power, list):
                raise ScalingError(f"{name} is a single number; give one power, not a list", name)
            value = _scaled(base, power, factor_of, name)
            if kind == "int":
                value = int(round(value)) if math.isfinite(value) else value
        set_path(config, path, value)
        derived[path] = name
    return derived
