"""Load a study spec: parse, merge the chosen variant, validate, expand the sweep.

Every problem is reported as ``line N: key.path: what is wrong (did you mean ...?)`` in one
:class:`~ntkpipe.errors.SpecError` that names the file; nothing runs and nothing is written.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ntkpipe.errors import SpecError
from ntkpipe.lang import scaling as scale
from ntkpipe.lang.axes import AXES, suggest
from ntkpipe.lang.paths import MISSING, get_path, set_path
from ntkpipe.lang.schema import SOURCE_FIELDS, CrossKeyError, RunSpec, ScalingSpec, StudySpec
from ntkpipe.lang.sweep import (
    SweepError,
    axis_values,
    case_overrides,
    check_unique,
    expand,
    fill_unset_axes,
    to_dimensions,
)
from ntkpipe.lang.yaml_lines import KeyPath, YamlSyntaxError, line_of, load_with_lines
from ntkpipe.study import DEFAULT_VARIANT, SPEC_SUFFIX, checks, messages
from ntkpipe.study.claim_checks import claim_problems
from ntkpipe.study.size import run_count, run_limit, too_many_runs

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
RESERVED_NAMES = ("runs", "stages", "finals")  # results/runs, results/stages and results/finals hold the shared stores


@dataclass(frozen=True)
class Study:
    """A validated study for one variant: the merged spec and one :class:`RunSpec` per sweep point."""

    name: str
    variant: str
    path: Path
    spec: StudySpec
    points: list[dict[str, Any]]
    runs: list[RunSpec]
    axis_keys: dict[str, str] = field(default_factory=dict)
    """Dataset dimension → the sweep key that sets it (``gamma`` → ``model.gamma``; case axes: their name)."""
    scalings: list[ScalingSpec | None] = field(default_factory=list)
    """Per point, the ``scaling`` its run was derived with (after case overrides); None without one."""

    @property
    def axes(self) -> list[str]:
        """Sweep axes in order of first appearance (the study dataset's dimensions)."""
        return list(self.points[0]) if self.points else []


def variant_names(path: str | Path) -> list[str]:
    """``default`` plus the variants a spec file declares (empty list if it cannot be parsed)."""
    try:
        raw, _ = load_with_lines(path)
    except (OSError, YamlSyntaxError):
        return []
    variants = raw.get("variants", {}) if isinstance(raw, dict) else {}
    return [DEFAULT_VARIANT] + (list(variants) if isinstance(variants, dict) else [])


def load_study(path: str | Path, variant: str = DEFAULT_VARIANT, max_runs: int | str | None = None, *,
               data_files: bool = True, memory_limit: int | None = None) -> Study:
    """Validate ``path`` for ``variant``; raise SpecError listing every problem found. A study of more
    than ``max_runs`` runs (default: :func:`~ntkpipe.study.size.run_limit`) is refused before its
    sweep is expanded. Without ``data_files`` the local MNIST/CIFAR-10 files are not checked (enough
    to plan run ids). With ``memory_limit`` (bytes), a run whose job's estimated memory exceeds it is
    a problem (:func:`~ntkpipe.study.checks.memory_problems`)."""
    path = Path(path)
    limit = run_limit(max_runs)
    if not path.is_file():
        raise SpecError(str(path), ["is a directory; give the spec files in it (e.g. specs/*.yaml)" if path.is_dir()
                                    else "no such file"])
    try:
        raw, lines = load_with_lines(path)
    except YamlSyntaxError as err:
        raise SpecError(str(path), [f"line {err.line or 1}: {_dotted(err.key_path)}: {err}"]) from None
    if raw is None:
        raise SpecError(str(path), ["line 1: (top level): the file is empty (or only comments); a study needs at "
                                    "least data, model, train and measure"])
    if not isinstance(raw, dict):
        raise SpecError(str(path), ["line 1: (top level): the file must be a mapping of study keys (data, model, "
                                    "train, ...)"])
    raw = {key: value for key, value in raw.items() if not is_extension_key(key)}
    problems = _file_name_problems(path)
    merged, where = _merge_variant(raw, lines, variant, problems)
    declared = raw.get("variants")
    if variant != DEFAULT_VARIANT and not (isinstance(declared, dict) and variant in declared):
        raise SpecError(str(path), problems)  # nothing to validate: the variant does not exist

    points, axis_keys, cases = _sweep_points(merged, where, limit, problems)
    points, axis_keys = _scale_axis(merged, points, axis_keys, where, problems)
    try:
        spec = StudySpec.model_validate(merged)
    except ValidationError as err:
        problems += [messages.problem(e, merged, where) for e in err.errors()]
        problems += [f"{where(key_path)}: {msg}" for key_path, msg in checks.measure_name_problems(merged.get("measure"))]
        raise SpecError(str(path), _by_line(problems)) from None

    runs, valid_points, scalings = [], None, []
    if points is not None:
        runs, valid_points, scalings = _resolve_runs(merged, spec, points, axis_keys, cases, where, problems)
        try:
            valid_points = fill_unset_axes(valid_points) if valid_points else None
        except SweepError as err:
            problems.append(f"{where(('sweep',))}: {err}")
            valid_points = None
    problems += [f"{where(key_path)}: {msg}" for key_path, msg in checks.study_problems(spec, runs, valid_points, scalings, data_files)]
    problems += [f"{where(key_path)}: {msg}" for key_path, msg in claim_problems(
        spec, valid_points, variant, [DEFAULT_VARIANT] + list(declared if isinstance(declared, dict) else {}))]
    if memory_limit is not None and not problems and valid_points is not None:
        problems += [f"{where(key_path)}: {msg}"
                     for key_path, msg in checks.memory_problems(runs, valid_points, memory_limit)]
    if problems or valid_points is None:  # no valid points is a problem of the sweep, reported
        raise SpecError(str(path), _by_line(problems))
    return Study(path.stem, variant, path, spec, valid_points, runs, axis_keys, scalings)


EXTENSION_PREFIX = "x-"


def is_extension_key(key) -> bool:
    """Top-level ``x-…`` keys (as in Compose files) are ignored: a place for YAML anchors used elsewhere."""
    return isinstance(key, str) and key.startswith(EXTENSION_PREFIX)


def _file_name_problems(path: Path) -> list[str]:
    """The file name is the study name (results/<name>/) and the workflow reads ``specs/*.yaml``."""
    problems = []
    if path.suffix != SPEC_SUFFIX:
        problems.append(f"line 1: (top level): the workflow reads only specs/*{SPEC_SUFFIX} files; rename "
                        f"{path.name!r} to {path.stem + SPEC_SUFFIX!r}")
    if not NAME_PATTERN.match(path.stem):
        problems.append(f"line 1: (top level): the file name {path.stem!r} is the study name; use lowercase "
                        "letters, digits and underscores, starting with a letter")
    if path.stem in RESERVED_NAMES:
        problems.append(f"line 1: (top level): {path.stem!r} is reserved for results/{path.stem}/; rename the file")
    return problems


def _sweep_points(merged: dict, where, limit: int, problems: list[str]):
    """The sweep's points keyed by dimension, dimension → axis key and the case axes; points None
    when the sweep has problems (each one appended) or more runs than ``limit`` (counted first)."""
    if (why := too_many_runs(run_count(merged), limit)) is not None:
        problems.append(f"{where(('sweep',) if 'sweep' in merged else ('scaling', 'd'))}: {why}")
        return None, {}, {}
    errors: list[SweepError] = []
    extra = (scale.AXIS,) if isinstance(merged.get("scaling"), dict) else ()
    try:
        points = expand(merged.get("sweep"), extra=extra, errors=errors)
    except SweepError as err:
        errors.append(err)
    problems += [f"{where(('sweep',) + err.key_path)}: {err}" for err in errors]
    try:
        cases = case_overrides(merged.get("sweep"), ("sweep",))
    except SweepError as err:  # its key paths start at the spec's top level
        problems.append(f"{where(err.key_path)}: {err}")
        errors.append(err)
    if errors:
        return None, {}, {}
    try:
        points, axis_keys = to_dimensions(points)
        check_unique(points)
    except SweepError as err:
        problems.append(f"{where(('sweep',) + err.key_path)}: {err}")
        return None, {}, {}
    return points, axis_keys, cases


def _dotted(key_path: KeyPath) -> str:
    return ".".join(str(k) for k in key_path) or "(top level)"


def _scale_axis(merged: dict, points: list[dict] | None, axis_keys: dict[str, str], where, problems: list[str]):
    """With a ``scaling`` block, the sweep points that do not set ``d`` themselves (a union sub-grid
    may give its own values) crossed with ``scaling.d``."""
    block = merged.get("scaling")
    if not isinstance(block, dict) or "d" not in block or points is None:
        return points, axis_keys  # a missing d is reported by the schema
    try:
        values = axis_values(block["d"], ("scaling", "d"))
    except SweepError as err:
        problems.append(f"{where(err.key_path)}: {err}")
        return None, {}
    out = [p if scale.AXIS in p else {**p, scale.AXIS: v} for p in points for v in ([None] if scale.AXIS in p else values)]
    bad = [p[scale.AXIS] for p in out if isinstance(p[scale.AXIS], bool) or not isinstance(p[scale.AXIS], (int, float))
           or not p[scale.AXIS] > 0]
    if bad:
        at = ("scaling", "d") if bad[0] in values else _sweep_key_path(merged.get("sweep"), scale.AXIS)
        problems.append(f"{where(at)}: the scale parameter d must be positive numbers (got {bad[0]!r})")
        return None, {}
    try:
        check_unique(out)
    except SweepError as err:
        problems.append(f"{where(('scaling', 'd'))}: {err}")
        return None, {}
    return out, {**axis_keys, scale.AXIS: "scaling.d"}


def _by_line(problems: list[str]) -> list[str]:
    """Unique problems, ordered by their line number."""
    def line(p: str) -> int:
        match = re.match(r"line (\d+)", p)
        return int(match.group(1)) if match else 0
    return sorted(dict.fromkeys(problems), key=line)


def _name_like(name) -> str:
    """``name`` in lowercase with underscores (``Big-One`` → ``big_one``)."""
    return re.sub(r"[^a-z0-9_]", "_", str(name).lower()).lstrip("_0123456789") or "variant"


def deep_merge(base: dict, override: dict) -> dict:
    """Mappings merge key by key; anything else in ``override`` replaces the base value."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_overrides(base: dict, override: dict) -> dict:
    """``deep_merge`` for spec overrides (variants, cases), except that an override that names
    another ``model.architecture`` replaces the whole model section (fields differ between them),
    and one that names another ``data.source`` first drops the data keys that source does not take
    (``dim`` for images, ``classes`` for synthetic data, …: :data:`~ntkpipe.lang.schema.SOURCE_FIELDS`)."""
    replaced = {}
    model, data = override.get("model"), override.get("data")
    if isinstance(model, dict) and isinstance(base.get("model"), dict):
        if "architecture" in model and model["architecture"] != base["model"].get("architecture", "mlp"):
            replaced["model"] = copy.deepcopy(model)
    if isinstance(data, dict) and isinstance(base.get("data"), dict):
        if "source" in data and data["source"] != base["data"].get("source"):
            kept = {k: v for k, v in base["data"].items()
                    if k not in SOURCE_FIELDS or data["source"] in SOURCE_FIELDS[k]}
            replaced["data"] = deep_merge(kept, data)
    return {**deep_merge(base, {k: v for k, v in override.items() if k not in replaced}), **replaced}


def _merge_variant(raw: dict, lines: dict[KeyPath, int], variant: str, problems: list[str]):
    variants = raw.get("variants", {}) or {}
    if not isinstance(variants, dict):
        problems.append(f"line {line_of(lines, ('variants',))}: variants: must map variant names to overrides")
        variants = {}
    for name, override in variants.items():
        if not NAME_PATTERN.match(str(name)):
            problems.append(f"line {line_of(lines, ('variants', name))}: variants.{name}: a variant's name is part of "
                            f"its results' paths (results/<study>-<variant>/); use lowercase letters, digits and "
                            f"underscores, starting with a letter (e.g. {_name_like(name)!r})")
        if name == DEFAULT_VARIANT:
            problems.append(f"line {line_of(lines, ('variants', name))}: variants.{name}: "
                            f"'{DEFAULT_VARIANT}' is the spec itself; pick another variant name")
        elif not isinstance(override, dict):
            problems.append(f"line {line_of(lines, ('variants', name))}: variants.{name}: "
                            "must be a mapping of keys to override")
    merged = {k: v for k, v in raw.items()}
    override_prefix: KeyPath | None = None
    if variant != DEFAULT_VARIANT:
        if variant not in variants:
            known = [DEFAULT_VARIANT] + list(variants)
            problems.append(f"line 1: unknown variant {variant!r}{suggest(variant, known)}; "
                            f"this spec has {', '.join(known)}")
        elif isinstance(variants[variant], dict):
            override = variants[variant]
            if "sweep" in override:  # a sweep is replaced whole: merging grids would keep base cases
                merged.pop("sweep", None)
            merged = merge_overrides(merged, override)
            override_prefix = ("variants", variant)

    def where(key_path: KeyPath) -> str:
        """``line N: dotted.key`` for a key path of the merged spec (variant lines win)."""
        line = None
        if override_prefix and override_prefix + tuple(key_path) in lines:
            line = lines[override_prefix + tuple(key_path)]
        if line is None:
            line = line_of(lines, tuple(key_path)) or 1
        return f"line {line}: {_dotted(key_path)}"

    return merged, where


def _resolve_runs(merged: dict, spec: StudySpec, points: list[dict], axis_keys: dict[str, str], cases: dict,
                  where, problems: list[str]):
    """One RunSpec per valid sweep point (keyed by dimension; ``axis_keys`` maps a dimension to its
    axis), those points, and the ``scaling`` of each. Case overrides are merged first, then axis
    values set, then the parameters a ``scaling`` powers derived at the point's d; an invalid value
    is reported where the sweep sets it (a derived one: at its ``powers`` key)."""
    base = {"seed": merged.get("seed", 0), "data": merged["data"], "model": merged["model"],
            "train": merged["train"]}
    if merged.get("scaling") is not None:
        base["scaling"] = merged["scaling"]
    measure = checks.resolved_measure(spec)
    runs, valid_points, scalings = [], [], []
    for point in points:
        config = copy.deepcopy(base)
        for axis_name, label in point.items():
            if axis_name in cases:
                config = merge_overrides(config, cases[axis_name][label][1])
        for dim, value in point.items():
            if dim in axis_keys and axis_keys[dim] in AXES:
                set_path(config, AXES[axis_keys[dim]], value)
        scaling, derived = None, {}
        if "scaling" in config:
            block = config.pop("scaling")
            located = _scaling(block, point, cases, where, problems)
            if located is None:
                continue
            scaling, power_at = located
            try:
                derived = {p: power_at(name) for p, name in scale.derive(config, scaling, point[scale.AXIS]).items()}
            except scale.ScalingError as err:
                problems.append(f"{power_at(err.name) if err.name else where(('scaling',))}: {err}")
                continue
        try:
            runs.append(RunSpec.model_validate({**config, "measure": measure}))
            valid_points.append(point)
            scalings.append(scaling)
        except ValidationError as err:
            problems += [_derived_problem(e, point, config, derived)
                         or _sweep_problem(e, point, axis_keys, config, cases, merged, where) for e in err.errors()]
    return runs, valid_points, scalings


def _scaling(block: dict, point: dict, cases: dict, where, problems: list[str]):
    """The point's validated :class:`ScalingSpec` and a function locating each powered parameter
    (``line N: …powers.<name>`` in the case that sets its power, else in the study's ``scaling``)."""
    def power_at(name: str) -> str:
        for axis_name, label in point.items():
            if axis_name in cases:
                defined_at, override = cases[axis_name][label]
                if name in ((override.get("scaling") or {}).get("powers") or {}):
                    return where(defined_at + ("scaling", "powers", name))
        return where(("scaling", "powers", name))

    try:
        return ScalingSpec.model_validate(block), power_at
    except ValidationError as err:
        for e in err.errors():
            loc = tuple(e["loc"])
            if loc[:1] == ("powers",) and len(loc) > 1:
                problems.append(f"{power_at(str(loc[1]))}: {messages.text(e)} (got {e.get('input')!r})")
            else:
                problems.append(messages.problem({**e, "loc": ("scaling",) + loc}, {"scaling": block}, where))
        return None


def _derived_problem(error: messages.Error, point: dict, config: dict, derived: dict) -> str | None:
    """A validation error of a value the scaling derived, located at its power."""
    loc = messages.data_path(tuple(error["loc"]), config)
    for path, located in derived.items():
        if loc[: len(path)] == path:
            value = get_path(config, path)
            return f"{located}: at d = {point[scale.AXIS]:g} it gives {'.'.join(path)} = {value!r}: {messages.text(error)}"
    return None


def _sweep_problem(error: messages.Error, point: dict, axis_keys: dict[str, str], config: dict, cases: dict, merged: dict,
                   where) -> str:
    """Locate a run's validation error at the sweep key or case override that caused it (a check of
    several keys, :class:`CrossKeyError`: at the first of its keys that the sweep sets, else at its
    first key)."""
    message = messages.message(error, shown=False)
    locs = messages.error_locations(error, config)  # without union tags
    keyed = isinstance((error.get("ctx") or {}).get("error"), CrossKeyError)
    for loc in locs:
        for axis_name, value in point.items():
            key = axis_keys.get(axis_name)
            if key in AXES and AXES[key] == loc[: len(AXES[key])]:
                return f"{where(_sweep_key_path(merged.get('sweep'), key))}: sweep value {key}={value!r}: {message}"
            if axis_name in cases:
                defined_at, override = cases[axis_name][value]
                inside = messages.data_path(loc, override)
                if inside and get_path(override, inside, MISSING) is not MISSING:  # the case sets that key
                    return f"{where(defined_at + inside)}: case {axis_name}={value!r}: {message}"
    if keyed or not point:
        return f"{where(locs[0])}: {message}"
    return f"{where(locs[0])}: with sweep point {point}: {message}"


def _sweep_key_path(node: Any, axis_name: str, prefix: KeyPath = ("sweep",)) -> KeyPath:
    """Where ``axis_name`` is first set inside the sweep (for error lines)."""
    if isinstance(node, dict):
        if axis_name in node:
            return prefix + (axis_name,)
        for key, value in node.items():
            found = _sweep_key_path(value, axis_name, prefix + (key,))
            if found[-1] == axis_name:
                return found
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found = _sweep_key_path(value, axis_name, prefix + (i,))
            if found[-1] == axis_name:
                return found
    return prefix
