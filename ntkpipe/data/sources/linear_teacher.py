"""``linear_teacher``: inputs with linear teachers (silent-alignment Sec. 3, kernel-alignment Sec. 5.2,
solvable-model Sec. 2)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ntkpipe.data.arrays import Dataset
from ntkpipe.data.sources.base import DataOptions, Dim, Gamma, Source, needs_dim, vector_shape, whiten
from ntkpipe.data.synthetic import gaussian_inputs, line_direction, line_inputs, sphere_inputs, unit_teacher
from ntkpipe.strict import Strict


class LinearTeacherOptions(Strict):
    """``linear_teacher``: y_c = s β_cᵀx for c = 1…``teachers``, x of D = ``dim`` coordinates.
    ``inputs: gaussian`` draws x ~ N(0, I_D) and unit β_c; ``inputs: sphere`` draws x = g/|g|, g ~ N(0, I_D)
    (uniform on S^{D−1}) and β_c ~ N(0, I_D) (kernel-alignment Sec. 5.2, Fig. 4D); either way y_c ~ N(0, s²).
    ``inputs: line`` puts x = a·n on a line with a ~ N(0, 1) and β_c = n (solvable-model Sec. 2; a single
    training point is the unit input x = n). ``inputs`` and ``teachers`` are left out of a run's config while
    at their defaults, so specs written before they existed keep their run ids."""

    dim: Dim = None
    inputs: Literal["gaussian", "sphere", "line"] = Field("gaussian", exclude_if=lambda v: v == "gaussian",
                                                          description="input distribution of linear_teacher data")
    teachers: int = Field(1, ge=1, exclude_if=lambda v: v == 1, description="C: linear teachers, one output each")
    teacher_scale: float = Field(1.0, gt=0, description="s in y = s βᵀx")
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
    β_c = n for inputs on the line x = a·n."""
    if spec.inputs == "line":  # β_c = n, the line's direction: y = s·a (solvable-model Sec. 2)
        return np.repeat(line_direction(spec.dim, spec.seed)[:, None], spec.teachers, axis=1)
    if spec.inputs == "gaussian":
        return np.stack([unit_teacher(spec.dim, rng) for _ in range(spec.teachers)], axis=1)
    return rng.standard_normal((spec.dim, spec.teachers))


def load(spec: DataOptions, rng: np.random.Generator, direction: np.ndarray | None = None) -> Dataset:
    """Inputs, whitened (``gamma``), then the teachers drawn after them; ``beta`` holds them as columns."""
    x = _inputs(spec, rng)
    x_train, x_test = whiten(spec, x[: spec.n_train], x[spec.n_train:])
    beta = teachers(spec, rng)
    s = spec.teacher_scale
    return Dataset(x_train, s * (x_train @ beta), x_test, s * (x_test @ beta), beta=beta)


SOURCE = Source("linear_teacher", LinearTeacherOptions, load, vector_shape, outputs=lambda spec: spec.teachers,
                rules=needs_dim, example={"dim": 4, "n_train": 8, "n_test": 4})
