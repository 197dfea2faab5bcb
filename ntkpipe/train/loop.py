"""Compiled training with measurements at checkpoints.

Between two checkpoints, ``_advance`` runs n optimizer steps inside one ``lax.fori_loop`` (n is traced,
so one compilation serves every segment, every run with the same shapes and every σ or seed).
Time is gradient-flow time t = η₀ · step. A run is *diverged* when its loss is non-finite at some
step, or its parameters at a checkpoint, or when its loss at a checkpoint exceeds
``train.divergence_factor`` times its initial loss (:func:`blew_up`): each stops it there (the
remaining checkpoints are NaN), however finite it would look later (a ReLU net dead after a blow-up
settles at the loss of a zero output). It is also diverged when its last measured loss exceeds
``EXPLOSION_FACTOR`` times its initial loss (:func:`exploded`; finite but exploding: a run too short
to overflow, down to a single step, whose series stays recorded).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.lang.schema import CheckpointSpec, OptimizerSpec, TrainSpec
from ntkpipe.models import layer_components, trainable
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.progress import Progress
from ntkpipe.train.losses import LOSSES
from ntkpipe.train.optim import learning_rate, update_direction

EXPLOSION_FACTOR = 10.0
"""A run whose last measured loss exceeds this multiple of its initial loss diverged: it ended an order of
magnitude worse than it started. No run of the default studies ends above its initial loss (the largest
final/initial ratio is 0.99, the largest mid-run ratio 1.4), and the runs that blow up pass 10¹⁶ within
a few checkpoints; a single step with a huge learning rate multiplies the loss by about (η λ_max)²."""


def blew_up(initial: float, loss: float, factor: float) -> bool:
    """Whether a checkpoint's loss stops the run as diverged: non-finite, or L_t > ``factor`` · L_0
    (``train.divergence_factor``), with L_0 the loss at step 0. Its default 10⁶ lies far above the
    healthy runs (the default studies' largest mid-run ratio is 1.4, a catapult's a few) and far below
    the blow-ups (10⁹ and more within a few steps, e.g. of a ReLU net that dies of it)."""
    return bool(not np.isfinite(loss) or loss > factor * initial)


def exploded(initial: float, final: float) -> bool:
    """Whether a run's finite loss exploded: L_T > ``EXPLOSION_FACTOR`` · L_0, with L_0 the loss at step 0
    and L_T the loss at its last checkpoint (False when either is NaN)."""
    return bool(final > EXPLOSION_FACTOR * initial)


def steps_per_epoch(n_train: int, batch_size: int | None) -> int:
    return 1 if batch_size is None else math.ceil(n_train / batch_size)


def total_steps(spec: TrainSpec, n_train: int) -> int:
    """Optimizer steps for ``steps``, ``epochs`` (incl. a last partial batch) or ``max_time`` = η₀ · steps."""
    if spec.steps is not None:
        return spec.steps
    if spec.epochs is not None:
        return spec.epochs * steps_per_epoch(n_train, spec.batch_size)
    return math.ceil(spec.max_time / spec.optimizer.lr - 1e-9)


def checkpoint_steps(spec: CheckpointSpec, total: int) -> np.ndarray:
    """Sorted unique steps in [0, total]: 0, the grid of ``spec``, and ``total``."""
    if spec.spacing == "log":
        k_max = int(math.floor(spec.per_decade * math.log10(max(total, 1)))) + 1
        grid = np.round(10.0 ** (np.arange(k_max + 1) / spec.per_decade)).astype(np.int64)
    else:
        grid = np.round(np.linspace(0, total, spec.count + 1)).astype(np.int64)
    grid = grid[grid <= total]
    return np.unique(np.concatenate([[0], grid, [total]]))


@dataclass
class Trajectory:
    """What a training run records: checkpoint steps, measured series, divergence and timings."""

    steps: np.ndarray
    time: np.ndarray
    epoch: np.ndarray
    series: dict[str, np.ndarray]
    diverged: bool
    model: eqx.Module | None
    seconds: dict[str, float] = field(default_factory=dict)
    finals: dict[str, float] = field(default_factory=dict)
    """Numbers the dynamics itself yields (e.g. the OFE's conservation error), for final measurements."""


def stack_records(records: list[dict], n_checkpoints: int) -> dict[str, np.ndarray]:
    """Per-checkpoint records → series over all ``n_checkpoints`` (NaN after a divergence)."""
    series = {}
    for k in records[0] if records else []:
        series[k] = np.full((n_checkpoints, *np.shape(records[0][k])), np.nan)
        for i, rec in enumerate(records):
            series[k][i] = rec[k]
    return series


def layer_multipliers(diff, spec: OptimizerSpec, dtype):
    """The learning-rate multiplier m_ℓ of every trainable leaf (a pytree like ``diff``): ``layer_lr[ℓ]``
    times ``lr_ratio`` for the readout (the last layer); leaves outside the layers get 1."""
    components, count = layer_components(diff)
    per_layer = list(spec.layer_lr or [1.0] * count)
    per_layer[-1] *= spec.lr_ratio
    leaves, treedef = jax.tree.flatten(diff)
    return treedef.unflatten([jnp.asarray(per_layer[c] if c < count else 1.0, dtype) for c in components])


def advance_steps(diff, static, opt_state, step0, n_steps, lr, multipliers, total, key, x, y, *,
                  loss_name, direction, schedule, batch_size):
    """n_steps optimizer steps from step0; returns (diff, opt_state, finite): whether the loss of
    every step and the parameters after the last are finite."""
    per_example = LOSSES[loss_name]
    n = x.shape[0]
    spe = 1 if batch_size is None else -(-n // batch_size)

    def batch_loss(d, xb, yb, mask):
        f = jax.vmap(eqx.combine(d, static))(xb)
        return jnp.sum(mask * per_example(f, yb)) / jnp.sum(mask)

    def body(i, carry):
        d, state, finite = carry
        step = step0 + i
        if batch_size is None:
            xb, yb, mask = x, y, jnp.ones((n,), x.dtype)
        else:
            epoch, k = step // spe, step % spe
            perm = jax.random.permutation(jax.random.fold_in(key, epoch), n)
            perm = jnp.concatenate([perm, perm[: spe * batch_size - n]])
            idx = jax.lax.dynamic_slice(perm, (k * batch_size,), (batch_size,))
            xb, yb = x[idx], y[idx]
            mask = ((k * batch_size + jnp.arange(batch_size)) < n).astype(x.dtype)
        loss, grads = jax.value_and_grad(batch_loss)(d, xb, yb, mask)
        updates, state = direction.update(grads, state, d)
        eta = learning_rate(schedule, lr, step, total, x.dtype)
        d = jax.tree.map(lambda p, u, m: p - eta * m * u, d, updates, multipliers)
        return d, state, finite & jnp.isfinite(loss)

    diff, opt_state, finite = jax.lax.fori_loop(0, n_steps, body, (diff, opt_state, jnp.array(True)))
    return diff, opt_state, finite & jnp.array([jnp.all(jnp.isfinite(p)) for p in jax.tree.leaves(diff)]).all()


_advance = eqx.filter_jit(advance_steps)


def train(model: eqx.Module, x_train: np.ndarray, y_train: np.ndarray, spec: TrainSpec, *, key,
          measure: Callable[[eqx.Module, int, bool], dict], label: str = "train", lr_scale: float = 1.0) -> Trajectory:
    """Train ``model`` per ``spec``, calling ``measure(model, index, last)`` at every checkpoint
    (``index`` counts checkpoints from 0; ``last`` marks the final one). Steps use the learning rate
    η₀·``lr_scale`` (η₀γ² for a network with feature-learning rate γ); time stays t = η₀·step.

    ``measure`` returns a dict of floats or arrays (a ``loss`` that :func:`blew_up` stops the run and
    marks it diverged, as do non-finite parameters or a final loss above ``EXPLOSION_FACTOR`` times the
    initial; other values may be NaN where a measurement skips a checkpoint); each is stacked over
    checkpoints into a series, NaN after a stop.
    """
    dtype = jnp.dtype(spec.dtype)
    x = jnp.asarray(x_train, dtype)
    y = jnp.asarray(y_train, dtype)
    if spec.batch_size is not None and spec.batch_size > x.shape[0]:
        raise ValueError(f"train.batch_size {spec.batch_size} exceeds the {x.shape[0]} training points")
    model = cast_floats(model, dtype)
    total = total_steps(spec, x.shape[0])
    ckpts = checkpoint_steps(spec.checkpoints, total)
    last = len(ckpts) - 1
    direction = update_direction(spec.optimizer)
    diff, static = trainable(model)
    opt_state = direction.init(diff)
    multipliers = layer_multipliers(diff, spec.optimizer, dtype)
    options = dict(loss_name=spec.loss, direction=direction, schedule=spec.optimizer.schedule,
                   batch_size=spec.batch_size)
    records: list[dict[str, float]] = []
    diverged = False
    seconds = {"train": 0.0, "measure": 0.0}
    progress = Progress(label, total)
    done = 0
    for index, target in enumerate(ckpts):
        if target > done:
            tic = time.perf_counter()
            diff, opt_state, finite = _advance(
                diff, static, opt_state, jnp.asarray(done), jnp.asarray(target - done),
                jnp.asarray(spec.optimizer.lr * lr_scale), multipliers, jnp.asarray(total), key, x, y, **options)
            finite = bool(finite)
            seconds["train"] += time.perf_counter() - tic
            done = int(target)
            if not finite:
                diverged = True
                break
        tic = time.perf_counter()
        with np.errstate(over="ignore", invalid="ignore"):  # an exploding model's measurements overflow
            record = measure(eqx.combine(diff, static), index, index == last)
        seconds["measure"] += time.perf_counter() - tic
        records.append(record)
        if "loss" in record and blew_up(records[0]["loss"], record["loss"], spec.divergence_factor):
            diverged = True
            break
        progress.update(done, loss=record.get("loss"))
    if records and "loss" in records[0] and not diverged:
        diverged = exploded(records[0]["loss"], records[-1]["loss"])
    progress.close(diverged=diverged)
    series = stack_records(records, len(ckpts))
    spe = steps_per_epoch(x.shape[0], spec.batch_size)
    return Trajectory(steps=ckpts, time=ckpts * spec.optimizer.lr, epoch=ckpts / spe, series=series,
                      diverged=diverged, model=eqx.combine(diff, static), seconds=seconds)
