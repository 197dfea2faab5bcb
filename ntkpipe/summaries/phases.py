"""Phases of a scaling (solvable-model Sec. 3, Table 1; :mod:`ntkpipe.theory.phases`): the phase that the
study's ``scaling`` powers predict, and the phase read off its runs along the scale parameter d."""

from __future__ import annotations

from typing import Literal

import pandas as pd
import xarray as xr
from pydantic import Field, model_validator

from ntkpipe.labels import axis_label, variable_label
from ntkpipe.lang.axes import suggest
from ntkpipe.layout import final_value, sub_grid
from ntkpipe.measure.record import Variable
from ntkpipe.strict import CrossKeyError
from ntkpipe.summaries.fits import FitOptions, fit_variables
from ntkpipe.summaries.record import SummaryKind, SummaryOptions, group_keys, over, per_group
from ntkpipe.theory import phases

SOURCE = "from the exponents of λ² under the scaling powers (solvable-model Sec. 3, ntkpipe.theory.phases)"


class PredictedPhaseOptions(SummaryOptions):
    """``predicted_phase``: the phase (kernel, learning, frozen, unstable) that λ²'s exponents predict for
    the study's ``scaling`` powers, per group of ``by`` (depth-2 networks); beside it
    ``<name>_target_term``, ``<name>_init_term`` and ``<name>_kernel_change``."""

    kind: Literal["predicted_phase"]
    """the summary kind (this record\'s name)"""

    @model_validator(mode="after")
    def _only_by(self):
        if self.x is not None or self.y is not None:
            raise ValueError("a 'predicted_phase' summary takes only 'by' (it reads the study's scaling powers)")
        return self


class MeasuredPhaseOptions(SummaryOptions):
    """``measured_phase``: the phase read off the runs along the scale parameter ``x`` (= d), judged
    against the exponent p = min(T − I, 0) that the study's ``scaling`` powers predict for y, the
    relative NTK change (solvable-model Sec. 3, Table 1; :mod:`ntkpipe.theory.phases`):
    ``unstable`` if a run diverged; else ``frozen`` if at the largest d the training loss kept more
    than ``frozen_loss_ratio`` of its initial value; else ``kernel`` if y at the largest d is below
    ``min_change``, or the fitted exponent b ± s (``exponent``, a power_law summary of y over x, and
    its standard error) is significantly below 0, the learning phase's O(1) change (b + k·s < 0),
    or consistent with a predicted p < 0 and nearer it than 0 (|b − p| ≤ k·s and |b − p| < |b|),
    with k = ``stderrs``; else ``learning``. It stores ``<name>_exponent``,
    ``<name>_exponent_stderr`` and ``<name>_predicted_exponent`` beside the phase."""

    kind: Literal["measured_phase"]
    """the summary kind (this record\'s name)"""
    x: str = Field(description="the scale parameter d")
    y: str = Field(description="the variable whose exponent in d is judged, e.g. relative_kernel_change")
    exponent: str = Field(description="the power_law summary of y over x")
    stderrs: float = Field(2.0, gt=0, exclude_if=lambda v: v == 2.0,
                           description="k, the standard errors within which exponents are consistent")
    min_change: float = Field(0.02, ge=0, exclude_if=lambda v: v == 0.02,
                              description="y at the largest x below this is kernel")
    frozen_loss_ratio: float = Field(0.5, gt=0, lt=1, exclude_if=lambda v: v == 0.5,
                                     description="L_T/L_0 above this is frozen")

    @model_validator(mode="before")
    @classmethod
    def _removed_kernel_below(cls, data):
        if isinstance(data, dict) and "kernel_below" in data:
            raise CrossKeyError("'kernel_below' was removed: a measured_phase now judges the fitted exponent "
                                "against the predicted T − I within 'stderrs' (default 2) standard errors; "
                                "delete 'kernel_below'", ("kernel_below",))
        return data


def _group_exponents(study, by: list[str], keys: list[tuple]) -> list[phases.Exponents | None]:
    """The :class:`~ntkpipe.theory.phases.Exponents` of each group ``keys`` of ``by`` from the scaling
    powers of its runs (None for a group without runs)."""
    found: dict[tuple, phases.Exponents] = {}
    for point, run, scaling in zip(study.points, study.runs, study.scalings):
        found[tuple(point[a] for a in by)] = phases.exponents_from_powers(
            dict(scaling.powers), run.model.depth, run.model.parameterization, run.model.layer_variance is not None)
    return [found.get(k) for k in keys]


def predicted_phases(s: PredictedPhaseOptions, ds: xr.Dataset, study) -> xr.Dataset:
    """``<name>``: the phase λ²'s exponents predict for each value of ``by``, and ``<name>_target_term``,
    ``<name>_init_term`` (their exponents of d) and ``<name>_kernel_change`` (the predicted exponent of
    the relative NTK change), from the scaling powers of its runs; per group of ``by`` in ``ds``'s layout,
    "none"/NaN for a grid's groups without runs."""
    by = s.by_axes
    rows = _group_exponents(study, by, group_keys(ds, by))
    nan = float("nan")

    def var(values, dtype: type = float):
        return over(by, ds, s.name, values, dtype)

    out = xr.Dataset({s.name: var([phases.predicted_phase(e) if e else "none" for e in rows], object),
                      f"{s.name}_target_term": var([e.target_term if e else nan for e in rows]),
                      f"{s.name}_init_term": var([e.init_term if e else nan for e in rows]),
                      f"{s.name}_kernel_change": var([e.kernel_change if e else nan for e in rows])})
    out[s.name] = out[s.name].astype(str)
    return out


def measured_phases(s: MeasuredPhaseOptions, ds: xr.Dataset, study) -> xr.Dataset:
    """``<name>``: the measured phase of each group of ``by`` (:func:`measured_phase`), and beside it
    ``<name>_exponent`` ± ``<name>_exponent_stderr`` (the power-law fit of y over x it judges) and
    ``<name>_predicted_exponent`` (p = min(T − I, 0) of the group's scaling powers), per group in
    ``ds``'s layout."""
    by = s.by_axes
    keys = group_keys(ds, by)
    predicted = [e.kernel_change if e else float("nan") for e in _group_exponents(study, by, keys)]
    rows = [measured_phase(sub_grid(ds, dict(zip(by, key))), s, p) for key, p in zip(keys, predicted)]
    return xr.Dataset({s.name: over(by, ds, s.name, [r[0] for r in rows], object).astype(str),
                       f"{s.name}_exponent": over(by, ds, s.name, [r[1] for r in rows]),
                       f"{s.name}_exponent_stderr": over(by, ds, s.name, [r[2] for r in rows]),
                       f"{s.name}_predicted_exponent": over(by, ds, s.name, predicted)})


def measured_phase(sub: xr.Dataset, s: MeasuredPhaseOptions, predicted: float) -> tuple[str, float, float]:
    """The phase of one scaling from its runs along d (``s.x``), with the fitted exponent b and its
    standard error s of y over d that it judges against the ``predicted`` exponent
    (:func:`ntkpipe.theory.phases.exponent_phase`); see :class:`MeasuredPhaseOptions`. Runs missing from a
    sparse grid (no run id) are left out; "none" if no run is left."""
    fit = fit_variables(FitOptions(name=s.exponent, kind="power_law", x=s.x, y=s.y), sub)
    exponent, stderr = float(fit[s.exponent]), float(fit[f"{s.exponent}_stderr"])
    present = sub["run_id"] != ""
    if not bool(present.any()):
        return "none", exponent, stderr
    if bool((sub["diverged"].where(present, 0) > 0).any()):
        return "unstable", exponent, stderr
    x = s.x
    largest = sub[x].where(present.any([d for d in present.dims if d != x]), drop=True).values.max()
    at = sub.sel({x: largest})
    loss = at["loss"].where(at["run_id"] != "")
    if float((final_value(loss) / loss.isel(time=0)).mean()) > s.frozen_loss_ratio:
        return "frozen", exponent, stderr
    if float(at[s.y].where(at["run_id"] != "").mean()) < s.min_change:
        return "kernel", exponent, stderr
    return phases.exponent_phase(exponent, stderr, predicted, s.stderrs), exponent, stderr


def predicted_attrs(s: PredictedPhaseOptions, study) -> dict[str, dict[str, str]]:
    by = per_group(s.by_axes)
    return {s.name: {"long_name": "predicted phase", "description": f"kernel, learning, frozen or unstable, {SOURCE}{by}"},
            f"{s.name}_target_term": {"long_name": "exponent of d of λ²'s target term",
                                      "description": f"T = 2k + e_u + e_W, {SOURCE}{by}"},
            f"{s.name}_init_term": {"long_name": "exponent of d of λ²'s init term",
                                    "description": f"I = 4k + 2 max(e_W + n + v_u, e_u + n + v_W), {SOURCE}{by}"},
            f"{s.name}_kernel_change": {"long_name": "predicted exponent of d of the relative NTK change",
                                        "description": f"min(T − I, 0): T − I when the init term dominates, else 0 "
                                                       f"(O(1) change), {SOURCE}{by}"}}


def measured_attrs(s: MeasuredPhaseOptions, study) -> dict[str, dict[str, str]]:
    by, y = per_group(s.by_axes), variable_label(s.y)
    k, fit, d = s.stderrs, f"log {s.y} = a + b log {s.x}", axis_label(study.axis_keys.get(s.x, s.x))
    return {
        s.name: {"long_name": "measured phase",
                 "description": f"phase read off the runs along {s.x}{by}, judged against the predicted "
                                f"exponent p = min(T − I, 0) of {s.y} (solvable-model Sec. 3, Table 1): "
                                f"unstable if a run diverged; frozen if at the largest {s.x} the loss kept "
                                f"> {s.frozen_loss_ratio} of its initial value; kernel if {s.y} at the "
                                f"largest {s.x} < {s.min_change}, or the fitted exponent b ± s "
                                f"({s.name}_exponent ± {s.name}_exponent_stderr) has b + {k}·s < 0 "
                                f"(significantly below the learning phase's 0), or |b − p| ≤ {k}·s and "
                                f"|b − p| < |b| (consistent with a predicted p < 0 and nearer it than 0); "
                                "else learning"},
        f"{s.name}_exponent": {"long_name": f"measured exponent of {y} in {d}",
                               "description": f"b of the least-squares fit {fit} that {s.name} judges "
                                              f"(seeds pooled){by}"},
        f"{s.name}_exponent_stderr": {"long_name": f"standard error of {s.name}_exponent",
                                      "description": f"standard error s of b in {fit}{by}"},
        f"{s.name}_predicted_exponent": {
            "long_name": f"predicted exponent of {y} in {d}",
            "description": "p = min(T − I, 0) from the exponents of λ² under the scaling powers "
                           f"(solvable-model Sec. 3, Table 1, ntkpipe.theory.phases){by}"}}


def scaling_problems(s: SummaryOptions, check) -> list:
    """Every value of ``by`` has one set of powers, of a depth-2 standard-parameterization net (a
    measured_phase judges its runs against the exponent these powers predict)."""
    if check.points is None:
        return []
    if not any(check.scalings):
        return check.problem(("kind",), f"a {s.kind} needs the study's 'scaling' (hyperparameters as powers of d)")
    seen: dict[tuple, dict] = {}
    for point, run, scaling in zip(check.points, check.runs, check.scalings):
        key = tuple(point.get(a) for a in s.by_axes)
        powers = dict(scaling.powers) if scaling else {}
        try:
            phases.exponents_from_powers(powers, getattr(run.model, "depth", 0), run.model.parameterization,
                                         getattr(run.model, "layer_variance", None) is not None)
        except ValueError as err:
            return check.problem(("kind",), f"{err} (sweep point {point})")
        if seen.setdefault(key, powers) != powers:
            at = dict(zip(s.by_axes, key))
            return check.problem(("by",), f"runs at {at or 'every point'} have different scaling powers; add the "
                                          "axis that tells them apart to 'by'")
    return []


def measured_problems(s: MeasuredPhaseOptions, check) -> list:
    """Its scaling (:func:`scaling_problems`), x and y, the power_law summary of y over x listed before
    it (``exponent``), and the training loss it reads."""
    out = check.axis(s.x, ("x",), "x") + check.variable(s.y, ("scalar",), ("y",)) + scaling_problems(s, check)
    fits = {f.name: f for f in check.earlier if f.kind == "power_law"}
    fit = fits.get(s.exponent)
    if fit is None:
        out += check.problem(("exponent",), f"{s.exponent!r} is not a power_law summary listed before this "
                                            f"one{suggest(s.exponent, fits)}")
    elif (fit.x, fit.y, fit.by_axes) != (s.x, s.y, s.by_axes):
        out += check.problem(("exponent",), f"{s.exponent!r} fits {fit.y} over {fit.x} by {fit.by_axes}; "
                                            f"this summary reads {s.y} over {s.x} by {s.by_axes}")
    if "loss" not in check.measured:
        out += check.problem((), "a measured_phase reads the training loss (frozen runs): add loss to measure")
    return out


def predicted_tables(s: PredictedPhaseOptions, variables: dict[str, Variable]) -> dict[str, Variable]:
    """The predicted phase and its exponents, one value per run (a ``phases`` figure reads them)."""
    return {s.name: Variable(s.name, "predicted phase"),
            f"{s.name}_kernel_change": Variable(f"{s.name}_kernel_change", "predicted exponent of the NTK change")}


def measured_tables(s: MeasuredPhaseOptions, variables: dict[str, Variable]) -> dict[str, Variable]:
    """The measured phase, its fitted exponent ± error and the predicted exponent, one value per run
    (a ``phases`` figure reads them)."""
    return {s.name: Variable(s.name, "measured phase"),
            **{f"{s.name}_{k}": Variable(f"{s.name}_{k}", label) for k, label in
               (("exponent", "measured exponent"), ("exponent_stderr", "standard error of the measured exponent"),
                ("predicted_exponent", "predicted exponent"))}}


KINDS = [SummaryKind("predicted_phase", PredictedPhaseOptions, predicted_phases, predicted_attrs, scaling_problems,
                     predicted_tables),
         SummaryKind("measured_phase", MeasuredPhaseOptions, measured_phases, measured_attrs, measured_problems,
                     measured_tables)]


PHASE_COLUMNS = ["predicted_phase", "predicted_exponent", "measured_exponent", "measured_exponent_stderr",
                 "measured_phase", "agree"]
"""The columns of :func:`phase_table` after the ``by`` axes (solvable-model Table 1)."""


def phase_table(ds: xr.Dataset, study) -> pd.DataFrame:
    """The phase table of ``ds`` (solvable-model Table 1): one row per group of the ``by`` axes of each
    ``measured_phase`` summary of ``study``'s spec (e.g. task × scaling) that has runs, with the phase
    its scaling powers predict, the predicted exponent p of y in d, the fitted exponent b ± s, the
    measured phase and whether the two phases agree. Empty without a measured_phase summary."""
    from ntkpipe.summaries.registry import summary_options

    frames = []
    for item in study.spec.summaries:
        if item.kind != "measured_phase":
            continue
        s = summary_options(item)
        by = s.by_axes
        keys = group_keys(ds, by)
        exponents = _group_exponents(study, by, keys)
        rows = []
        for key, e in zip(keys, exponents):
            sub = sub_grid(ds, dict(zip(by, key)))
            measured = _one(sub[s.name])
            if measured in ("none", ""):  # a grid's group without runs
                continue
            predicted = phases.predicted_phase(e) if e else "none"
            rows.append({**dict(zip(by, key)), "predicted_phase": predicted,
                         "predicted_exponent": float(_one(sub[f"{s.name}_predicted_exponent"])),
                         "measured_exponent": float(_one(sub[f"{s.name}_exponent"])),
                         "measured_exponent_stderr": float(_one(sub[f"{s.name}_exponent_stderr"])),
                         "measured_phase": measured, "agree": predicted == measured})
        frames.append(pd.DataFrame(rows, columns=[*by, *PHASE_COLUMNS]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PHASE_COLUMNS)


def _one(var: xr.DataArray):
    """The value a group's variable holds (the same at every run of the group): the first non-empty one."""
    values = [v for v in var.values.ravel().tolist() if v not in ("", None) and not (isinstance(v, float) and v != v)]
    if values:
        return values[0]
    return var.values.ravel()[0] if var.size else float("nan")
