"""A run's final measurements: which apply to it, how each is keyed, which ones its store holds.

A run's id hashes only what training and its checkpoint measurements need; final measurements
(``when: final``) are computed by the training job when it runs and, when a study later asks for
one its store lacks, by a final job reading that store. An item is keyed by the canonical JSON of
its resolved config (name, options and the variables it computes); a run store lists its items in the
attribute ``final_items``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ntkpipe.lang.identity import canonical, canonical_json
from ntkpipe.lang.schema import MeasureItem, RunSpec
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.store import verified_attrs

FINAL_ITEMS_ATTR = "final_items"


def is_final(item: MeasureItem | dict) -> bool:
    name = item["name"] if isinstance(item, dict) else item.name
    return REGISTRY[name].when == "final"


def run_final_items(run: RunSpec) -> tuple[MeasureItem, ...]:
    """The final items of ``run.measure`` that have values for this run (a where-applicable one
    whose requirements the run does not meet has none)."""
    return tuple(item for item in run.measure if is_final(item)
                 and not (REGISTRY[item.name].where_applicable and REGISTRY[item.name].unmet(run)))


def item_config(item: MeasureItem) -> dict:
    """The item's name and options, and the variables its record computes: a store whose item was
    measured before the record gained a variable (e.g. ``two_layer_theory``'s loss) lacks it, and a final
    job measures it again (never a retraining: final items are not in run ids)."""
    return canonical({**item.model_dump(mode="json"), "outputs": sorted(v.name for v in REGISTRY[item.name].variables)})


def item_key(item: MeasureItem) -> str:
    return canonical_json(item_config(item))


def final_items_attr(items) -> str:
    """The ``final_items`` attribute of a run store holding ``items``."""
    return json.dumps([item_config(item) for item in items], sort_keys=True)


def stored_final_items(path: str | Path, expect_id: str) -> frozenset[str] | None:
    """Keys of the final items the run store at ``path`` holds; None if it is not done (then its
    training job makes them all). The fast check of done, as the Snakefile's, keeps planning cheap."""
    attrs = verified_attrs(path, expect_id)
    if attrs is None:
        return None
    return frozenset(canonical_json(item) for item in json.loads(attrs.get(FINAL_ITEMS_ATTR, "[]")))
