"""``linear_teacher``: inputs with linear teachers (silent-alignment Sec. 3, kernel-alignment Sec. 5.2,
solvable-model Sec. 2)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ntkpipe.data.arrays import Dataset
from ntkpipe.data.sources.base import DataOptions, Dim, Gamma, Source, needs_dim, vector_shape, whiten
from ntkpipe.data.synthetic import gaussian_inputs, line_direction, line_inputs, sphere_inputs, unit_teacher
from ntkpipe.strict import CrossKeyError, Strict


class LinearTeacherOptions(Strict):
    """``linear_teacher``: y_c = s β_cᵀx for c = 1…``teachers``, x of D = ``dim`` coordinates.
    ``inputs: gaussian`` draws x ~ N(0, I_D) and unit β_c; ``inputs: sphere`` draws x = g/|g|, g ~ N(0, I_D)
    (uniform on S^{D−1}) and β_c ~ N(0, I_D) (kernel-alignment Sec. 5.2, Fig. 4D); either way y_c ~ N(0, s²).
    ``inputs: line`` puts x = a·n on a line with a ~ N(0, 1) and β_c = n (solvable-model Sec. 2; a single
    training point is the unit input x = n). ``singular_values: [s_1, …, s_C]`` makes the β_c orthonormal
    (QR of the drawn ones) and y_c = s·s_c β_cᵀx: on whitened inputs (``gamma: 0``) the target map
    Σ_yx = Yᵀx/P has singular values exactly s·s_c, modes learned one after another when they are apart
    (silent-alignment App. H, Fig. H.1). ``inputs``, ``teachers`` and ``singular_values`` are left out of a
    run's config while at their defaults, so specs written before they existed keep their run ids."""

    dim: Dim = None
    inputs: Literal["gaussian", "sphere", "line"] = Field("gaussian", exclude_if=lambda v: v == "gaussian",
                                                          description="input distribution of linear_teacher data")
    teachers: int = Field(1, ge=1, exclude_if=lambda v: v == 1, description="C: linear teachers, one output each")
    teacher_scale: float = Field(1.0, gt=0, description="s in y = s βᵀx")
    singular_values: list[float] | None = Field(
        None, min_length=1, exclude_if=lambda v: v is None,
        description="s_1 … s_C of the teachers y_c = s·s_c β_cᵀx with orthonormal β_c: the singular values of "
                    "Σ_yx on whitened inputs (silent-alignment App. H); one per teacher")
    gamma: Gamma = None


def _inputs(spec: DataOptions, rng: np.random.Generator) -> np.ndarray:
    """The n_train + n_test inputs (n, D), train first."""
    if spec.inputs == "line":  # the training point alone is the unit input when there is one
        return np.concatenate([line_inputs(spec.n_train, spec.dim, spec.seed, rng),
                               line_inputs(spec.n_test, spec.dim, spec.seed, rng) if spec.n_test
                               else np.zeros((0, spec.dim))])
    return (gaussian_inputs if spec.inputs == "gaussian" else sphere_inputs)(spec.n_train + spec.n_test, spec.dim, rng)


def teachers(spec: DataOptions, rng: np.random.Generator) -> np.ndarray:
    """β_1 … β_C as columns (D, C), scaled so that y_c = β_cᵀx ~ N(0, 1) for every input law:
    unit β_c for x ~ N(0, I_D); β_c ~ N(0, I_D) for x on the unit sphere (kernel-alignment Sec. 5.2);
    β_c = n for inputs on the line x = a·n. With ``singular_values`` the drawn β_c are made orthonormal
    and β_c scaled to |β_c| = s_c, so that y_c = s_c β̂_cᵀx."""
    if spec.inputs == "line":  # β_c = n, the line's direction: y = s·a (solvable-model Sec. 2)
        return np.repeat(line_direction(spec.dim, spec.seed)[:, None], spec.teachers, axis=1)
    if spec.inputs == "gaussian":
        beta = np.stack([unit_teacher(spec.dim, rng) for _ in range(spec.teachers)], axis=1)
    else:
        beta = rng.standard_normal((spec.dim, spec.teachers))
    if spec.singular_values is None:
        return beta
    q, r = np.linalg.qr(beta)  # orthonormal β_c, the signs of the drawn ones
    return q * np.sign(np.diag(r)) * np.asarray(spec.singular_values, dtype=np.float64)


def rules(spec: DataOptions) -> None:
    """``dim`` is needed; ``singular_values`` names one value per teacher, for orthonormal β_c in R^D."""
    needs_dim(spec)
    if spec.singular_values is None:
        return
    if spec.inputs == "line":
        raise CrossKeyError("'singular_values' needs orthonormal teachers, but inputs: line puts every β_c on the "
                            "line; use inputs: gaussian", ("singular_values",), ("inputs",))
    if len(spec.singular_values) != spec.teachers:
        raise CrossKeyError(f"'singular_values' names {len(spec.singular_values)} values for teachers = "
                            f"{spec.teachers}; give one per teacher", ("singular_values",), ("teachers",))
    if spec.teachers > spec.dim:
        raise CrossKeyError(f"{spec.teachers} orthonormal teachers do not fit in dim = {spec.dim}; use teachers "
                            "<= dim", ("teachers",), ("dim",))
    if min(spec.singular_values) <= 0:
        raise CrossKeyError("'singular_values' must be positive", ("singular_values",))


def load(spec: DataOptions, rng: np.random.Generator, direction: np.ndarray | None = None) -> Dataset:
    """Inputs, whitened (``gamma``), then the teachers drawn after them; ``beta`` holds them as columns."""
    x = _inputs(spec, rng)
    x_train, x_test = whiten(spec, x[: spec.n_train], x[spec.n_train:])
    beta = teachers(spec, rng)
    s = spec.teacher_scale
    return Dataset(x_train, s * (x_train @ beta), x_test, s * (x_test @ beta), beta=beta)


SOURCE = Source("linear_teacher", LinearTeacherOptions, load, vector_shape, outputs=lambda spec: spec.teachers,
                rules=rules, example={"dim": 4, "n_train": 8, "n_test": 4})
