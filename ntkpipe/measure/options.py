"""Options of a measurement, declared once: the validator, the defaults and the compute function
all read the :class:`Option` records of :data:`ntkpipe.measure.REGISTRY`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """One option: ``name: kind = default``, with an optional closed range [low, high] (open on
    a side where ``open_low`` / ``open_high``)."""

    name: str
    kind: type
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid for this option, or None."""
        numeric = (int, float) if self.kind is float else (self.kind,)
        if isinstance(value, bool) and self.kind is not bool or not isinstance(value, numeric):
            return f"option {self.name!r} takes a {self.kind.__name__}, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"option {self.name!r} must be a finite number, got {value!r}"
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            return f"option {self.name!r} must be {'>' if self.open_low else '>='} {self.low}, got {value!r}"
        if self.high is not None and (value >= self.high if self.open_high else value > self.high):
            return f"option {self.name!r} must be {'<' if self.open_high else '<='} {self.high}, got {value!r}"
        return None

    def describe(self) -> str:
        return f"{self.name} ({self.kind.__name__}, default {self.default!r}): {self.doc}"
