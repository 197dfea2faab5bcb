"""The building blocks of the language's models: strict models, errors located at keys, axis names.

Below both the language (:mod:`ntkpipe.lang`) and the records its schema is composed of (the data
sources of :mod:`ntkpipe.data.sources`), so that those declare their options without importing the
schema; it imports nothing of ntkpipe.
"""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict


class Strict(BaseModel):
    """Unknown keys are errors, numbers are finite (`.inf`, `1e400` and `.nan` are rejected) and types
    strict (no coercion: ``"20"``, ``20.0`` and ``true`` are not integers, ``"no"`` is not a boolean; an
    integer is a valid float); instances are immutable. A field's docstring (the string below it) is its
    description (the JSON Schema, the language reference and ``ntkpipe explain`` read it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True,
                              use_attribute_docstrings=True)


Ints = Annotated[tuple[int, ...], pydantic.Strict(False)]
"""A tuple of integers written as a YAML list (strict mode alone would want a Python tuple)."""


class CrossKeyError(ValueError):
    """A check of several keys; ``keys`` are their paths in the validated mapping, the first the one
    to fix (validation errors are located at the first that a sweep sets, else at the first)."""

    def __init__(self, message: str, *keys: tuple[str, ...]):
        super().__init__(message)
        self.keys = keys


def units(text: str) -> JsonDict:
    """The ``json_schema_extra`` of a field measured in ``text`` (the JSON Schema's ``units``, which the
    language reference shows): ``Field(None, ge=1, json_schema_extra=units("optimizer steps"))``."""
    return {"units": text}


def axis(name: str, **kwargs) -> Any:
    """A field whose sweep axis is called ``name`` instead of the field name."""
    return Field(json_schema_extra={"axis": name}, **kwargs)
