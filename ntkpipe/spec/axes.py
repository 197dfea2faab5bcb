"""Sweep axes: each sweepable spec leaf under one unique short name (``sigma`` → ``model.sigma``).

Sections may be unions (``model`` is one spec per architecture): an axis names the same key path
in every member that has it, and a run whose architecture lacks the key is a validation error
("unknown key") at the sweep value that set it.
"""

from __future__ import annotations

import difflib
import types
import typing

from pydantic import BaseModel

from ntkpipe.spec.schema import DataSpec, ModelSpec, TrainSpec

SWEEPABLE_SECTIONS = {"data": DataSpec, "model": ModelSpec, "train": TrainSpec}
NOT_SWEEPABLE_FIELDS = {"classes", "path", "stage", "architecture", "shape", "groups", "conv", "dense"}
"""Fields that select structure rather than a value (vary them with a ``cases`` axis)."""


def models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation admits (through Annotated, unions and Optional)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in models_in(arg)]
    return []


def _leaf_axes(annotation, prefix: tuple[str, ...], found: dict[str, tuple[str, ...]]) -> None:
    for model in models_in(annotation):
        for name, field in model.model_fields.items():
            path = prefix + (name,)
            if models_in(field.annotation):
                _leaf_axes(field.annotation, path, found)
                continue
            if name in NOT_SWEEPABLE_FIELDS:
                continue
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            axis_name = extra.get("axis", name)
            if found.get(axis_name, path) != path:
                raise TypeError(f"axis name {axis_name!r} is used by {found[axis_name]} and {path}")
            found[axis_name] = path


def _build() -> dict[str, tuple[str, ...]]:
    axes: dict[str, tuple[str, ...]] = {"seed": ("seed",)}
    for section, annotation in SWEEPABLE_SECTIONS.items():
        _leaf_axes(annotation, (section,), axes)
    return axes


AXES: dict[str, tuple[str, ...]] = _build()
"""Axis name → key path in the study spec."""


def suggest(word: str, choices) -> str:
    """`` (did you mean 'x'?)`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
