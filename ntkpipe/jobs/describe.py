"""CF-style attributes that make result stores readable without the code.

Every data variable and coordinate gets ``long_name`` and ``description`` (and ``units`` where one
exists): measured variables from the measurement registry, theory residuals from
:mod:`ntkpipe.jobs.residuals`, sweep axes from their spec keys, summaries from the study's spec, and
coordinates and bookkeeping from the tables below. A variable none of them describes is an error,
so a new variable cannot ship without a description. A study dataset also gets its provenance.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

import xarray as xr

from ntkpipe.jobs.residuals import residual_attrs
from ntkpipe.labels import AXIS_LABELS, axis_label
from ntkpipe.lang.axes import AXES, SWEEPABLE_SECTIONS, models_in
from ntkpipe.measure.registry import ALWAYS_RECORDED, TIME_UNITS, VARIABLES, variable_attrs
from ntkpipe.summaries import SUMMARY_KINDS, summary_options
from ntkpipe.train.final_state import DYNAMICS_PREFIX, PARAMS

COORDINATES: dict[str, tuple[str, str | None, str]] = {
    "time": ("t", TIME_UNITS, "checkpoint time t = η₀·step, η₀ = train.optimizer.lr (a network rescaled by "
             "model.gamma steps with η₀γ² and keeps this time); a study's series share the union of its runs' "
             "checkpoint times, NaN where a run has none"),
    "step": ("optimizer step", "optimizer steps", "optimizer steps taken before each checkpoint"),
    "epoch": ("epoch", "epochs", "passes over the training set before each checkpoint (steps / steps per epoch)"),
    "test_point": (AXIS_LABELS["test_point"], None, "index (from 1) of a test point in the data's test split"),
    "output": ("output c", None, "index (from 1) of a network output c: one per class or teacher"),
    "target": ("target d", None, "index (from 1) of a target y_d: one per class or teacher"),
    "mode": (AXIS_LABELS["mode"], None, "index (from 1) of a singular mode of the target map Σ_yx = Yᵀx/P, "
             "by descending singular value s_k"),
    "spectrum_index": (AXIS_LABELS["spectrum_index"], None, "index (from 1) of an eigenvalue of XᵀX/P, descending"),
    "eigenfunction": (AXIS_LABELS["eigenfunction"], None, "index i (from 1) of an init NTK eigenvector φ_i, "
                      "by descending eigenvalue λ_i"),
    "stein_vector": ("Stein test vector", None, "test vector u of the Stein check: 1…k the top k NADs, the last "
                     "one a random unit vector"),
    "nad": ("NAD index j", None, "index j (from 1) of a NAD v_j, by descending σ_j"),
    "row": ("image row", None, "pixel row (from 1) of an image"),
    "column": ("image column", None, "pixel column (from 1) of an image"),
    "channel": ("image channel", None, "colour channel (from 1) of an image"),
    "train_point": ("training point μ", None, "index μ (from 1) of a point of the measurement's training subset"),
    "train_point_nu": ("training point ν", None, "index ν (from 1) of a point of the measurement's training subset: "
                       "the columns of a Gram whose rows are train_point μ"),
    "checkpoint": (AXIS_LABELS["checkpoint"], None, "init: a series at t = 0; end: its last finite value "
                   "(an endpoints summary)"),
}
"""Coordinates that are not sweep axes: (long_name, units, description)."""

BOOKKEEPING: dict[str, tuple[str, str | None, str]] = {
    "run_id": ("run id", None, "content hash of the run's resolved config, its store results/runs/<run_id>.zarr; "
               "empty where the sweep grid has no run"),
    "seconds_train": ("training seconds", "s", "wall-clock seconds of the optimizer steps (or kernel dynamics)"),
    "seconds_measure": ("measurement seconds", "s", "wall-clock seconds of the checkpoint and final measurements"),
    "seconds_job": ("job seconds", "s", "wall-clock seconds of the whole training job"),
    "seconds_final": ("final-job seconds", "s", "wall-clock seconds of a final job (final measurements added to a "
                      "trained run from its store)"),
    PARAMS: ("final parameters", None, "the trained network's trainable parameters as one flat vector "
                     "(jax.flatten_util.ravel_pytree order, training dtype); final jobs rebuild the model from it"),
}
"""Variables every run store holds besides its measurements: (long_name, units, description)."""

AXIS_UNITS = {"max_time": TIME_UNITS, "steps": "optimizer steps", "epochs": "epochs", "pretrain_epochs": "epochs"}


def describe(ds: xr.Dataset, study=None) -> xr.Dataset:
    """Set the attrs of every data variable and coordinate of ``ds`` (a run store, or with ``study``
    the study dataset); raises ValueError naming a variable that nothing describes."""
    summaries = summary_attrs(study) if study is not None else {}
    for name in map(str, [*ds.data_vars, *ds.coords]):
        if study is not None and name in study.axes:
            attrs = sweep_axis_attrs(name, ds)
        else:
            attrs = summaries.get(name) or _known_attrs(name)
        if attrs is None:
            raise ValueError(f"{name!r} has no description: register it in ntkpipe.measure.registry (a measured "
                             "variable) or in ntkpipe.jobs.describe (coordinates, summaries, bookkeeping)")
        ds[name].attrs.update({k: v for k, v in attrs.items() if v is not None})
    return ds


def _known_attrs(name: str) -> Mapping[str, str | None] | None:
    if name in VARIABLES or name in {v.name for v in ALWAYS_RECORDED}:
        return variable_attrs(name)
    if name.startswith(DYNAMICS_PREFIX):
        return {"long_name": name.removeprefix(DYNAMICS_PREFIX), "units": None,
                "description": "a number the kernel kind's dynamics yields (e.g. the OFE's γ), kept for final jobs"}
    table = COORDINATES.get(name) or BOOKKEEPING.get(name)
    if table:
        return dict(zip(("long_name", "units", "description"), table))
    return residual_attrs(name)


def sweep_axis_attrs(dim: str, ds: xr.Dataset) -> dict[str, str | None]:
    """A sweep axis: its label, and the spec key it sets (its ``axis`` attr), case axis or scale parameter."""
    key = ds[dim].attrs.get("axis", dim)
    if key in AXES:
        path = ".".join(AXES[key])
        field_doc = _field_description(AXES[key])
        description = f"sweep axis: each run's spec key {path}" + (f" ({field_doc})" if field_doc else "")
    elif key == "scaling.d":
        description = ("sweep axis: the scale parameter d of the spec's scaling; each parameter in "
                       "scaling.powers is p₀·(d/reference)^power")
    else:
        description = f"case axis (sweep.cases.{key}): each value names a set of spec overrides merged into its runs"
    return {"long_name": axis_label(dim, ds), "units": AXIS_UNITS.get(key.rsplit(".", 1)[-1]),
            "description": description}


def _field_description(path: tuple[str, ...]) -> str | None:
    """The schema's description of the spec key at ``path`` (None if it has none)."""
    models = models_in(SWEEPABLE_SECTIONS[path[0]]) if path[0] in SWEEPABLE_SECTIONS else []
    field = None
    for name in path[1:]:
        field = next((m.model_fields[name] for m in models if name in m.model_fields), None)
        if field is None:
            return None
        models = models_in(field.annotation)
    return field.description if field is not None else None


def summary_attrs(study) -> dict[str, dict[str, str]]:
    """Attrs of the variables the study's summaries add (their kinds' records, :mod:`ntkpipe.summaries`)."""
    out = {}
    for s in map(summary_options, study.spec.summaries):
        out.update(SUMMARY_KINDS[s.kind].attrs(s, study))
    return out


def provenance(study, run_attrs: list[dict]) -> dict[str, str]:
    """Dataset attrs: the study, its variant and spec file, the resolved spec (JSON), the UTC creation
    time, and ``run_versions``: the distinct ``versions`` the run stores record (JSON list; a store
    without them contributes its ``ntkpipe_version``)."""
    versions = []
    for attrs in run_attrs:
        found = attrs.get("versions")
        if isinstance(found, str):
            try:
                found = json.loads(found)
            except json.JSONDecodeError:
                pass
        found = found if found is not None else {"ntkpipe": attrs.get("ntkpipe_version")}
        if found not in versions:
            versions.append(found)
    return {"study": study.name, "variant": study.variant, "spec_path": str(study.path),
            "study_spec": json.dumps(study.spec.model_dump(mode="json"), sort_keys=True),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "run_versions": json.dumps(versions, sort_keys=True)}
