"""Registries collected from a package's modules: each module lists its records in ``KINDS``."""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from importlib import import_module
from pathlib import Path


def collect_kinds(package: str, directory: str | Path, name: Callable, what: str) -> dict:
    """The ``KINDS`` of every module of ``package`` (in ``directory``), by ``name(record)``, in module-name
    order; a name given twice is an error naming the ``what`` and the module."""
    kinds: dict = {}
    for info in sorted(pkgutil.iter_modules([str(directory)]), key=lambda i: i.name):
        for kind in getattr(import_module(f"{package}.{info.name}"), "KINDS", ()):
            if name(kind) in kinds:
                raise ValueError(f"{what} {name(kind)!r} is defined twice (module {package}.{info.name})")
            kinds[name(kind)] = kind
    return kinds
