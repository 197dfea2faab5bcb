"""Packed training: k same-shape runs trained together in one compiled program per checkpoint.

Members share the network's structure (tree and static fields), the data shapes, the optimizer and
the step and checkpoint schedule; they differ in the mapped leaves: initial parameters (σ, seed),
learning rate, batch-order key and training data (seed, label index). Between two checkpoints one
compiled call runs ``advance_steps`` of :mod:`ntkpipe.train.loop` for every member (``lax.map``:
each member's steps are the unbatched arithmetic of :func:`train`, so the parameters are
bit-identical on CPU; a ``vmap`` sums batched matmuls in another order, which Adam near
interpolation amplifies to percent-level differences of the final parameters), and returns what
the checkpoint measurements share, for every member (vmapped): outputs f(X_train), f(X_test) and
the training Gram Θ(X_train, X_train) (:class:`PackCheckpoint`); each member's measurements then
read their slices (:class:`ntkpipe.measure.context.PackedView`). A member that diverges as a run of
:func:`ntkpipe.train.loop.train` does (non-finite loss or parameters, a loss above
``train.divergence_factor`` times its initial) stops (its remaining checkpoints are NaN) while the
others go on.
``tests/test_packed.py`` states the tolerance.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.lang.schema import TrainSpec
from ntkpipe.models import trainable
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.progress import Progress
from ntkpipe.train.loop import (
    Trajectory,
    advance_steps,
    blew_up,
    checkpoint_steps,
    exploded,
    layer_multipliers,
    stack_records,
    steps_per_epoch,
    total_steps,
)
from ntkpipe.train.optim import update_direction


def stack(trees: Sequence):
    """Pytrees of equal structure → one pytree whose leaves have a leading member axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def unstack(tree, i: int):
    """Member ``i`` of a stacked pytree."""
    return jax.tree.map(lambda a: a[i], tree)


GRAM_CHUNK_BYTES = 256 * 2**20
"""Members whose training Grams are computed at once by a packed checkpoint call: as many as fit in
this many bytes of float64 Grams (at least one); the rest follow in a loop of the same program."""


QUANTITIES = ("f_train", "f_test", "gram_train")
"""What checkpoint measurements share (:class:`ntkpipe.measure.context.ModelView`'s cached arrays)."""


def _quantities(diff, static, x, x_test, x64, names: frozenset):
    """One member's shared checkpoint quantities ``names`` (of :data:`QUANTITIES`): outputs
    f(X_train), f(X_test) in the training dtype and the float64 NTK Gram Θ(X_train, X_train)."""
    model = eqx.combine(diff, static)
    out = {}
    if "f_train" in names:
        out["f_train"] = jax.vmap(model)(x)
    if "f_test" in names:
        out["f_test"] = jax.vmap(model)(x_test)
    if "gram_train" in names:
        out["gram_train"] = flatten_gram(empirical_ntk(model, x64))
    return out


def _pack_quantities(diffs, static, evals, names: frozenset, chunk: int):
    """:func:`_quantities` of every member (leading axis), ``chunk`` members at a time."""
    def one(member):
        diff, x, x_test, x64 = member
        return _quantities(diff, static, x, x_test, x64, names)

    return jax.lax.map(one, (diffs, *evals), batch_size=chunk)


@eqx.filter_jit
def _advance_pack(diffs, static, opt_states, step0, n_steps, lrs, multipliers, total, keys, xs, ys, evals, *,
                  names: frozenset, chunk: int, **options):
    """``advance_steps`` for each member in turn, then the quantities ``names`` of the advanced
    members, in one compiled call; returns stacked (diff, opt_state, finite, quantities)."""
    def one(diff, opt_state, lr, key, x, y):
        return advance_steps(diff, static, opt_state, step0, n_steps, lr, multipliers, total, key, x, y, **options)

    diffs, opt_states, finite = jax.lax.map(lambda member: one(*member), (diffs, opt_states, lrs, keys, xs, ys))
    return diffs, opt_states, finite, _pack_quantities(diffs, static, evals, names, chunk)


_pack_quantities_jit = eqx.filter_jit(_pack_quantities)


class PackCheckpoint:
    """Every member's state at one checkpoint. ``self[name]`` (a :data:`QUANTITIES` name) is that
    quantity of all members, float64, with a leading member axis: given by the training call, or
    computed on first use by one compiled call for all members (and then listed in ``used``);
    ``model(i)`` is member i's network, built on first use."""

    def __init__(self, diffs, static, evals, chunk: int, computed: dict):
        self.diffs, self.static, self.evals, self.chunk = diffs, static, evals, chunk
        self.values = {k: np.asarray(v, np.float64) for k, v in computed.items()}
        self.used: set[str] = set()
        self._host = None

    def __getitem__(self, name: str) -> np.ndarray:
        self.used.add(name)
        if name not in self.values:
            out = _pack_quantities_jit(self.diffs, self.static, self.evals, frozenset([name]), self.chunk)
            self.values[name] = np.asarray(out[name], np.float64)
        return self.values[name]

    def model(self, i: int) -> eqx.Module:
        """Member i's network with NumPy parameters: slices of one host copy per checkpoint, so
        that NumPy measurements of the weights dispatch nothing (JAX functions take them as arrays)."""
        if self._host is None:
            self._host = jax.tree.map(np.asarray, self.diffs)
        return eqx.combine(unstack(self._host, i), self.static)


def _fingerprint(leaf):
    if eqx.is_array(leaf):
        a = np.asarray(leaf)
        return a.shape, str(a.dtype), hashlib.sha1(a.tobytes()).hexdigest()
    return repr(leaf)


def structure_key(model: eqx.Module, x: np.ndarray, y: np.ndarray, x_test: np.ndarray):
    """What members of one packed program must share: the trainable tree with its leaves' shapes
    and dtypes, the static part (static fields, and the values of frozen arrays such as a
    linearization's origin θ₀) and the data shapes."""
    diff, static = trainable(model)
    leaves, treedef = jax.tree.flatten(diff)
    static_leaves, static_def = jax.tree.flatten(static)
    return (treedef, tuple((a.shape, str(a.dtype)) for a in leaves), static_def,
            tuple(_fingerprint(s) for s in static_leaves), np.shape(x), np.shape(y), np.shape(x_test))


def _chunk(x64: jax.Array, outputs: int) -> int:
    """Members per Gram chunk: :data:`GRAM_CHUNK_BYTES` of (P·C)² float64 Grams."""
    return max(1, GRAM_CHUNK_BYTES // (8 * (x64.shape[1] * outputs) ** 2))


def train_packed(models: Sequence[eqx.Module], xs: Sequence[np.ndarray], ys: Sequence[np.ndarray],
                 x_tests: Sequence[np.ndarray], spec: TrainSpec, *, keys: Sequence, etas: Sequence[float],
                 lr_scales: Sequence[float], measures: Sequence[Callable[[PackCheckpoint, int, int, bool], dict]],
                 label: str = "pack") -> list[Trajectory]:
    """Train members i = 0…k−1 (``models[i]`` on ``xs[i]``, ``ys[i]`` with batch key ``keys[i]``,
    learning rate η₀ = ``etas[i]`` times ``lr_scales[i]``, time t = η₀·step; test inputs
    ``x_tests[i]``) for the shared ``spec`` (everything but ``optimizer.lr``; the step count must not
    depend on η₀), calling ``measures[i](checkpoint, i, index, last)`` at every checkpoint as
    :func:`ntkpipe.train.loop.train` calls its ``measure``, with ``checkpoint`` a
    :class:`PackCheckpoint`.

    After checkpoint 0 (init), a checkpoint is one compiled call for the whole pack: it advances
    every member and returns, for all members, the shared quantities the measurements read at
    checkpoint 0 (f(X_train) for the loss, and e.g. the training Gram); one they read for the
    first time later is computed then, for all members in one call, as are those of checkpoint 0.
    Returns one :class:`Trajectory` per member; its ``seconds['train']`` (the compiled calls) and
    ``seconds['measure']`` (the rest of the measurements) are the pack's divided by k."""
    dtype = jnp.dtype(spec.dtype)
    k = len(models)
    x = jnp.stack([jnp.asarray(a, dtype) for a in xs])
    y = jnp.stack([jnp.asarray(a, dtype) for a in ys])
    evals = (x, jnp.stack([jnp.asarray(a, dtype) for a in x_tests]),
             jnp.stack([jnp.asarray(a, jnp.float64) for a in xs]))
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
                   batch_size=spec.batch_size, chunk=_chunk(evals[2], y.shape[2]))
    lr = jnp.stack([jnp.asarray(eta * scale) for eta, scale in zip(etas, lr_scales)])
    key = jnp.stack(list(keys))
    records: list[list[dict]] = [[] for _ in range(k)]
    running = [True] * k
    stopped: list = [None] * k  # a stopped member's parameters where it stopped, as train keeps them
    diverged = [False] * k
    seconds_train, seconds_measure = 0.0, 0.0
    names = frozenset()
    progress = Progress(label, total)
    done = 0
    for index, target in enumerate(ckpts):
        tic = time.perf_counter()
        finite, computed = np.ones(k, bool), {}
        if target > done:
            diffs, opt_states, finite, computed = _advance_pack(
                diffs, static, opt_states, jnp.asarray(done), jnp.asarray(target - done), lr, multipliers,
                jnp.asarray(total), key, x, y, evals, names=names, **options)
            finite = np.asarray(finite)
        checkpoint = PackCheckpoint(diffs, static, evals, options["chunk"], computed)
        seconds_train += time.perf_counter() - tic
        done = int(target)
        for i in range(k):
            if running[i] and not finite[i]:
                running[i], diverged[i] = False, True
                stopped[i] = unstack(diffs, i)
        if not any(running):
            break
        tic = time.perf_counter()
        for i in (i for i in range(k) if running[i]):
            with np.errstate(over="ignore", invalid="ignore"):  # an exploding model's measurements overflow
                record = measures[i](checkpoint, i, index, index == last)
            records[i].append(record)
            if "loss" in record and blew_up(records[i][0]["loss"], record["loss"], spec.divergence_factor):
                running[i], diverged[i] = False, True
                stopped[i] = unstack(diffs, i)
        seconds_measure += time.perf_counter() - tic
        if index == 0:  # what the measurements read at init is computed with the training steps from now on
            names = frozenset(checkpoint.used)
        progress.update(done, loss=next((r[-1].get("loss") for r, on in zip(records, running) if on), None))
    progress.close(diverged=all(diverged))
    spe = steps_per_epoch(x.shape[1], spec.batch_size)
    out = []
    for i in range(k):
        if records[i] and "loss" in records[i][0] and not diverged[i]:
            diverged[i] = exploded(records[i][0]["loss"], records[i][-1]["loss"])
        out.append(Trajectory(steps=ckpts, time=ckpts * etas[i], epoch=ckpts / spe,
                              series=stack_records(records[i], len(ckpts)), diverged=diverged[i],
                              model=eqx.combine(unstack(diffs, i) if stopped[i] is None else stopped[i], static),
                              seconds={"train": seconds_train / k, "measure": seconds_measure / k}))
    return out
