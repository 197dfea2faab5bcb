"""Cross-key checks of a study that the schema alone cannot express.

Each check returns ``(key path, message)`` pairs; :func:`ntkpipe.study.load.load_study` adds lines.
``points`` None means the sweep could not be expanded (it has problems of its own): the checks that
need the runs or the sweep axes are left out and the others still run, so every problem of a file
is reported at once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ntkpipe.data import output_count
from ntkpipe.data.file_checks import data_file_problems
from ntkpipe.lang.axes import suggest
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import MeasureItem, RunSpec, StudySpec
from ntkpipe.measure.registry import ALWAYS_RECORDED, REGISTRY, Variable
from ntkpipe.stages import REFERENCES, STAGES
from ntkpipe.study import messages
from ntkpipe.summaries import SUMMARY_KINDS, summary_options
from ntkpipe.summaries.record import SummaryOptions

Problem = tuple[tuple, str]
SKIP_CHECKSUMS = "NTKPIPE_SKIP_CHECKSUMS"


def measure_items(spec: StudySpec) -> list[MeasureItem]:
    """The ``measure`` list with bare names turned into items."""
    return [MeasureItem(name=m) if isinstance(m, str) else m for m in spec.measure]


def resolved_measure(spec: StudySpec) -> list[MeasureItem]:
    """The ``measure`` items with every declared option filled in (given value, else its default);
    a run's config, and so its id, holds them all. Unknown names pass through (reported elsewhere)."""
    out = []
    for item in measure_items(spec):
        declared = REGISTRY[item.name].options if item.name in REGISTRY else ()
        given = item.options
        out.append(MeasureItem(name=item.name, **{o.name: given.get(o.name, o.default) for o in declared}))
    return out


def study_problems(spec: StudySpec, runs: list[RunSpec], points: list[dict] | None,
                   scalings: list | None = None, data_files: bool = True) -> list[Problem]:
    if points is None:
        return _measure_problems(spec, [], []) + _summary_problems(spec, None, [], []) + _figure_problems(spec, None)
    return (_measure_problems(spec, runs, points) + _reference_problems(spec, runs)
            + _stage_problems(spec, runs, points) + _network_problems(runs, points)
            + _summary_problems(spec, points, runs, scalings or [None] * len(runs))
            + _figure_problems(spec, points) + _init_problems(runs, points)
            + (_data_file_problems(runs) if data_files else []))


def _init_problems(runs: list[RunSpec], points: list[dict]) -> list[Problem]:
    """A near-parallel init sets one readout vector u ∥ W n: the task must have one output."""
    for run, point in zip(runs, points):
        if getattr(run.model, "init", None) == "near_parallel" and (outputs := output_count(run.data)) != 1:
            at = f" (sweep point {point})" if point else ""
            return [(("model", "init"), f"init 'near_parallel' aligns one readout vector with the inputs; this task "
                                        f"has {outputs} outputs{at}: use init gaussian, or a task with one output "
                                        "(two classes, one teacher, ±1 labels)")]
    return []


def unknown_measurement(name: Any) -> str | None:
    """Why ``name`` is not a measurement of the registry, or None if it is one."""
    if isinstance(name, str) and name in REGISTRY:
        return None
    return f"unknown measurement {name!r}{suggest(name, REGISTRY)}; known: {', '.join(REGISTRY)}"


def measure_name_problems(measure: Any) -> list[Problem]:
    """Unknown measurement names in a raw ``measure`` list (checked even when the spec has other errors)."""
    items = measure if isinstance(measure, list) else []
    names = [item.get("name") if isinstance(item, dict) else item for item in items]
    return [(("measure", i), why) for i, name in enumerate(names)
            if isinstance(name, str) and (why := unknown_measurement(name))]


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
        if (why := unknown_measurement(item.name)) is not None:
            problems.append((where, why))
            continue
        if names.count(item.name) > 1:
            problems.append((where, f"measurement {item.name!r} is listed twice"))
        m = REGISTRY[item.name]
        declared = {o.name: o for o in m.options}
        options_valid = True
        for option, value in item.options.items():
            if option not in declared:
                known = "; ".join(o.describe() for o in m.options) or "none"
                problems.append((where + (option,), f"option {option!r} does not apply to {item.name!r}"
                                 f"{suggest(option, declared)} (its options: {known})"))
                options_valid = False
            elif (why := declared[option].problem(value)) is not None:
                problems.append((where + (option,), f"{item.name}: {why}"))
                options_valid = False
        if options_valid:
            problems += _option_fit_problems(m, item, where, runs, points)
        for dep in m.depends_on:
            if dep not in names:
                problems.append((where, f"{item.name} is computed from {dep!r}: add {dep} to measure"))
        failures = [(m.unmet(run), point) for run, point in zip(runs, points)]
        failures = [(reason, point) for reason, point in failures if reason]
        if failures and (not m.where_applicable or len(failures) == len(runs)):
            reason, point = failures[0]
            at = f" (sweep point {point})" if point else ""
            problems.append((where, f"{item.name}: {reason}{at}"))
    return problems


def _at(point: dict) -> str:
    return f" (sweep point {point})" if point else ""


def _option_fit_problems(m, item: MeasureItem, where: tuple, runs: list[RunSpec], points: list[dict]) -> list[Problem]:
    """The measurement's options against each run's data (its ``check_options``), reported at the
    first sweep point that breaks them."""
    given = frozenset(item.options)
    for run, point in zip(runs, points):
        if m.unmet(run):
            continue
        options = next(x.options for x in run.measure if x.name == item.name)
        if (found := m.check_options(options, given, run)) is not None:
            option, message = found
            return [(where + ((option,) if option in given else ()), f"{item.name}: {message}{_at(point)}")]
    return []


def _network_problems(runs: list[RunSpec], points: list[dict]) -> list[Problem]:
    """The architecture takes the data's inputs: a CNN needs images (H, W, channels) large enough for
    its convolutions and pools (an MLP flattens anything); checked by building the network abstractly."""
    from ntkpipe.data import input_shape
    from ntkpipe.models import ARCHITECTURES
    from ntkpipe.resources import parameter_count

    for run, point in zip(runs, points):
        try:
            parameter_count(run)
        except ValueError as err:
            shape, source, arch = input_shape(run.data), run.data.source, run.model.architecture
            if ARCHITECTURES[arch].inputs == "image" and len(shape) != 3:
                why = (f"a {arch} needs image inputs (H, W, channels); data.source {source!r} gives inputs of shape "
                       f"{shape}: use an image source (digits, mnist, cifar10, or nad with a shape [H, W, channels]) "
                       "or model.architecture mlp (it flattens any input)")
            elif run.model.architecture == "cnn":
                why = (f"the conv layers and pools of this cnn shrink the inputs of shape {shape} (data.source "
                       f"{source!r}) to nothing (each pool divides H and W by its pool_size, a VALID conv takes "
                       "kernel_size − 1): use larger images (data.image_size) or fewer or smaller pools")
            else:
                why = f"{err} (data.source {source!r}, inputs of shape {shape})"
            return [(("model", "architecture"), why + _at(point))]
    return []


def memory_problems(runs: list[RunSpec], points: list[dict], limit: int) -> list[Problem]:
    """Runs one of whose jobs needs more memory than ``limit`` bytes (:func:`ntkpipe.resources.peak_memory_mb`,
    from the jobs' ``mem_mb``): the largest with its sweep point, the estimate and the fixes."""
    from ntkpipe.resources import MEMORY_LIMIT_ENV, MIB, human_bytes, peak_memory_mb

    need = []
    for run, point in zip(runs, points):
        try:
            need.append((peak_memory_mb(run) * MIB, point))
        except ValueError:
            continue  # a network that does not take the data: reported by _network_problems
    over = [(n, point) for n, point in need if n > limit]
    if not over:
        return []
    largest, point = max(over, key=lambda item: item[0])
    others = f"; {len(over) - 1} more run(s) are over it" if len(over) > 1 else ""
    return [(("model",), f"a run{_at(point)} would need about {human_bytes(largest)} of memory (parameters, optimizer "
             f"state, NTK Grams), more than the {human_bytes(limit)} a job may use on this machine{others}: use a "
             f"smaller model.width or fewer data points, or run it on a bigger node and say how much memory a job "
             f"may use there ({MEMORY_LIMIT_ENV}=512G); snakemake --config memory_check=0 or ntkpipe validate "
             f"--no-memory-check skips this check")]


def _reference_problems(spec: StudySpec, runs: list[RunSpec]) -> list[Problem]:
    """A kernel kind that reads its trained network (``akgd``: its final ‖K‖, ``ofe_fit``: its final
    alignment) needs that measurement in ``measure`` (the network run shares the study's list)."""
    names = {m.name for m in measure_items(spec)}
    kinds = sorted({run.model.kind for run in runs if MODEL_KINDS[run.model.kind].reference})
    return [(("measure",), f"model.kind {kind!r} reads the final {MODEL_KINDS[kind].reference} of its trained "
                           f"network: add {MODEL_KINDS[kind].reference} to measure")
            for kind in kinds if MODEL_KINDS[kind].reference not in names]


def _stage_problems(spec: StudySpec, runs: list[RunSpec], points: list[dict]) -> list[Problem]:
    """Every stage a stage reads exists and is of the kind it needs; every stage a run names
    exists and provides what the run reads it for, and passes its kind's checks (at the first sweep
    point that fails each); every stage is used."""
    problems: list[Problem] = []
    checked: dict[tuple, tuple[str, dict]] = {}  # a key path → its first problem and sweep point
    for name, stage in spec.stages.items():
        for role, (other, compute) in STAGES[stage.compute].upstream(stage).items():
            found = spec.stages.get(other)
            if found is None or found.compute != compute:
                choices = [n for n, s in spec.stages.items() if s.compute == compute]
                problems.append((("stages", name, role if role in type(stage).model_fields else "input"),
                                 f"{other!r} is not a {compute!r} stage{suggest(other, choices)}"))
    used: set[str] = set()
    for run, point in zip(runs, points):
        for provides, section in REFERENCES.items():
            node = run
            for key in section:
                node = getattr(node, key, None)
            name = getattr(node, "stage", None)
            if not name:
                continue
            where = section + ("stage",)
            stage = spec.stages.get(name)
            if stage is None:
                problems.append((where, f"no stage named {name!r}{suggest(name, spec.stages)}; define it under 'stages'"))
                continue
            kind = STAGES[stage.compute]
            if kind.provides != provides:
                makers = [k.compute for k in STAGES.values() if k.provides == provides]
                problems.append((where, f"stage {name!r} computes {stage.compute}, which provides "
                                        f"{kind.provides or 'nothing to runs'}; {'.'.join(section)} needs a stage "
                                        f"that provides {provides} ({', '.join(makers)})"))
                continue
            used.add(name)
            used.update(other for other, _ in kind.upstream(stage).values())
            for at, message in kind.check(name, stage, run):
                checked.setdefault(at, (message, point))
    problems += [(at, message + _at(point)) for at, (message, point) in checked.items()]
    for name in spec.stages:
        if name not in used and not problems:
            problems.append((("stages", name), f"stage {name!r} is not used by any run; remove it or name it "
                             f"({', '.join('.'.join(s) + '.stage' for s in REFERENCES.values())})"))
    return list(dict.fromkeys(problems))


def _measured(spec: StudySpec) -> dict[str, Variable]:
    """Variables the runs store."""
    out = {v.name: v for m in measure_items(spec) if m.name in REGISTRY for v in REGISTRY[m.name].variables}
    out.update({v.name: v for v in ALWAYS_RECORDED})
    return out


def _variables(spec: StudySpec) -> dict[str, Variable]:
    """Dataset variables a figure or summary may read."""
    out = _measured(spec)
    for options in _summary_options(spec):  # e.g. endpoint tables are variables figures may plot
        if options is not None:
            out.update(SUMMARY_KINDS[options.kind].tables(options, out))
    return out


def _kind(variable: Variable) -> str:
    return "series" if "time" in variable.dims else "scalar" if not variable.dims else "array"


def _check_axis(value: str | None, points: list[dict] | None, where: tuple, what: str) -> list[Problem]:
    axes = list(points[0]) if points and points[0] else []
    if value is None or value in axes or points is None:
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


def _summary_options(spec: StudySpec) -> list[SummaryOptions | None]:
    """Each ``summaries:`` item as its kind's options (None where it is not valid: see :func:`_summary_problems`)."""
    out: list[SummaryOptions | None] = []
    for item in spec.summaries:
        try:
            out.append(summary_options(item) if item.kind in SUMMARY_KINDS else None)
        except ValidationError:
            out.append(None)
    return out


def _option_problems(item, where: tuple) -> list[Problem]:
    """``item`` is a summary of a known kind whose options its record's model accepts (errors at their keys)."""
    if item.kind not in SUMMARY_KINDS:
        return [(where + ("kind",), f"unknown summary kind {item.kind!r}{suggest(item.kind, SUMMARY_KINDS)}; "
                                    f"use one of {', '.join(SUMMARY_KINDS)}")]
    model = SUMMARY_KINDS[item.kind].options
    data = item.model_dump(exclude_unset=True)
    try:
        model.model_validate(data)
    except ValidationError as err:
        out = []
        for error in err.errors():
            if error["type"] == "extra_forbidden":
                key = error["loc"][-1]
                message = (f"unknown key for a {item.kind!r} summary"
                           f"{suggest(key, model.model_fields) or ' (allowed: ' + ', '.join(model.model_fields) + ')'}")
            else:
                message = messages.message(error)
            out += [(where + messages.error_locations(error, data)[0], message)]
        return out
    return []


class SummaryCheck:
    """What a summary kind's ``problems(options, check)`` checks its options with: each method returns
    problems at a key path below the summary's (``where``); ``points`` (None: the sweep has problems of
    its own), ``runs`` and ``scalings`` are the study's, ``earlier`` the summaries listed before this one
    (as options), ``measured`` the variables the runs store."""

    def __init__(self, variables: dict[str, Variable], measured: dict[str, Variable], points: list[dict] | None,
                 runs: list[RunSpec], scalings: list, earlier: list[SummaryOptions], where: tuple):
        self.variables, self.measured, self.points, self.where = variables, measured, points, where
        self.runs, self.scalings, self.earlier = runs, scalings, earlier

    def variable(self, value: str | None, kinds: tuple, key: tuple) -> list[Problem]:
        """``value`` is a stored variable of one of ``kinds`` (scalar, series, array)."""
        return _check_variable(value, self.variables, kinds, self.where + key)

    def axis(self, value: str | None, key: tuple, what: str) -> list[Problem]:
        """``value`` is a sweep axis."""
        return _check_axis(value, self.points, self.where + key, what)

    def problem(self, key: tuple, message: str) -> list[Problem]:
        return [(self.where + key, message)]


def _summary_problems(spec: StudySpec, points: list[dict] | None, runs: list[RunSpec], scalings: list) -> list[Problem]:
    """Each summary is of a known kind with valid options, its name is new, its ``by`` are sweep axes, and it
    passes its kind's own checks (``problems``)."""
    problems: list[Problem] = []
    variables, measured = _variables(spec), _measured(spec)
    names = [s.name for s in spec.summaries]
    listed = _summary_options(spec)
    for i, (item, options) in enumerate(zip(spec.summaries, listed)):
        where = ("summaries", i)
        if names.count(item.name) > 1 or item.name in measured:
            problems.append((where + ("name",), f"summary name {item.name!r} is already used"))
        if options is None:
            problems += _option_problems(item, where)
            continue
        for j, axis_name in enumerate(options.by_axes):
            problems += _check_axis(axis_name, points, where + (("by", j) if isinstance(options.by, list) else ("by",)),
                                    "by")
        earlier = [o for o in listed[:i] if o is not None]
        problems += SUMMARY_KINDS[options.kind].problems(
            options, SummaryCheck(variables, measured, points, runs, scalings, earlier, where))
    return problems


def _check_dim(value: str | None, points: list[dict] | None, used: list[Variable], where: tuple,
               what: str) -> list[Problem]:
    """``value`` must be a sweep axis or a dimension of every variable in ``used``."""
    if value is None or points is None or (points and value in points[0]):
        return []
    if used and all(value in v.dims for v in used):
        return []
    dims = sorted({d for v in used for d in v.dims if d != "time"})
    choices = (list(points[0]) if points else []) + dims
    return [(where, f"{what} {value!r} is neither a sweep axis nor a dimension of the plotted variables"
                    f"{suggest(value, choices)}; " + (f"choose one of {', '.join(choices)}" if choices else
                    "the study has no sweep and the plotted variables no dimension besides time: add a sweep or "
                    "plot a variable with one (e.g. input_spectrum over spectrum_index)"))]


class FigureCheck:
    """What a figure kind's ``problems(check)`` checks its options with: each method returns problems
    at a key path below the figure's (``where``)."""

    def __init__(self, variables: dict[str, Variable], points: list[dict] | None, where: tuple):
        self.variables, self.points, self.where = variables, points, where

    def variable(self, value: str | None, kinds: tuple, key: tuple) -> list[Problem]:
        """``value`` is a stored variable of one of ``kinds`` (scalar, series, array)."""
        return _check_variable(value, self.variables, kinds, self.where + key)

    def dim(self, value: str | None, plotted: list[str], key: tuple, what: str) -> list[Problem]:
        """``value`` is a sweep axis or a dimension of every ``plotted`` variable."""
        used = [self.variables[v] for v in plotted if v in self.variables]
        return _check_dim(value, self.points, used, self.where + key, what)

    def axis(self, value: str | None, key: tuple, what: str) -> list[Problem]:
        """``value`` is a sweep axis."""
        return _check_axis(value, self.points, self.where + key, what)

    def dims(self, name: str) -> tuple[str, ...] | None:
        """The dims of the stored variable ``name`` (None if it is not stored)."""
        return self.variables[name].dims if name in self.variables else None

    def labels(self, axis_name: str) -> list[str]:
        """The values of the sweep axis ``axis_name`` that are labels, not numbers (none if it is no axis)."""
        if not self.points or axis_name not in self.points[0]:
            return []
        return sorted({str(p[axis_name]) for p in self.points if not isinstance(p[axis_name], (int, float))})

    def problem(self, key: tuple, message: str) -> list[Problem]:
        return [(self.where + key, message)]


def _figure_problems(spec: StudySpec, points: list[dict] | None) -> list[Problem]:
    """Names are unique, ``where`` and ``reference`` select sweep points (``where`` also dimensions of
    the plotted variables), and each figure passes its kind's own checks (``problems``)."""
    problems: list[Problem] = []
    variables = _variables(spec)
    names = [f.name for f in spec.figures]
    for i, fig in enumerate(spec.figures):
        where = ("figures", i)
        if names.count(fig.name) > 1:
            problems.append((where + ("name",), f"figure name {fig.name!r} is used twice"))
        plotted = [variables[n] for n in fig.plotted() if n in variables]
        problems += _where_problems(fig.where, points, where + ("where",), plotted)
        problems += _where_problems(getattr(fig, "reference", {}), points, where + ("reference",))
        problems += fig.problems(FigureCheck(variables, points, where))
    return problems


def _where_problems(selection: dict[str, Any], points: list[dict] | None, where: tuple,
                    plotted: Sequence[Variable] = ()) -> list[Problem]:
    """Each key of ``selection`` is a sweep axis with one of its values, or (``plotted`` given) a
    dimension of every plotted variable, e.g. ``output: 3`` for ``kv_projection`` (its coordinates
    are known only once the runs exist)."""
    problems: list[Problem] = []
    if points is None:
        return problems
    for axis_name, value in selection.items():
        if plotted and not (points and axis_name in points[0]) and all(axis_name in v.dims for v in plotted):
            continue
        found = _check_axis(axis_name, points, where + (axis_name,), "where")
        if found:
            problems += found
        else:
            known = {p[axis_name] for p in points}
            for v in value if isinstance(value, list) else [value]:
                if v not in known:
                    problems.append((where + (axis_name,), f"{axis_name}={v!r} is not in the sweep "
                                                           f"({sorted(known, key=str)})"))
    return problems
