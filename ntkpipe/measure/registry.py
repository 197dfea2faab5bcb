"""The measurements a study may ask for, collected from the subject modules' records.

``checkpoint`` measurements are taken at every checkpoint (their variables get a ``time``
dimension); ``final`` ones once per run, from the recorded series and the initial and final
models. Each stores one or more :class:`Variable`; figures and summaries refer to variables.
Each record (:class:`~ntkpipe.measure.record.Measurement`) is the single source of its variables'
dataset attributes (:func:`variable_attrs`). A subject module lists its records in ``MEASUREMENTS``;
a new subject module is added to :data:`SUBJECTS`.
"""

from __future__ import annotations

from ntkpipe.measure import (
    kernels,
    outputs,
    theory_kernel_alignment,
    theory_linearized,
    theory_silent_alignment,
    theory_solvable,
    weights,
)
from ntkpipe.measure.record import TIME_UNITS, Measurement, Variable

__all__ = ["ALWAYS_RECORDED", "MEASUREMENTS", "REGISTRY", "TIME_UNITS", "VARIABLES", "Measurement", "Variable",
           "variable_attrs"]

SUBJECTS = (outputs, kernels, weights, theory_silent_alignment, theory_linearized, theory_kernel_alignment,
            theory_solvable)
"""The modules that hold measurement records, in the order names are listed (e.g. in errors)."""


def _collect(subjects) -> list[Measurement]:
    """Every subject's records; a measurement or variable name two records share is an error."""
    measurements = [m for subject in subjects for m in subject.MEASUREMENTS]
    for kind, names in (("measurement", [m.name for m in measurements]),
                        ("variable", [v.name for m in measurements for v in m.variables])):
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"{kind} names registered twice: {', '.join(twice)}")
    return measurements


MEASUREMENTS = _collect(SUBJECTS)
REGISTRY: dict[str, Measurement] = {m.name: m for m in MEASUREMENTS}
VARIABLES: dict[str, Variable] = {v.name: v for m in MEASUREMENTS for v in m.variables}
ALWAYS_RECORDED = (Variable("diverged", "diverged", description="1 if at a checkpoint the training loss or the "
                            "parameters became non-finite or the loss exceeded train.divergence_factor (default 1e6) "
                            "times its initial loss: the run stopped there, its later series and final measurements "
                            "are NaN, however finite it would have looked later; or if its last loss exceeds 10 "
                            "times its initial loss (series kept); else 0"),)
_OWNER: dict[str, Measurement] = {v.name: m for m in MEASUREMENTS for v in m.variables}


RESIDUAL_SUFFIX = "_residual"


def residual_name(theory: str) -> str:
    """The study-dataset variable of a theory's residual against its measurement (:mod:`ntkpipe.jobs.residuals`)."""
    return f"{theory}{RESIDUAL_SUFFIX}"


def variable_attrs(name: str) -> dict[str, str]:
    """CF-style attrs of a registered variable: ``long_name``, ``units`` (where one exists),
    ``description`` (formula and paper equation), and for theory variables ``theory_of`` and
    ``assumptions`` (when it holds and is not NaN). Raises KeyError for an unregistered name."""
    recorded = {v.name: v for v in ALWAYS_RECORDED}
    variable = VARIABLES[name] if name in VARIABLES else recorded[name]
    attrs = {"long_name": variable.label, "description": variable.description or _OWNER[name].doc}
    if variable.units:
        attrs["units"] = variable.units
    if variable.theory_of:
        assumptions = _OWNER[name].assumptions
        assert assumptions is not None, f"the measurement of theory variable {name!r} states its assumptions"
        attrs["theory_of"] = variable.theory_of
        attrs["assumptions"] = assumptions
    return attrs


def measurement_text(m: Measurement) -> str:
    """What ``ntkpipe measurements`` prints for ``m``: name, when, its formula text, what it reads and
    needs, its options, and each variable with its dims and description where it has its own."""
    needs = [f"depends on {', '.join(m.depends_on)}"] if m.depends_on else []
    needs += [f"architectures {', '.join(m.architectures)}"] if m.architectures else []
    needs += ["kernel models too"] if m.kernel_models else []
    needs += ["NaN where its requirements fail"] if m.where_applicable else []
    lines = [f"{m.name} ({m.when}{'; ' if needs else ''}{'; '.join(needs)})", f"  {m.doc}"]
    lines += [f"  option {o.describe()}" for o in m.options]
    if m.assumptions:
        lines.append(f"  assumptions: {m.assumptions}")
    for v in m.variables:
        dims = f"({', '.join(v.dims)})" if v.dims else "scalar"
        units = f" [{v.units}]" if v.units else ""
        lines.append(f"  - {v.name} {dims}{units}: {v.label}" + (f" — {v.description}" if v.description else ""))
    return "\n".join(lines)
