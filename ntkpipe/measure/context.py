"""What measurements read: a run's data and models, with shared quantities computed once.

:class:`RunContext` holds one run's spec, data (float64 and in the training dtype), initial model
and label eigenpairs; :class:`ModelView` lazily computes the outputs and NTK Grams of one model on
that data, so that e.g. ``kernel_norm`` and ``alignment`` at a checkpoint share one Gram.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from ntkpipe.compile_options import measurement_jit
from ntkpipe.data import Dataset
from ntkpipe.lang.schema import RunSpec
from ntkpipe.models import MLP, Linearized, trainable
from ntkpipe.models.flat import flat_vector
from ntkpipe.ntk import empirical_ntk, flatten_gram


@measurement_jit
def _outputs(model, x):
    return jax.vmap(model)(x)


def moving_network(model) -> MLP:
    """The network whose weights move: ``params`` of a linearized model, else the model."""
    net = model.params if isinstance(model, Linearized) else model
    return cast(MLP, net)  # the measurements that read weights apply to MLPs only (MLP_ONLY)


def effective_teacher(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """(β, s) of the least-squares linear predictor w* = s β of scalar targets, |β| = 1.

    On whitened data the MSE loss is ½|w − w*|² + const, so (β, s) are the teacher of the
    silent-alignment theory; for a linear teacher with P ≥ D they are the true ones.
    """
    w, *_ = np.linalg.lstsq(np.asarray(x, np.float64), np.asarray(y, np.float64)[:, 0], rcond=None)
    s = float(np.linalg.norm(w))
    return w / s, s


@dataclass
class RunContext:
    """One run's inputs to its measurements; ``stages`` holds the stage outputs the run reads, by
    what they provide (``labels``, ``directions``, ``origin``)."""

    spec: RunSpec
    data: Dataset
    model0: eqx.Module
    stages: dict[str, xr.Dataset] = field(default_factory=dict)

    @cached_property
    def dtype(self):
        return jnp.dtype(self.spec.train.dtype)

    @cached_property
    def x_train(self) -> jax.Array:
        return jnp.asarray(self.data.x_train, self.dtype)

    @cached_property
    def x_test(self) -> jax.Array:
        return jnp.asarray(self.data.x_test, self.dtype)

    @cached_property
    def theta0(self) -> np.ndarray:
        """θ_0: the initial trainable parameters (a linearization's: its origin), flat, float64."""
        return flat_vector(trainable(self.model0)[0]).astype(np.float64)

    @cached_property
    def teacher(self) -> tuple[np.ndarray, float]:
        """(β, s): the least-squares direction and scale of the training targets."""
        return effective_teacher(self.data.flat_train, self.data.y_train)

    def label_eigenpairs(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` eigenvalues (k,) and unit eigenvectors (n·C, k) of the labels' stage."""
        eigen = self.stages["labels"]
        return eigen["eigenvalues"].values[:k], eigen["eigenvectors"].values[:, :k]

    @cached_property
    def label_eigenpair(self) -> tuple[float, np.ndarray]:
        """(λ_j, φ_j) of the label eigenvector of ``eigenvector_sign`` labels."""
        j = self.spec.data.labels.eigen_index
        assert j is not None, "eigenvector_sign labels have an eigen_index (LabelsSpec)"
        values, vectors = self.label_eigenpairs(j)
        return float(values[j - 1]), vectors[:, j - 1]


def scheduled(index: int, last: bool, every: int) -> bool:
    """Whether a measurement taken at init, at the end and every ``every``-th checkpoint (0: never in
    between) is due at checkpoint ``index`` (``last``: the final one)."""
    return index == 0 or last or (every > 0 and index % every == 0)


class CheckpointView:
    """What checkpoint measurements read at checkpoint ``index`` (``last``: the final one) of a run."""

    run: RunContext
    index: int
    last: bool

    def scheduled(self, every: int) -> bool:
        """Whether a measurement taken at init, at the end and every ``every``-th checkpoint (0:
        never in between) is due here."""
        return scheduled(self.index, self.last, every)


class ModelView(CheckpointView):
    """Outputs and NTK Grams of ``model`` on a run's data, each computed on first use."""

    def __init__(self, model: eqx.Module, run: RunContext, index: int = 0, last: bool = True):
        self.model, self.run, self.index, self.last = model, run, index, last

    def kernel_subset(self, n: int) -> np.ndarray:
        """(n, n, C, C) float64 NTK on the first ``n`` training inputs."""
        return np.asarray(empirical_ntk(self.model, self.run.data.x_train[:n]))

    def gram_subset(self, n: int) -> np.ndarray:
        """(n·C, n·C) float64 NTK Gram on the first ``n`` training inputs."""
        return flatten_gram(self.kernel_subset(n))

    @cached_property
    def f_train(self) -> np.ndarray:
        return np.asarray(_outputs(self.model, self.run.x_train), np.float64)

    @cached_property
    def f_test(self) -> np.ndarray:
        return np.asarray(_outputs(self.model, self.run.x_test), np.float64)

    @cached_property
    def gram_train(self) -> np.ndarray:
        """(P·C, P·C) float64 NTK Gram on the training inputs."""
        return flatten_gram(np.asarray(empirical_ntk(self.model, self.run.data.x_train)))


class PackedView(ModelView):
    """Member ``member`` of a packed run at a checkpoint: outputs and the training Gram are its
    slices of quantities computed for every member at once (``checkpoint[name][member]``, e.g. a
    :class:`ntkpipe.train.packed.PackCheckpoint`), each on first use; the model is built on first use."""

    def __init__(self, checkpoint, member: int, run: RunContext, index: int, last: bool):
        self.checkpoint, self.member, self.run, self.index, self.last = checkpoint, member, run, index, last

    @cached_property
    def model(self) -> eqx.Module:
        return self.checkpoint.model(self.member)

    @cached_property
    def f_train(self) -> np.ndarray:
        return self.checkpoint["f_train"][self.member]

    @cached_property
    def f_test(self) -> np.ndarray:
        return self.checkpoint["f_test"][self.member]

    @cached_property
    def gram_train(self) -> np.ndarray:
        """(P·C, P·C) float64 NTK Gram on the training inputs."""
        return self.checkpoint["gram_train"][self.member]


class KernelView(CheckpointView):
    """The state of a kernel model (``kgd``, ``akgd``, ``ofe``, ``ofe_fit``) at a checkpoint: its
    outputs on the training (and test) points and its (P·C, P·C) Gram on the training points.
    Measurements flagged ``kernel_models`` read it as they read a :class:`ModelView`."""

    model = None

    def __init__(self, run: RunContext, index: int, last: bool, f_train: np.ndarray, f_test: np.ndarray | None,
                 gram_train: np.ndarray):
        self.run, self.index, self.last = run, index, last
        self.f_train, self.f_test, self.gram_train = f_train, f_test, gram_train

    def gram_subset(self, n: int) -> np.ndarray:
        """(n·C, n·C) Gram on the first ``n`` training inputs."""
        c = self.f_train.shape[1]
        return self.gram_train[: n * c, : n * c]
