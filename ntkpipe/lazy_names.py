"""A package's public names imported on first use (a module ``__getattr__``, PEP 562), so that importing
the package (the Snakefile's planning, a dry run) does not import JAX, xarray and the library behind them."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_getattr(package: str, home: dict[str, str], namespace: dict) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: name -> ``getattr(import_module(home[name]), name)``, kept in
    the package's ``namespace`` (its ``globals()``) after the first use."""

    def __getattr__(name: str) -> object:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name]), name)
        namespace[name] = value
        return value

    return __getattr__
