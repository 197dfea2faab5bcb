"""Sweep axes: each sweepable spec leaf under one unique short name (``sigma`` → ``model.sigma``)."""

from __future__ import annotations

import difflib

from pydantic import BaseModel

from ntkpipe.spec.schema import DataSpec, ModelSpec, TrainSpec

SWEEPABLE_SECTIONS: dict[str, type[BaseModel]] = {"data": DataSpec, "model": ModelSpec, "train": TrainSpec}
NOT_SWEEPABLE = {("data", "classes"), ("data", "path"), ("data", "labels", "stage")}


def _leaf_axes(model: type[BaseModel], prefix: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for name, field in model.model_fields.items():
        path = prefix + (name,)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found.update(_leaf_axes(annotation, path))
            continue
        if path in NOT_SWEEPABLE:
            continue
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        axis_name = extra.get("axis", name)
        if axis_name in found:
            raise TypeError(f"axis name {axis_name!r} is used by {found[axis_name]} and {path}")
        found[axis_name] = path
    return found


def _build() -> dict[str, tuple[str, ...]]:
    axes: dict[str, tuple[str, ...]] = {"seed": ("seed",)}
    for section, model in SWEEPABLE_SECTIONS.items():
        for name, path in _leaf_axes(model, (section,)).items():
            if name in axes:
                raise TypeError(f"axis name {name!r} is used by {axes[name]} and {path}")
            axes[name] = path
    return axes


AXES: dict[str, tuple[str, ...]] = _build()
"""Axis name → key path in the study spec."""


def suggest(word: str, choices) -> str:
    """`` (did you mean 'x'?)`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
