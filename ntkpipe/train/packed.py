"""Packed training: k same-shape runs trained together in one compiled, vmapped program.

Members share the network's structure (tree and static fields), the data shapes, the optimizer and
the step and checkpoint schedule; they differ in the vmapped leaves: initial parameters (σ, seed),
learning rate, batch-order key and training data (seed, label index). Between two checkpoints
``advance_steps`` of :mod:`ntkpipe.train.loop` runs under ``jax.vmap``; at each checkpoint every
member that has not stopped is measured on its own, unstacked model, exactly as :func:`train` does.
A member whose loss turns non-finite stops (its remaining checkpoints are NaN) while the others go
on: vmapped members share no arithmetic. Results equal the unpacked :func:`train` up to float
rounding (a batched matmul may sum in another order; ``tests/test_packed.py`` states the tolerance).
"""

from __future__ import annotations

import hashlib
import time
from typing import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.models import trainable
from ntkpipe.progress import Progress
from ntkpipe.spec.schema import TrainSpec
from ntkpipe.train.loop import (Trajectory, advance_steps, cast_floats, checkpoint_steps, exploded,
                                layer_multipliers, stack_records, steps_per_epoch, total_steps)
from ntkpipe.train.optim import update_direction


def stack(trees: Sequence):
    """Pytrees of equal structure → one pytree whose leaves have a leading member axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def unstack(tree, i: int):
    """Member ``i`` of a stacked pytree."""
    return jax.tree.map(lambda a: a[i], tree)


@eqx.filter_jit
def _advance_pack(diffs, static, opt_states, step0, n_steps, lrs, multipliers, total, keys, xs, ys, **options):
    """``advance_steps`` for every member at once; returns stacked (diff, opt_state, finite)."""
    def one(diff, opt_state, lr, key, x, y):
        return advance_steps(diff, static, opt_state, step0, n_steps, lr, multipliers, total, key, x, y, **options)

    return jax.vmap(one)(diffs, opt_states, lrs, keys, xs, ys)


def _fingerprint(leaf):
    if eqx.is_array(leaf):
        a = np.asarray(leaf)
        return a.shape, str(a.dtype), hashlib.sha1(a.tobytes()).hexdigest()
    return repr(leaf)


def structure_key(model: eqx.Module, x: np.ndarray, y: np.ndarray):
    """What members of one vmapped program must share: the trainable tree with its leaves' shapes
    and dtypes, the static part (static fields, and the values of frozen arrays such as a
    linearization's origin θ₀) and the data shapes."""
    diff, static = trainable(model)
    leaves, treedef = jax.tree.flatten(diff)
    static_leaves, static_def = jax.tree.flatten(static)
    return (treedef, tuple((a.shape, str(a.dtype)) for a in leaves), static_def,
            tuple(_fingerprint(s) for s in static_leaves), np.shape(x), np.shape(y))


def train_packed(models: Sequence[eqx.Module], xs: Sequence[np.ndarray], ys: Sequence[np.ndarray],
                 spec: TrainSpec, *, keys: Sequence, etas: Sequence[float], lr_scales: Sequence[float],
                 measures: Sequence[Callable[[eqx.Module, int, bool], dict]], label: str = "pack") -> list[Trajectory]:
    """Train members i = 0…k−1 (``models[i]`` on ``xs[i]``, ``ys[i]`` with batch key ``keys[i]``,
    learning rate η₀ = ``etas[i]`` times ``lr_scales[i]``, time t = η₀·step) for the shared ``spec``
    (everything but ``optimizer.lr``; the step count must not depend on η₀), calling
    ``measures[i](model, index, last)`` at every checkpoint as :func:`ntkpipe.train.loop.train` does.
    Returns one :class:`Trajectory` per member; its ``seconds['train']`` is the pack's training time
    divided by k."""
    dtype = jnp.dtype(spec.dtype)
    k = len(models)
    x = jnp.stack([jnp.asarray(a, dtype) for a in xs])
    y = jnp.stack([jnp.asarray(a, dtype) for a in ys])
    if spec.batch_size is not None and spec.batch_size > x.shape[1]:
        raise ValueError(f"train.batch_size {spec.batch_size} exceeds the {x.shape[1]} training points")
    parts = [trainable(cast_floats(m, dtype)) for m in models]
    static = parts[0][1]
    total = total_steps(spec, x.shape[1])
    ckpts = checkpoint_steps(spec.checkpoints, total)
    last = len(ckpts) - 1
    direction = update_direction(spec.optimizer)
    diffs = stack([d for d, _ in parts])
    opt_states = stack([direction.init(d) for d, _ in parts])
    multipliers = layer_multipliers(parts[0][0], spec.optimizer, dtype)
    options = dict(loss_name=spec.loss, direction=direction, schedule=spec.optimizer.schedule,
                   batch_size=spec.batch_size)
    lr = jnp.stack([jnp.asarray(eta * scale) for eta, scale in zip(etas, lr_scales)])
    key = jnp.stack(list(keys))
    records: list[list[dict]] = [[] for _ in range(k)]
    running = [True] * k
    stopped: list = [None] * k  # a stopped member's parameters where it stopped, as train keeps them
    diverged = [False] * k
    seconds_train, seconds_measure = 0.0, [0.0] * k
    progress = Progress(label, total)
    done = 0
    for index, target in enumerate(ckpts):
        if target > done:
            tic = time.perf_counter()
            diffs, opt_states, finite = _advance_pack(
                diffs, static, opt_states, jnp.asarray(done), jnp.asarray(target - done), lr, multipliers,
                jnp.asarray(total), key, x, y, **options)
            finite = np.asarray(finite)
            seconds_train += time.perf_counter() - tic
            done = int(target)
            for i in range(k):
                if running[i] and not finite[i]:
                    running[i], diverged[i] = False, True
                    stopped[i] = unstack(diffs, i)
        if not any(running):
            break
        for i in (i for i in range(k) if running[i]):
            tic = time.perf_counter()
            with np.errstate(over="ignore", invalid="ignore"):  # an exploding model's measurements overflow
                record = measures[i](eqx.combine(unstack(diffs, i), static), index, index == last)
            seconds_measure[i] += time.perf_counter() - tic
            records[i].append(record)
            if "loss" in record and not np.isfinite(record["loss"]):
                running[i], diverged[i] = False, True
                stopped[i] = unstack(diffs, i)
        progress.update(done)
    progress.close(diverged=all(diverged))
    spe = steps_per_epoch(x.shape[1], spec.batch_size)
    out = []
    for i in range(k):
        if records[i] and "loss" in records[i][0] and not diverged[i]:
            diverged[i] = exploded(records[i][0]["loss"], records[i][-1]["loss"])
        out.append(Trajectory(steps=ckpts, time=ckpts * etas[i], epoch=ckpts / spe,
                              series=stack_records(records[i], len(ckpts)), diverged=diverged[i],
                              model=eqx.combine(unstack(diffs, i) if stopped[i] is None else stopped[i], static),
                              seconds={"train": seconds_train / k, "measure": seconds_measure[i]}))
    return out
