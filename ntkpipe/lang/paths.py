"""Nested spec mappings addressed by key paths, e.g. ``("model", "width")``."""

from __future__ import annotations

from typing import Any

MISSING = object()
"""What :func:`get_path` returns for an absent key when asked to tell it from a stored None."""


def get_path(node: Any, path: tuple[str | int, ...], default: Any = None) -> Any:
    """The value at ``path`` in nested mappings, or ``default`` when a key on the way is absent."""
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def set_path(node: dict, path: tuple[str, ...], value: Any) -> None:
    """Set the value at ``path``, creating the mappings on the way."""
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
