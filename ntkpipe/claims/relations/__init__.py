"""The relations a claim may state (``claims[].relation.kind``), one record each (:class:`Relation`),
collected from the modules of this package: each lists its relations in ``KINDS``; ``RelationSpec`` is
the language's union of their options, told apart by ``kind``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from ntkpipe.claims.record import Relation, RelationOptions
from ntkpipe.registries import collect_kinds

__all__ = ["RELATIONS", "Relation", "RelationSpec"]

RELATIONS: dict[str, Relation] = collect_kinds("ntkpipe.claims.relations", Path(__file__).parent,
                                               lambda kind: kind.name, "claim relation")

if TYPE_CHECKING:  # a union made from the registry at import: its common base to the type checker
    RelationSpec = RelationOptions
else:
    RelationSpec = Annotated[Union[tuple(r.options for r in RELATIONS.values())],  # noqa: UP007
                             Field(discriminator="kind")]
"""A claim's relation: one relation's options, by ``kind``."""
