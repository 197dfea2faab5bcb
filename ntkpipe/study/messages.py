"""What a pydantic validation error says to a spec's author: where it is (the spec's key path) and
what is wrong, in one table of error types (:data:`MESSAGES`); types are strict, so a wrong type
also says how to write the wanted one (:data:`HINTS`)."""

from __future__ import annotations

import re
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from ntkpipe.lang.axes import suggest
from ntkpipe.lang.schema import CrossKeyError, StudySpec
from ntkpipe.lang.yaml_lines import KeyPath

Error = ErrorDetails | dict[str, Any]
"""A pydantic validation error (``ValidationError.errors()``), or one relocated as a dict."""


def text(error: Error) -> str:
    """The error's own message (a validator's, without pydantic's "Value error, ")."""
    return error["msg"].removeprefix("Value error, ")


def _written(kind: type, given: Any) -> str:
    """How to write ``given`` as an int or a float: a quoted number unquoted, 8.0 as 8, not a boolean."""
    if isinstance(given, str):
        try:
            return f"; write {kind(given)} without quotes"
        except ValueError:
            return ""
    if kind is int and isinstance(given, float) and given.is_integer():
        return f"; write {int(given)}"
    return "; write a number" if isinstance(given, bool) else ""


HINTS = {
    "bool_type": lambda given: "; write true or false",
    "int_type": lambda given: _written(int, given),
    "float_type": lambda given: _written(float, given),
}
"""Error type → how to write a value of the wanted type, from the value given."""


def _allowed_keys(error: Error) -> str:
    """"did you mean" one of the keys of the section an unknown key sits in, else all of them."""
    loc = tuple(error["loc"])
    model = model_at(loc[:-1])
    allowed = sorted(model.model_fields) if model else []
    return suggest(loc[-1], allowed) or (f" (allowed: {', '.join(allowed)})" if allowed else "")


def _literal(error: Error, shown: bool) -> str:
    choices = re.findall(r"'([^']*)'", error.get("ctx", {}).get("expected", ""))
    given = error.get("input")
    return f"{text(error)}{f' (got {given!r})' if shown else ''}{suggest(given, choices)}"


MESSAGES = {
    "missing": lambda error, shown: "required key is missing",
    "extra_forbidden": lambda error, shown: f"unknown key{_allowed_keys(error)}",
    "union_tag_invalid": lambda error, shown: (f"unknown architecture {error['ctx']['tag']!r}; use one of "
                                                f"{error['ctx']['expected_tags']}"),
    "literal_error": _literal,
}
"""Error type → its message, given the error and whether to show the value given. Any other type:
its own message, the value given (not for a section or a validator's message) and a :data:`HINTS` hint."""

TAG_KEYS = {"union_tag_invalid": ("architecture",)}
"""Error type → the key below its location that it is about (the tag of a union section)."""


def message(error: Error, shown: bool = True) -> str:
    """What is wrong, for ``error``: by :data:`MESSAGES`. ``shown``: say the value given (a sweep value
    names it already)."""
    if error["type"] in MESSAGES:
        return MESSAGES[error["type"]](error, shown)
    given = error.get("input")
    got = shown and not isinstance(given, (dict, list)) and not error["type"].startswith("value_error")
    return f"{text(error)}{f' (got {given!r})' if got else ''}{HINTS.get(error['type'], lambda g: '')(given)}"


def problem(error: Error, data: dict, where) -> str:
    """``line N: key.path: message`` of a validation error of ``data`` (the spec, or a section of it
    when its location starts there); ``where`` gives the line of a key path."""
    return f"{where(error_locations(error, data)[0] + TAG_KEYS.get(error['type'], ()))}: {message(error)}"


def data_path(loc: tuple, data: Any) -> KeyPath:
    """Map a pydantic error location onto the spec's key path, dropping union tags."""
    path: list = []
    node = data
    for elem in loc:
        if isinstance(node, dict) and elem in node:
            path.append(elem)
            node = node[elem]
        elif isinstance(node, list) and isinstance(elem, int) and elem < len(node):
            path.append(elem)
            node = node[elem]
        elif isinstance(node, dict) and not isinstance(elem, int) and (elem not in node) and elem == loc[-1]:
            path.append(elem)
    return tuple(path)


def model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model whose fields live at ``loc`` (for 'did you mean' suggestions)."""
    current: Any = StudySpec
    for elem in loc:
        current = _step(current, elem)
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _step(annotation: Any, elem: Any) -> Any:
    """The annotation at location element ``elem`` below ``annotation`` (a field, a list item, a
    dict value, the union member a tag, discriminator value or model name selects), or None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _step(typing.get_args(annotation)[0], elem)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(elem)
        return field.annotation if field else None
    if origin in (list,) and isinstance(elem, int):
        return typing.get_args(annotation)[0]
    if origin in (dict,) and isinstance(elem, str):
        return typing.get_args(annotation)[1]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    for arg in args:  # tagged members (Annotated[Model, Tag(name)]): the tag is a location element
        if typing.get_origin(arg) is typing.Annotated:
            model, *metadata = typing.get_args(arg)
            if any(getattr(m, "tag", None) == elem for m in metadata):
                return model
    args = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in args]
    for arg in args:  # unions: a discriminator value (figure kind, stage compute) names one member
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            for tag in ("kind", "compute"):
                field = arg.model_fields.get(tag)
                if field is not None and elem in typing.get_args(field.annotation):
                    return arg
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    if len(models) == 1 and elem == models[0].__name__:
        return models[0]
    if len(args) == 1:
        return _step(args[0], elem)
    return None


def error_locations(error: Error, data: dict) -> list[KeyPath]:
    """Key paths of a validation error in ``data``: its location, or below it the keys a
    :class:`CrossKeyError` names (most relevant first)."""
    at = data_path(tuple(error["loc"]), data)
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, CrossKeyError):
        return [at + tuple(key) for key in cause.keys]
    return [at]
