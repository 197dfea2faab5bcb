"""Why each job of a study would run, in the study's terms: a store that is missing (a new sweep
point) or invalid (what verification found), and the spec keys that changed since the study dataset
was last made, from the resolved spec it stores (``study_spec``) and from the run store made for the
same sweep point then (``train.optimizer.lr: 0.05 → 0.1``)."""

from __future__ import annotations

import json
from pathlib import Path

from ntkpipe.lang.identity import canonical
from ntkpipe.store import verified_attrs, verify_store
from ntkpipe.study.plan import StudyPlan, point_label


def _shown(value) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _named(items: list) -> dict | None:
    """A list of mappings with distinct ``name`` keys (figures, measurements) by name, else None."""
    if not items or not all(isinstance(i, dict) and "name" in i for i in items):
        return None
    by_name = {i["name"]: i for i in items}
    return by_name if len(by_name) == len(items) else None


def spec_changes(old, new, key: str = "") -> list[str]:
    """Each difference from ``old`` to ``new`` (resolved specs or configs) as ``key: old → new``;
    mappings are compared key by key, lists of named mappings by name (``figures[name=t_half].title``),
    lists of values by what was added and removed (``sweep.sigma: added 0.5``)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            sub = f"{key}.{k}" if key else str(k)
            if k not in old:
                out.append(f"{sub}: added {_shown(new[k])}")
            elif k not in new:
                out.append(f"{sub}: removed (was {_shown(old[k])})")
            else:
                out += spec_changes(old[k], new[k], sub)
        return out
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _named(old), _named(new)
        if old_named is not None and new_named is not None:
            return _named_changes(old_named, new_named, key)
        if all(not isinstance(v, (dict, list)) for v in old + new):
            added = [v for v in new if v not in old]
            removed = [v for v in old if v not in new]
            if added or removed:
                return [f"{key}: " + ", ".join([*(f"added {_shown(v)}" for v in added),
                                               *(f"removed {_shown(v)}" for v in removed)])]
            return [f"{key}: reordered {_shown(old)} → {_shown(new)}"]
    return [f"{key}: {_shown(old)} → {_shown(new)}"]


def _named_changes(old: dict, new: dict, key: str) -> list[str]:
    out = []
    for name in [*old, *(n for n in new if n not in old)]:
        sub = f"{key}[name={name}]"
        if name not in old:
            out.append(f"{sub}: added")
        elif name not in new:
            out.append(f"{sub}: removed")
        else:
            out += spec_changes(old[name], new[name], sub)
    return out


def _point_key(point: dict) -> str:
    return json.dumps(canonical(point), sort_keys=True)


def _store_problem(path: Path, expect_id: str) -> str | None:
    """None if the store is done, else why it is made: missing, or invalid and why."""
    if not path.exists():
        return "no store yet"
    check = verify_store(path, expect_id)
    return None if check.valid else f"invalid store ({check.reason})"


class _LastAggregation:
    """What the existing study dataset records: its config (points and their run ids) and the
    resolved spec it was made from; empty if there is no valid dataset."""

    def __init__(self, plan: StudyPlan):
        attrs = verified_attrs(plan.dataset_path, plan.tag) or {}
        self.config = json.loads(attrs["config"]) if "config" in attrs else None
        self.spec = json.loads(attrs["study_spec"]) if "study_spec" in attrs else None
        points, runs = (self.config or {}).get("points", []), (self.config or {}).get("runs", [])
        self.run_ids = {_point_key(p): r for p, r in zip(points, runs)}


def _run_reason(job, point: dict, last: _LastAggregation) -> tuple[str, list[str]] | None:
    problem = _store_problem(job.path, job.id)
    if problem is None or problem.startswith("invalid"):
        return None if problem is None else (problem, [])
    if last.config is None:
        return "no store yet", []
    old_id = last.run_ids.get(_point_key(point))
    if old_id is None:
        return "new sweep point", []
    if old_id == job.id:
        return "its store is missing (deleted or set aside)", []
    old = verified_attrs(job.path.with_name(f"{old_id}.zarr"), old_id)
    if old is None:
        return f"its config changed since the last aggregation (run {old_id} made then is gone)", []
    return "its config changed since the last aggregation", spec_changes(json.loads(old["config"]), job.config)


def why_lines(plan: StudyPlan) -> list[str]:
    """One line per job of ``plan`` that would run, with why, and indented under it the spec keys
    that changed (``train.optimizer.lr: 0.05 → 0.1``); empty when the study is up to date."""
    last = _LastAggregation(plan)
    out, made = [], 0
    for job, point in zip(plan.runs, plan.study.points):
        reason = _run_reason(job, point, last)
        if reason:
            made += 1
            out.append(f"run {job.id[:8]} ({point_label(plan.tag, point)}): {reason[0]}")
            out += [f"    {change}" for change in reason[1]]
    for job in plan.support_runs:
        problem = _store_problem(job.path, job.id)
        if problem:
            made += 1
            out.append(f"run {job.id[:8]} ({job.label}): {problem}")
    for stage in plan.stages.values():
        problem = _store_problem(stage.path, stage.id)
        if problem:
            made += 1
            out.append(f"stage {stage.compute} {stage.id[:8]}: {problem}")
    for final in plan.finals.values():
        if not (final.path.exists() and verify_store(final.path, final.id).valid):
            made += 1
            names = ", ".join(m.name for m in final.items)
            out.append(f"final {final.id[:8]} ({final.run.label}): measures {names}, which its run store lacks")
    dataset, changes = _dataset_reason(plan, last, made)
    if dataset:
        out.append(f"aggregate {plan.dataset_path.name}: {dataset}")
        out += [f"    {change}" for change in changes]
    for name, path in plan.figure_paths.items():
        key = f"figures[name={name}]"
        mine = [c for c in changes if c.startswith(key)]
        reason = _output_reason(path, plan.dataset_path, dataset)
        if reason:
            out.append(f"figure {name}: {reason}")
            out += [f"    {change}" for change in mine]
    reason = _output_reason(plan.table_path, plan.dataset_path, dataset)
    if reason:
        out.append(f"table {plan.table_path.name}: {reason}")
    return out


def _dataset_reason(plan: StudyPlan, last: _LastAggregation, made: int) -> tuple[str, list[str]]:
    """Why the study dataset is made again ("" if it is not) and the spec keys that changed."""
    problem = _store_problem(plan.dataset_path, plan.tag)
    if problem:
        return ("no dataset yet" if problem == "no store yet" else problem), []
    changes = spec_changes(last.spec, plan.study.spec.model_dump(mode="json")) if last.spec is not None else []
    reasons = []
    if changes:
        reasons.append("the spec changed since it was made")
    elif json.dumps(last.config, sort_keys=True) != json.dumps(plan.aggregate_config(), sort_keys=True):
        reasons.append("its aggregation settings changed")
    if made:
        reasons.append(f"{made} of the stores it reads are made")
    return "; ".join(reasons), changes


def _output_reason(path: Path, dataset: Path, dataset_reason: str) -> str:
    """Why a figure or table of the dataset is made: missing, the dataset is rewritten, or older."""
    if not path.exists():
        return "not made yet"
    if dataset_reason:
        return "its dataset is made again"
    if dataset.exists() and path.stat().st_mtime < dataset.stat().st_mtime:
        return "older than its dataset"
    return ""
