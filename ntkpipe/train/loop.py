"""The network stepper: a network (or its linearization) trained by compiled optax steps.

Between two checkpoints, :func:`advance_steps` runs n optimizer steps inside one ``lax.fori_loop`` (n is
traced, so one compilation serves every segment, every run with the same shapes and every σ or seed;
minibatch runs also share it across training-set sizes, :mod:`ntkpipe.train.batches`). A run's compile
options follow its training FLOPs and optimizer (:func:`training_compile_options`).
The driver (:func:`ntkpipe.train.driver.drive`) owns the checkpoints, measurements and divergence;
this stepper reports a non-finite loss at some step or non-finite parameters at a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.compile_options import jit_with_options, training_options
from ntkpipe.lang.schema import OptimizerSpec, TrainSpec
from ntkpipe.models import forward_batch, layer_components, learning_rate_scale, run_keys, split_state, trainable
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.train.batches import TrainingData, TrainingSet, batch_slots
from ntkpipe.train.driver import Run, Trajectory, drive
from ntkpipe.train.flops import training_flops
from ntkpipe.train.losses import LOSSES
from ntkpipe.train.optim import learning_rate, update_direction


def layer_multipliers(diff, spec: OptimizerSpec, dtype):
    """The learning-rate multiplier m_ℓ of every trainable leaf (a pytree like ``diff``): ``layer_lr[ℓ]``
    times ``lr_ratio`` for the readout (the last layer); leaves outside the layers get 1."""
    components, count = layer_components(diff)
    per_layer = list(spec.layer_lr or [1.0] * count)
    per_layer[-1] *= spec.lr_ratio
    leaves, treedef = jax.tree.flatten(diff)
    return treedef.unflatten([jnp.asarray(per_layer[c] if c < count else 1.0, dtype) for c in components])


def advance_steps(diff, static, opt_state, step0, n_steps, lr, multipliers, total, data: TrainingSet, *,
                  loss_name, direction, schedule, batch_size):
    """n_steps optimizer steps from step0; returns (diff, opt_state, finite, state): whether the loss of
    every step and the parameters after the last are finite, and the network's state (BatchNorm
    statistics, in ``static``; empty for a stateless network) after the last, each step in train mode
    (:func:`ntkpipe.models.forward_batch`), on ``data`` (:meth:`ntkpipe.train.batches.TrainingData.pieces`):
    full-batch steps read all of it, minibatches follow its window of epoch orders."""
    per_example = LOSSES[loss_name]
    net_state, static = split_state(static)

    def batch_loss(d, s, xb, yb, mask):
        f, model = forward_batch(eqx.combine(d, s, static), xb, mask)
        return jnp.sum(mask * per_example(f, yb)) / jnp.sum(mask), split_state(model)[0]

    def body(i, carry):
        d, s, state, finite = carry
        step = step0 + i
        if batch_size is None:
            xb, yb, mask = data.x, data.y, jnp.ones((data.x.shape[0],), data.x.dtype)
        else:
            idx, inside = batch_slots(data, step, batch_size)
            xb, yb, mask = data.x[idx], data.y[idx], inside.astype(data.x.dtype)
        (loss, s), grads = jax.value_and_grad(batch_loss, has_aux=True)(d, s, xb, yb, mask)
        updates, state = direction.update(grads, state, d)
        eta = learning_rate(schedule, lr, step, total, data.x.dtype)
        d = jax.tree.map(lambda p, u, m: p - eta * m * u, d, updates, multipliers)
        return d, s, state, finite & jnp.isfinite(loss)

    diff, net_state, opt_state, finite = jax.lax.fori_loop(
        0, n_steps, body, (diff, net_state, opt_state, jnp.array(True)))
    finite = finite & jnp.array([jnp.all(jnp.isfinite(p)) for p in jax.tree.leaves(diff)]).all()
    return diff, opt_state, finite, net_state


class NetworkState(NamedTuple):
    """The trainable parameters, the optimizer's state (a pytree) and the rest of the network
    (``static``: its BatchNorm statistics, which train-mode steps update, and its fixed leaves)."""

    diff: eqx.Module
    opt_state: object
    static: eqx.Module


class NetworkStepper:
    """One network ``model`` trained on (``x_train``, ``y_train``) per ``spec`` with batch-order ``key``,
    at the learning rate η₀·``lr_scale`` (η₀γ² for a network with feature-learning rate γ), its steps
    compiled with ``compile_options`` (XLA's defaults if none)."""

    members = 1
    splits = True  # a segment's steps run in one fori_loop whose count is traced: pieces run the same program

    def __init__(self, model: eqx.Module, x_train: np.ndarray, y_train: np.ndarray, spec: TrainSpec, *, key,
                 lr_scale: float = 1.0, compile_options: dict | None = None):
        dtype = jnp.dtype(spec.dtype)
        self.x, self.y, self.dtype = x_train, y_train, dtype
        if spec.batch_size is not None and spec.batch_size > len(x_train):
            raise ValueError(f"train.batch_size {spec.batch_size} exceeds the {len(x_train)} training points")
        self.diff0, self.static0 = trainable(cast_floats(model, dtype))
        self.fixed = split_state(self.static0)[1]  # the static part that training never changes
        self.direction = update_direction(spec.optimizer)
        self.multipliers = layer_multipliers(self.diff0, spec.optimizer, dtype)
        self.lr = jnp.asarray(spec.optimizer.lr * lr_scale)
        self.key, self.batch_size = key, spec.batch_size
        self.continues = spec.optimizer.schedule == "constant"  # linear_decay's η_t depends on the total
        self.program = jit_with_options(advance_steps, compile_options)
        self.options = dict(loss_name=spec.loss, direction=self.direction, schedule=spec.optimizer.schedule,
                            batch_size=spec.batch_size)

    def init(self, steps: np.ndarray) -> NetworkState:
        self.total = jnp.asarray(int(steps[-1]))
        self.data = TrainingData(self.x, self.y, self.dtype, self.key, self.batch_size, int(steps[-1]))
        # optax's Params type leaves out registered pytrees such as equinox modules (a stub gap)
        return NetworkState(self.diff0, self.direction.init(self.diff0), self.static0)  # pyright: ignore[reportArgumentType]

    def advance(self, state: NetworkState, done: int, target: int) -> tuple[NetworkState, np.ndarray]:
        finite = True
        for start, end, data in self.data.pieces(done, target):
            diff, opt_state, ok, net_state = self.program(state.diff, state.static, state.opt_state,
                                                          jnp.asarray(start), jnp.asarray(end - start), self.lr,
                                                          self.multipliers, self.total, data, **self.options)
            state = NetworkState(diff, opt_state, eqx.combine(net_state, self.fixed))
            finite = finite and bool(ok)
        return state, np.array([finite])

    def checkpoint(self, state: NetworkState, member: int) -> eqx.Module:
        return eqx.combine(state.diff, state.static)

    def can_diverge(self, state: NetworkState, member: int) -> bool:
        return True

    def final(self, state: NetworkState, member: int) -> tuple[eqx.Module, dict[str, float]]:
        return eqx.combine(state.diff, state.static), {}

    def member(self, state: NetworkState, member: int) -> NetworkState:
        return state

    def joined(self, states: Sequence[NetworkState]) -> NetworkState:
        return states[0]


def network_stepper(run: Run, reference: dict[str, float]) -> NetworkStepper:
    """The stepper of a run (its spec, data and initial network ``model0``; the linearization for
    ``kind: linearized``), compiled by :func:`training_compile_options`."""
    return NetworkStepper(run.model0, run.data.x_train, run.data.y_train, run.spec.train,
                          key=run_keys(run.spec.seed)[1], lr_scale=learning_rate_scale(run.spec.model),
                          compile_options=training_compile_options(run))


def training_compile_options(run: Run) -> dict[str, bool]:
    """The compile options of the training program of ``run`` (:func:`~ntkpipe.compile_options.training_options`
    of its architecture, optimizer and training FLOPs)."""
    spec = run.spec
    return training_options(spec.model.architecture, spec.train.optimizer.name, training_flops(run))


def train(model: eqx.Module, x_train: np.ndarray, y_train: np.ndarray, spec: TrainSpec, *, key,
          measure: Callable[[eqx.Module, int, bool], dict], label: str = "train", lr_scale: float = 1.0) -> Trajectory:
    """Train ``model`` per ``spec`` (:class:`NetworkStepper` through :func:`ntkpipe.train.driver.drive`),
    calling ``measure(model, index, last)`` at every checkpoint. Steps use the learning rate
    η₀·``lr_scale``; time stays t = η₀·step."""
    stepper = NetworkStepper(model, x_train, y_train, spec, key=key, lr_scale=lr_scale)
    return drive(stepper, spec, [measure], n_train=stepper.x.shape[0], etas=[spec.optimizer.lr], label=label)[0]
