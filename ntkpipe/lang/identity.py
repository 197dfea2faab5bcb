"""Content identity: a run or stage is named by a hash of its resolved parameters (signac's
``calc_id`` habit). Keys are sorted and floats rounded to 12 significant digits, so ``1e-3``,
``0.001`` and ``10**-3`` give one id, and any change of value gives a new one."""

from __future__ import annotations

import hashlib
import json
from typing import Any, SupportsFloat

ID_LENGTH = 16


def significant(value: SupportsFloat) -> float:
    """``value`` rounded to 12 significant digits (``0.1`` and ``10**-1`` are one number)."""
    return float(f"{float(value):.12g}")


def canonical(obj: Any) -> Any:
    """Normalize a JSON-like value: floats to 12 significant digits, tuples to lists."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return significant(obj)
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    raise TypeError(f"cannot hash a {type(obj).__name__} in a config: {obj!r}")


def canonical_json(obj: Any) -> str:
    """The canonical text of ``obj`` (sorted keys, no whitespace)."""
    return json.dumps(canonical(obj), sort_keys=True, separators=(",", ":"))


def content_id(obj: Any) -> str:
    """First 16 hex digits of the SHA-256 of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:ID_LENGTH]
