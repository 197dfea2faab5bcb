"""One run's part of a study dataset: its store's variables, with each final measurement the study
asks for taken from the store that holds it with the study's options (the run store, or the run's
final store), and none it does not ask for (other studies' final items, the saved final state)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import cast

import xarray as xr

from ntkpipe.errors import ResultError
from ntkpipe.lang.identity import canonical_json
from ntkpipe.measure.registry import MEASUREMENTS, REGISTRY
from ntkpipe.store import load_store
from ntkpipe.study.final_items import FINAL_ITEMS_ATTR, item_key
from ntkpipe.study.plan import FinalJob, RunJob
from ntkpipe.train.final_state import is_state_variable

FINAL_VARIABLES = frozenset(v.name for m in MEASUREMENTS if m.when == "final" for v in m.variables)


def _variables(items) -> set[str]:
    return {v.name for m in items for v in REGISTRY[m.name].variables}


def run_dataset(job: RunJob, final: FinalJob | None) -> xr.Dataset:
    """The variables of run ``job`` for its study (``final``: its final job, if it has one)."""
    store = load_store(job.path, expect_id=job.id)
    added = {item_key(m) for m in final.items} if final else set()
    from_run = [m for m in job.finals if item_key(m) not in added]
    held = {canonical_json(m) for m in json.loads(store.attrs.get(FINAL_ITEMS_ATTR, "[]"))}
    lacking = [m.name for m in from_run if item_key(m) not in held]
    if lacking:
        raise ResultError(f"{job.path}: lacks the final measurements {', '.join(lacking)} that the study asks for; "
                          "rerun the workflow (it plans a final job for them)")
    unasked = FINAL_VARIABLES - _variables(from_run)
    names = cast("Iterable[str]", store.data_vars)  # ntkpipe names its variables by str
    ds = store[[k for k in names if k not in unasked and not is_state_variable(k)]].load()
    if final is not None:
        extra = load_store(final.path, expect_id=final.id)
        ds = xr.merge([ds, extra[sorted(_variables(final.items) & set(extra.data_vars))].load()],
                      compat="no_conflicts", join="outer", combine_attrs="drop_conflicts")
    return without_attrs(ds).assign_attrs(store.attrs)


def without_attrs(ds: xr.Dataset) -> xr.Dataset:
    """``ds.drop_attrs()``: a shallow copy without the attrs of the dataset, its variables and its
    coordinates. (xarray's assigns the variables back one at a time, each an alignment of the whole
    dataset: 0.04 s per run store of ``phase_diagram``.)"""
    out = ds.copy(deep=False)
    out.attrs = {}
    for variable in out.variables.values():
        variable.attrs = {}
    return out
