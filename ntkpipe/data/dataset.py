"""Build a study's train/test arrays from its ``data`` spec.

Order of operations: draw or load inputs → select classes and split (seeded by ``data.seed``) →
resize images (``image_size``) → standardize images (remove the train pixel mean, scale to unit
mean per-coordinate variance) → partial whitening with the train SVD (``gamma``) → targets.
Inputs keep their shape: (n, D) vectors, (n, H, W, channels) images; models that need vectors
flatten them. Everything is float64; training casts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ntkpipe.data.digits import digits_pool
from ntkpipe.data.images import grayscale, resize
from ntkpipe.data.nad import nad_samples
from ntkpipe.data.synthetic import (
    gaussian_inputs,
    line_direction,
    line_inputs,
    mixture_samples,
    orthonormal_centres,
    random_signs,
    sphere_inputs,
    unit_teacher,
)
from ntkpipe.data.whitening import partial_whitening_map
from ntkpipe.lang.schema import SYNTHETIC_SOURCES, DataSpec


@dataclass(frozen=True)
class Dataset:
    """Inputs (n, *input_shape) and targets (n, C). ``beta`` holds the teachers β_c of
    linear-teacher data as columns (D, C)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    beta: np.ndarray | None = None
    class_labels: dict = field(default_factory=dict)

    @property
    def x_all(self) -> np.ndarray:
        """Train then test inputs: the row order of every train ∪ test Gram."""
        return np.concatenate([self.x_train, self.x_test])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One example's shape: (D,) or (H, W, channels)."""
        return tuple(self.x_train.shape[1:])

    @property
    def flat_train(self) -> np.ndarray:
        """Training inputs as (n, D) vectors (images flattened row-major)."""
        return self.x_train.reshape(len(self.x_train), math.prod(self.input_shape))

    @property
    def flat_test(self) -> np.ndarray:
        return self.x_test.reshape(len(self.x_test), math.prod(self.input_shape))

    @property
    def n_outputs(self) -> int:
        return self.y_train.shape[1]

    @property
    def principal_direction(self) -> np.ndarray:
        """The top right-singular vector n of the flattened training inputs, signed so that n·x₁ > 0
        (for data on a line x = a·n: ±n)."""
        _, _, vt = np.linalg.svd(self.flat_train, full_matrices=False)
        n = vt[0]
        return n if n @ self.flat_train[0] >= 0 else -n

    def with_targets(self, y_all: np.ndarray) -> Dataset:
        """Replace the targets by ``y_all`` (n_train + n_test, C), train rows first."""
        n = self.x_train.shape[0]
        return Dataset(self.x_train, y_all[:n], self.x_test, y_all[n:], self.beta, self.class_labels)


SOURCE_CLASSES = {"digits": 10, "mnist": 10, "cifar10": 10}


def output_count(spec: DataSpec) -> int:
    """Network outputs C the targets need: 1 for ±1 labels, sign φ_j or two groups; one per
    teacher or mixture class; else one per class (1 for two classes)."""
    if spec.source in ("nad", "random_labels") or spec.labels.kind in ("eigenvector_sign", "two_groups"):
        return 1
    if spec.source == "linear_teacher":
        return spec.teachers
    if spec.source == "gaussian_mixture":
        return spec.clusters
    n_classes = len(spec.classes) if spec.classes is not None else SOURCE_CLASSES[spec.source]
    return 1 if n_classes == 2 else n_classes


def load_dataset(spec: DataSpec, direction: np.ndarray | None = None) -> Dataset:
    """The inputs and default targets of ``spec`` (labels from stages are applied by the caller).

    ``direction`` is the NAD v_j of ``nad`` data (shaped like one input), read from its stage.
    """
    rng = np.random.default_rng(spec.seed)
    if spec.source == "nad":
        if direction is None:
            raise ValueError("data.source 'nad' needs the direction v_j of its nad stage")
        x, y = nad_samples(np.asarray(direction), spec.n_train + spec.n_test, rng, epsilon=spec.margin,
                           sigma=spec.noise, half_margin=spec.half_margin)
        y = y[:, None].astype(np.float64)
        return Dataset(x[: spec.n_train], y[: spec.n_train], x[spec.n_train:], y[spec.n_train:])
    if spec.source in SYNTHETIC_SOURCES:
        x_train, labels_train, x_test, labels_test = _synthetic_split(spec, rng)
    else:
        x_train, labels_train, x_test, labels_test = _image_split(spec, rng)
        x_train, x_test = _standardize(x_train, x_test)
    if spec.gamma is not None:
        shape = x_train.shape[1:]
        dim = math.prod(shape)
        flat_train, flat_test = x_train.reshape(len(x_train), dim), x_test.reshape(len(x_test), dim)
        m = partial_whitening_map(flat_train, spec.gamma)
        x_train = (flat_train @ m).reshape(len(flat_train), *shape)
        x_test = (flat_test @ m).reshape(len(flat_test), *shape)
    if spec.source == "linear_teacher":
        beta = _teachers(spec, rng)
        return Dataset(x_train, spec.teacher_scale * (x_train @ beta), x_test, spec.teacher_scale * (x_test @ beta),
                       beta=beta)
    if spec.source == "random_labels":
        return Dataset(x_train, labels_train[:, None], x_test, labels_test[:, None])
    if spec.source == "gaussian_mixture":
        one_hot = np.eye(spec.clusters)
        return Dataset(x_train, one_hot[labels_train], x_test, one_hot[labels_test],
                       class_labels={"classes": list(range(spec.clusters))})
    if spec.labels.kind == "two_groups":
        plus, minus = spec.labels.class_groups
        targets = [np.where(np.isin(labels, plus), 1.0, -1.0)[:, None] for labels in (labels_train, labels_test)]
        return Dataset(x_train, targets[0], x_test, targets[1], class_labels={"groups": [list(plus), list(minus)]})
    classes = list(range(SOURCE_CLASSES[spec.source])) if spec.classes is None else spec.classes  # every class, drawn or not
    return Dataset(x_train, class_targets(labels_train, classes), x_test, class_targets(labels_test, classes),
                   class_labels={"classes": list(classes)})


def class_targets(labels: np.ndarray, classes: list[int]) -> np.ndarray:
    """Two classes → (n, 1) with −1 for ``classes[0]`` and +1 for ``classes[1]``; more → one-hot (n, C)."""
    position = {c: i for i, c in enumerate(classes)}
    index = np.array([position[c] for c in labels.tolist()], dtype=np.int64)
    if len(classes) == 2:
        return np.where(index == 1, 1.0, -1.0)[:, None]
    return np.eye(len(classes))[index]


def _synthetic_split(spec: DataSpec, rng: np.random.Generator):
    """Train and test inputs (n, D) of a synthetic source with their labels: ±1 (``random_labels``),
    class indices (``gaussian_mixture``) or None (``linear_teacher``, whose targets come later)."""
    if spec.source == "gaussian_mixture":
        centres = orthonormal_centres(spec.clusters, spec.dim, rng)
        return (*mixture_samples(centres, spec.n_train, spec.noise, rng),
                *mixture_samples(centres, spec.n_test, spec.noise, rng))
    n = spec.n_train + spec.n_test
    inputs = spec.inputs if spec.source == "linear_teacher" else "sphere"
    if inputs == "line":  # the training point alone is the unit input when there is one
        x = np.concatenate([line_inputs(spec.n_train, spec.dim, spec.seed, rng),
                            line_inputs(spec.n_test, spec.dim, spec.seed, rng) if spec.n_test else np.zeros((0, spec.dim))])
    else:
        x = (gaussian_inputs if inputs == "gaussian" else sphere_inputs)(n, spec.dim, rng)
    if spec.source == "linear_teacher":
        return x[: spec.n_train], None, x[spec.n_train:], None
    y = random_signs(n, rng)
    return x[: spec.n_train], y[: spec.n_train], x[spec.n_train:], y[spec.n_train:]


def _teachers(spec: DataSpec, rng: np.random.Generator) -> np.ndarray:
    """β_1 … β_C as columns (D, C), scaled so that y_c = β_cᵀx ~ N(0, 1) for every input law:
    unit β_c for x ~ N(0, I_D); β_c ~ N(0, I_D) for x on the unit sphere (kernel-alignment Sec. 5.2);
    β_c = n for inputs on the line x = a·n."""
    if spec.inputs == "line":  # β_c = n, the line's direction: y = s·a (solvable-model Sec. 2)
        return np.repeat(line_direction(spec.dim, spec.seed)[:, None], spec.teachers, axis=1)
    if spec.inputs == "gaussian":
        return np.stack([unit_teacher(spec.dim, rng) for _ in range(spec.teachers)], axis=1)
    return rng.standard_normal((spec.dim, spec.teachers))


def kept_classes(spec: DataSpec) -> list[int] | None:
    """``classes``, or for two-group labels the classes of both groups."""
    if spec.classes is None and spec.labels.kind == "two_groups":
        return sorted(set(spec.labels.class_groups[0]) | set(spec.labels.class_groups[1]))
    return spec.classes


def _image_split(spec: DataSpec, rng: np.random.Generator):
    """Class-filtered, shuffled train and test images as float64 (n, H, W, channels) in [0, 1]
    (resized to ``image_size``), and their labels."""
    x_train, labels_train, x_test, labels_test = _raw_image_split(spec, rng)
    if spec.image_size is not None:
        x_train, x_test = resize(x_train, spec.image_size), resize(x_test, spec.image_size)
    return x_train, labels_train, x_test, labels_test


def _raw_image_split(spec: DataSpec, rng: np.random.Generator):
    classes = kept_classes(spec)
    if spec.source == "digits":
        x, labels = digits_pool()
        x, labels = _keep_classes(x, labels, classes)
        order = rng.permutation(len(x))
        need = spec.n_train + spec.n_test
        if need > len(x):
            raise ValueError(f"data.n_train + data.n_test = {need} exceeds the {len(x)} digits "
                             f"of classes {classes or 'all'}; lower them")
        train, test = order[: spec.n_train], order[spec.n_train: need]
        return x[train], labels[train], x[test], labels[test]
    from ntkpipe.data.files import load_cifar10, load_mnist, resolve_data_dir

    loader = {"mnist": load_mnist, "cifar10": load_cifar10}[spec.source]
    arrays = loader(resolve_data_dir(spec.path, spec.source))
    out = []
    for split, n in (("train", spec.n_train), ("test", spec.n_test)):
        x = arrays[f"x_{split}"].astype(np.float64) / 255.0
        x = x[..., None] if x.ndim == 3 else grayscale(x) if spec.grayscale else x
        x, labels = _keep_classes(x, arrays[f"y_{split}"].astype(np.int64), classes)
        if n > len(x):
            raise ValueError(f"data.n_{split} = {n} exceeds the {len(x)} {split} images of "
                             f"{spec.source} classes {classes or 'all'}; lower it")
        pick = rng.permutation(len(x))[:n]
        out += [x[pick], labels[pick]]
    return tuple(out)


def _keep_classes(x, labels, classes):
    if classes is None:
        return x, labels
    mask = np.isin(labels, classes)
    return x[mask], labels[mask]


def _standardize(x_train: np.ndarray, x_test: np.ndarray):
    """Remove the train mean of every pixel; divide by the train RMS of what is left."""
    mean = x_train.mean(axis=0)
    scale = np.sqrt(np.mean((x_train - mean) ** 2))
    return (x_train - mean) / scale, (x_test - mean) / scale
