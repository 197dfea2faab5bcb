"""Sweep axes: each sweepable spec leaf under a short name (``sigma`` → ``model.sigma``).

A short name that two sections share (``gamma``: the partial-whitening γ of ``data`` and the
feature-learning rate γ of ``model``) is ambiguous: a sweep writes it qualified (``data.gamma``,
``model.gamma``) and the study dataset still names the dimension ``gamma``.

Sections may be unions (``model`` is one spec per architecture): an axis names the same key path
in every member that has it, and a run whose architecture lacks the key is a validation error
("unknown key") at the sweep value that set it.
"""

from __future__ import annotations

import difflib
import types
import typing

from pydantic import BaseModel

from ntkpipe.lang.schema import DataSpec, ModelSpec, TrainSpec

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


def _leaf_axes(annotation, prefix: tuple[str, ...], found: dict[str, list[tuple[str, ...]]]) -> None:
    for model in models_in(annotation):
        for name, field in model.model_fields.items():
            path = prefix + (name,)
            if models_in(field.annotation):
                _leaf_axes(field.annotation, path, found)
                continue
            if name in NOT_SWEEPABLE_FIELDS:
                continue
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            paths = found.setdefault(typing.cast(str, extra.get("axis", name)), [])  # axis() writes a str
            if path not in paths:
                if paths and paths[0][0] == path[0]:
                    raise TypeError(f"axis name {name!r} is used twice in section {path[0]!r}: {paths[0]}, {path}")
                paths.append(path)


def _build() -> tuple[dict[str, tuple[str, ...]], dict[str, list[str]]]:
    found: dict[str, list[tuple[str, ...]]] = {"seed": [("seed",)]}
    for section, annotation in SWEEPABLE_SECTIONS.items():
        _leaf_axes(annotation, (section,), found)
    axes, ambiguous = {}, {}
    for name, paths in found.items():
        if len(paths) == 1:
            axes[name] = paths[0]
            continue
        ambiguous[name] = [f"{path[0]}.{name}" for path in paths]
        axes.update({f"{path[0]}.{name}": path for path in paths})
    return axes, ambiguous


AXES, AMBIGUOUS = _build()
"""Axis name → key path in the study spec; ambiguous short name → its qualified axis names."""


def dimension(axis_name: str) -> str:
    """The study-dataset dimension of an axis: its short name (``model.gamma`` → ``gamma``)."""
    return axis_name.rsplit(".", 1)[-1]


def suggest(word: object, choices) -> str:
    """`` (did you mean 'x'?)`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
