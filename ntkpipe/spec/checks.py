"""Cross-key checks of a study that the schema alone cannot express.

Each check returns ``(key path, message)`` pairs; :func:`ntkpipe.spec.load.load_study` adds lines.
"""

from __future__ import annotations

import os
from typing import Any

from ntkpipe.data.file_checks import data_file_problems
from ntkpipe.measure.registry import ALWAYS_RECORDED, REGISTRY, Variable
from ntkpipe.spec.axes import suggest
from ntkpipe.spec.schema import MeasureItem, RunSpec, StudySpec

Problem = tuple[tuple, str]
SKIP_CHECKSUMS = "NTKPIPE_SKIP_CHECKSUMS"


def measure_items(spec: StudySpec) -> list[MeasureItem]:
    """The ``measure`` list with bare names turned into items."""
    return [MeasureItem(name=m) if isinstance(m, str) else m for m in spec.measure]


def study_problems(spec: StudySpec, runs: list[RunSpec], points: list[dict]) -> list[Problem]:
    return (_measure_problems(spec, runs, points) + _stage_problems(spec, runs)
            + _summary_problems(spec, points) + _figure_problems(spec, points) + _data_file_problems(runs))


def _data_file_problems(runs: list[RunSpec]) -> list[Problem]:
    """Local MNIST/CIFAR-10 files exist, are well formed and match the official md5s (set the
    environment variable NTKPIPE_SKIP_CHECKSUMS=1 for a custom copy in the official formats)."""
    verify = os.environ.get(SKIP_CHECKSUMS, "") not in ("1", "true", "yes")
    problems: list[Problem] = []
    for data in {run.data.model_dump_json(): run.data for run in runs}.values():
        problems += data_file_problems(data, verify_checksums=verify)
    return list(dict.fromkeys(problems))


def _measure_problems(spec: StudySpec, runs: list[RunSpec], points: list[dict]) -> list[Problem]:
    problems: list[Problem] = []
    items = measure_items(spec)
    names = [m.name for m in items]
    for i, item in enumerate(items):
        where = ("measure", i)
        if item.name not in REGISTRY:
            problems.append((where, f"unknown measurement {item.name!r}{suggest(item.name, REGISTRY)}; "
                                    f"known: {', '.join(REGISTRY)}"))
            continue
        if names.count(item.name) > 1:
            problems.append((where, f"measurement {item.name!r} is listed twice"))
        m = REGISTRY[item.name]
        for option in ("threshold", "ridge", "rcond"):
            if getattr(item, option) is not None and option not in m.options:
                problems.append((where + (option,), f"option {option!r} does not apply to {item.name!r}"
                                 + (f" (its options: {', '.join(m.options)})" if m.options else "")))
        for dep in m.depends_on:
            if dep not in names:
                problems.append((where, f"{item.name} is computed from {dep!r}: add {dep} to measure"))
        failures = [(m.requires(run), point) for run, point in zip(runs, points)]
        failures = [(reason, point) for reason, point in failures if reason]
        if failures and (not m.theory or len(failures) == len(runs)):
            reason, point = failures[0]
            at = f" (sweep point {point})" if point else ""
            problems.append((where, f"{item.name}: {reason}{at}"))
    return problems


def _stage_problems(spec: StudySpec, runs: list[RunSpec]) -> list[Problem]:
    problems: list[Problem] = []
    used = set()
    for run in runs:
        labels = run.data.labels
        if labels.kind != "eigenvector_sign":
            continue
        stage = spec.stages.get(labels.stage)
        if stage is None:
            problems.append((("data", "labels", "stage"), f"no stage named {labels.stage!r}"
                             f"{suggest(labels.stage, spec.stages)}; define it under 'stages'"))
            continue
        if stage.compute != "eigendecomposition":
            problems.append((("data", "labels", "stage"), f"stage {labels.stage!r} computes {stage.compute}; "
                             "eigenvector labels need an 'eigendecomposition' stage"))
            continue
        used.update({labels.stage, stage.input})
        n_all = run.data.n_train + run.data.n_test
        limit = min(n_all, stage.top_k or n_all)
        if labels.eigen_index > limit:
            problems.append((("data", "labels", "eigen_index"),
                             f"eigen_index {labels.eigen_index} exceeds the {limit} eigenvectors of stage "
                             f"{labels.stage!r} (top_k or n_train + n_test)"))
    for name, stage in spec.stages.items():
        if stage.compute == "eigendecomposition":
            source = spec.stages.get(stage.input)
            if source is None or source.compute != "ntk_gram":
                problems.append((("stages", name, "input"), f"{stage.input!r} is not an 'ntk_gram' stage"
                                 f"{suggest(stage.input, spec.stages)}"))
        if name not in used:
            problems.append((("stages", name), f"stage {name!r} is not used by any run; remove it or use it "
                             "(data.labels.stage)"))
    return problems


def _variables(spec: StudySpec) -> dict[str, Variable]:
    """Dataset variables a figure or summary may read."""
    out = {v.name: v for m in measure_items(spec) if m.name in REGISTRY for v in REGISTRY[m.name].variables}
    out.update({v.name: v for v in ALWAYS_RECORDED})
    return out


def _kind(variable: Variable) -> str:
    return "series" if "time" in variable.dims else "scalar" if not variable.dims else "array"


def _check_axis(value: str | None, points: list[dict], where: tuple, what: str) -> list[Problem]:
    axes = list(points[0]) if points and points[0] else []
    if value is None or value in axes:
        return []
    return [(where, f"{what} {value!r} is not a sweep axis{suggest(value, axes)}; "
                    f"the sweep has {', '.join(axes) or 'no axes'}")]


def _check_variable(value: str | None, variables: dict[str, Variable], kinds: tuple, where: tuple) -> list[Problem]:
    if value is None:
        return []
    if value not in variables:
        owner = next((m.name for m in REGISTRY.values() for v in m.variables if v.name == value), None)
        fix = f"add {owner} to 'measure'" if owner else "add its measurement to 'measure'"
        return [(where, f"{value!r} is not measured{suggest(value, variables) if not owner else ''}; {fix} "
                        f"(measured: {', '.join(variables)})")]
    kind = _kind(variables[value])
    if kind not in kinds:
        return [(where, f"{value!r} is a {kind} variable; this needs a {' or '.join(kinds)} one")]
    return []


def _summary_problems(spec: StudySpec, points: list[dict]) -> list[Problem]:
    problems: list[Problem] = []
    variables = _variables(spec)
    names = [s.name for s in spec.summaries]
    for i, s in enumerate(spec.summaries):
        where = ("summaries", i)
        if names.count(s.name) > 1 or s.name in variables:
            problems.append((where + ("name",), f"summary name {s.name!r} is already used"))
        problems += _check_axis(s.x, points, where + ("x",), "x")
        problems += _check_axis(s.by, points, where + ("by",), "by")
        problems += _check_variable(s.y, variables, ("scalar",), where + ("y",))
    return problems


def _check_dim(value: str | None, points: list[dict], used: list[Variable], where: tuple,
               what: str) -> list[Problem]:
    """``value`` must be a sweep axis or a dimension of every variable in ``used``."""
    if value is None or (points and value in points[0]):
        return []
    if used and all(value in v.dims for v in used):
        return []
    dims = sorted({d for v in used for d in v.dims if d != "time"})
    choices = (list(points[0]) if points else []) + dims
    return [(where, f"{what} {value!r} is neither a sweep axis nor a dimension of the plotted variables"
                    f"{suggest(value, choices)}; choose one of {', '.join(choices) or 'none'}")]


def _figure_problems(spec: StudySpec, points: list[dict]) -> list[Problem]:
    problems: list[Problem] = []
    variables = _variables(spec)
    names = [f.name for f in spec.figures]
    for i, fig in enumerate(spec.figures):
        where = ("figures", i)
        if names.count(fig.name) > 1:
            problems.append((where + ("name",), f"figure name {fig.name!r} is used twice"))
        problems += _where_problems(fig.where, points, where + ("where",))
        if fig.kind == "sweep":
            ys = [fig.y] if isinstance(fig.y, str) else fig.y
            for v in ys + [fig.theory]:
                problems += _check_variable(v, variables, ("scalar", "series", "array"), where + ("y",))
            used = [variables[v] for v in ys if v in variables]
            problems += _check_dim(fig.x, points, used, where + ("x",), "x")
            problems += _check_dim(fig.hue, points, used, where + ("hue",), "hue")
        elif fig.kind == "time_series":
            for j, v in enumerate(fig.variables):
                problems += _check_variable(v, variables, ("series",), where + ("variables", j))
            for v, theory in fig.theory.items():
                problems += _check_variable(theory, variables, ("series", "scalar", "array"), where + ("theory", v))
            for key in list(fig.theory) + list(fig.normalize) + fig.logy:
                if key not in fig.variables:
                    problems.append((where, f"{key!r} is given settings but is not in variables"))
            used = [variables[v] for v in fig.variables if v in variables]
            problems += _check_dim(fig.hue, points, used, where + ("hue",), "hue")
            problems += _check_axis(fig.col, points, where + ("col",), "col")
        else:
            for v in [fig.x] + fig.y:
                problems += _check_variable(v, variables, ("array", "scalar"), where + ("y",))
            problems += _check_axis(fig.col, points, where + ("col",), "col")
    return problems


def _where_problems(selection: dict[str, Any], points: list[dict], where: tuple) -> list[Problem]:
    problems: list[Problem] = []
    for axis_name, value in selection.items():
        found = _check_axis(axis_name, points, where + (axis_name,), "where")
        if found:
            problems += found
        elif value not in {p[axis_name] for p in points}:
            values = sorted({p[axis_name] for p in points}, key=str)
            problems.append((where + (axis_name,), f"{axis_name}={value!r} is not in the sweep ({values})"))
    return problems
