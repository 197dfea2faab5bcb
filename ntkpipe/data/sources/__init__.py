"""The data sources, by ``data.source`` name: one module per source, each holding its record
(:class:`~ntkpipe.data.sources.base.Source`: options, loader, input shape, outputs, classes, local files).

To add a source, write its module (copy the nearest one) and list it here; the language, validation,
run ids, resources and the generated tests read the record.
"""

from __future__ import annotations

from ntkpipe.data.sources import cifar10, digits, gaussian_mixture, linear_teacher, mnist, nad, random_labels
from ntkpipe.data.sources.base import Source

SOURCES: dict[str, Source] = {module.SOURCE.name: module.SOURCE for module in (
    linear_teacher, random_labels, gaussian_mixture, digits, mnist, cifar10, nad)}
"""``data.source`` → its record, in the order the docs list them."""

__all__ = ["SOURCES", "Source"]
