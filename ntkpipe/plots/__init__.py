"""Figures of a study dataset, one function per figure kind: the kind's record
(:data:`ntkpipe.lang.schema.FIGURE_KINDS`) names it, and it is imported when first drawn."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib import import_module

from ntkpipe.lang.schema import FIGURE_KINDS


class Plotters(Mapping):
    """Figure kind → its plotting function ``(dataset, figure spec, title) → Figure``, imported on lookup."""

    def __getitem__(self, kind: str) -> Callable:
        module, name = FIGURE_KINDS[kind].plotter.split(":")
        return getattr(import_module(module), name)

    def __iter__(self) -> Iterator[str]:
        return iter(FIGURE_KINDS)

    def __len__(self) -> int:
        return len(FIGURE_KINDS)


PLOTTERS = Plotters()

__all__ = ["PLOTTERS"]
