"""The results directory as a whole: the stores the specs plan, the stores and leftovers it holds,
invalid stores set aside (so Snakemake reruns their jobs), and cleaning.

A store is *done* when :func:`ntkpipe.store.verify_store` finds no problem; the Snakefile, ``ntkpipe
plan``, ``ntkpipe verify`` and ``ntkpipe clean`` all ask it.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ntkpipe.errors import SpecError
from ntkpipe.provenance import utc_now
from ntkpipe.store import StoreCheck, clean_command, verify_store

if TYPE_CHECKING:  # imported where specs are read: the Snakefile checks stores from its cached plan
    from ntkpipe.study.plan import StudyPlan

SET_ASIDE = ".invalid"
"""Invalid stores are moved to ``results/.invalid/`` (``ntkpipe clean --invalid`` deletes them)."""
NOT_RESULTS = {SET_ASIDE, ".cache", "logs"}
"""Top-level folders of ``results/`` that hold no stores."""
SHOWN = 10
"""Lines printed about set-aside stores before the rest is summed up."""


def planned_stores(plan: StudyPlan) -> dict[Path, str]:
    """Every store ``plan`` makes, with the id it must hold: its runs (and the network runs that
    kernel kinds read), their final jobs, its stages, and its study dataset."""
    out = {job.path: job.id for job in plan.runs + plan.support_runs}
    out.update({final.path: final.id for final in plan.finals.values()})
    out.update({stage.path: stage.id for stage in plan.stages.values()})
    out[plan.dataset_path] = plan.tag
    return out


def every_planned_store(specs: str | Path, results: str | Path) -> tuple[dict[Path, str], list[str]]:
    """The stores planned by every spec in ``specs`` in every variant (local data files need not be
    present: ids do not depend on them), and the errors of specs that could not be planned (then
    what they plan is unknown)."""
    from ntkpipe.study.load import load_study, variant_names
    from ntkpipe.study.plan import plan_study

    stores: dict[Path, str] = {}
    files = sorted(Path(specs).glob("*.yaml"))
    errors = [] if files else [f"{specs}: no study specs (*.yaml); give the specs directory with --specs"]
    for path in files:
        for variant in variant_names(path) or ["default"]:
            try:
                stores.update(planned_stores(plan_study(load_study(path, variant, data_files=False), results)))
            except SpecError as err:
                errors.append(str(err) if variant == "default" else f"[variant {variant}] {err}")
    return stores, errors


def set_aside(path: Path, results: Path) -> Path:
    """Move the store ``path`` to ``results/.invalid/<its path, dotted>-<UTC time>`` (e.g.
    ``runs.<id>.zarr-20250131T120000Z``); returns where."""
    folder = Path(results) / SET_ASIDE
    folder.mkdir(parents=True, exist_ok=True)
    name = ".".join(path.relative_to(results).parts) + "-" + utc_now().replace("-", "").replace(":", "")
    dest = folder / name
    if dest.exists():
        dest = folder / f"{name}-{uuid.uuid4().hex[:4]}"
    os.replace(path, dest)
    return dest


def set_aside_invalid(stores: dict[Path, str], results: str | Path,
                      checks: dict[Path, StoreCheck] | None = None) -> list[Path]:
    """Move every store of ``stores`` (path -> the id it must hold: :func:`planned_stores`) that
    exists but fails :func:`verify_store` (fast) to ``results/.invalid``, naming it and the reason on
    stderr; returns the stores moved. ``checks``: stores already checked in this invocation (by path;
    planning checks the run stores)."""
    results = Path(results)
    moved = []
    for path, store_id in stores.items():
        if not path.exists():
            continue
        check = (checks or {}).get(path) or verify_store(path, store_id)
        if check.valid:
            continue
        dest = set_aside(path, results)
        moved.append(path)
        if len(moved) <= SHOWN:
            print(f"ntkpipe: {path} is invalid ({check.reason}); moved to {dest}, its job reruns", file=sys.stderr)
    if len(moved) > SHOWN:
        print(f"ntkpipe: {len(moved) - SHOWN} more invalid stores moved to {results / SET_ASIDE}; their jobs rerun",
              file=sys.stderr)
    if moved:
        print(f"ntkpipe: `{clean_command(results, '--invalid')}` deletes what is set aside", file=sys.stderr)
    return moved


@dataclass(frozen=True)
class Entry:
    """One thing under ``results/``: a store (``valid``, ``outdated``, ``invalid``), a store set aside
    (``set aside``) or a leftover of a killed write (``leftover``); ``orphan``: a store no spec plans."""

    path: Path
    state: str
    detail: str = ""
    orphan: bool = False

    def line(self) -> str:
        detail = "; ".join(d for d in (self.detail, "planned by no spec in any variant" if self.orphan else "") if d)
        return f"{self.state:9}  {self.path}" + (f"  ({detail})" if detail else "")


def _walk(results: Path) -> tuple[list[Path], list[Path]]:
    """The stores (``*.zarr``) and the leftovers (``.*.zarr.tmp-*``, ``.*.zarr.old-*``) under ``results``."""
    stores, leftovers = [], []
    for folder, dirs, _ in os.walk(results):
        here = Path(folder)
        descend = []
        for name in sorted(dirs):
            if here == results and name in NOT_RESULTS:
                continue
            if name.startswith(".") and (".zarr.tmp-" in name or ".zarr.old-" in name):
                leftovers.append(here / name)
            elif name.endswith(".zarr") and not name.startswith("."):
                stores.append(here / name)
            elif not name.startswith("."):
                descend.append(name)
        dirs[:] = descend
    return stores, leftovers


def survey(results: str | Path, specs: str | Path, *, deep: bool = False) -> tuple[list[Entry], list[str]]:
    """Every store, set-aside store and leftover under ``results`` with its state, and the errors of
    specs that could not be planned (orphans are then not marked)."""
    results = Path(results)
    planned, errors = every_planned_store(specs, results)
    stores, leftovers = _walk(results)
    entries = []
    for path in stores:
        check = verify_store(path, planned.get(path, path.stem), deep=deep)
        orphan = not errors and path not in planned
        if not check.valid:
            entries.append(Entry(path, "invalid", check.reason, orphan))
        elif check.outdated:
            entries.append(Entry(path, "outdated", f"made by ntkpipe {check.version}", orphan))
        else:
            entries.append(Entry(path, "orphan" if orphan else "valid", "", orphan))
    aside = results / SET_ASIDE
    entries += [Entry(p, "set aside") for p in sorted(aside.iterdir())] if aside.is_dir() else []
    entries += [Entry(p, "leftover", "of an interrupted write") for p in leftovers]
    return entries, errors


def removable(entry: Entry, *, invalid: bool, orphans: bool, tmp: bool, outdated: bool) -> bool:
    """Whether ``ntkpipe clean`` with these flags removes ``entry``."""
    return ((invalid and entry.state in ("invalid", "set aside"))
            or (orphans and entry.orphan)
            or (tmp and entry.state == "leftover")
            or (outdated and entry.state == "outdated"))


def remove(entry: Entry) -> None:
    if entry.path.is_dir():
        shutil.rmtree(entry.path)
    else:
        entry.path.unlink()
