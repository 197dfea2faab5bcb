"""Packed training: k same-shape runs trained together in one compiled program per checkpoint.

Members share the network's structure (tree and static fields), the data shapes, the optimizer and
the step and checkpoint schedule; they differ in the mapped leaves: initial parameters (σ, seed),
learning rate, batch-order key and training data (seed, label index). Between two checkpoints one
compiled call runs ``advance_steps`` of :mod:`ntkpipe.train.loop` for every member (``lax.map``:
each member's steps are the unbatched arithmetic of the network stepper, so the parameters are
bit-identical on CPU; a ``vmap`` sums batched matmuls in another order, which Adam near
interpolation amplifies to percent-level differences of the final parameters), and returns what
the checkpoint measurements share, for every member (vmapped): outputs f(X_train), f(X_test) and
the training Gram Θ(X_train, X_train) (:class:`PackCheckpoint`); each member's measurements then
read their slices (:class:`ntkpipe.measure.context.PackedView`). The driver
(:func:`ntkpipe.train.driver.drive`) stops a member that diverges (its remaining checkpoints are NaN)
while the others go on.
``tests/test_packed.py`` states the tolerance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.compile_options import jit_with_options, measurement_jit
from ntkpipe.lang.schema import TrainSpec
from ntkpipe.models import learning_rate_scale, run_keys, trainable
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.train.batches import TrainingData, TrainingSet
from ntkpipe.train.driver import Run, Trajectory, drive
from ntkpipe.train.loop import NetworkState, advance_steps, layer_multipliers, training_compile_options
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


def _advance_pack(diffs, static, opt_states, step0, n_steps, lrs, multipliers, total, data, evals, *,
                  names: frozenset, chunk: int, **options):
    """``advance_steps`` for each member in turn, then the quantities ``names`` of the advanced
    members, in one compiled call; returns stacked (diff, opt_state, finite, quantities)."""
    def one(diff, opt_state, lr, member_data):
        return advance_steps(diff, static, opt_state, step0, n_steps, lr, multipliers, total, member_data,
                             **options)[:3]

    diffs, opt_states, finite = jax.lax.map(lambda member: one(*member), (diffs, opt_states, lrs, data))
    return diffs, opt_states, finite, _pack_quantities(diffs, static, evals, names, chunk)


_pack_quantities_jit = measurement_jit(_pack_quantities)


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


class PackState(NamedTuple):
    """Every member's trainable parameters and optimizer state (stacked), the checkpoint the
    measurements read, and the shared quantities the advancing call computes, a mask over
    :data:`QUANTITIES` (set by the first advance: those the measurements read at checkpoint 0; an
    array, so that a snapshot keeps it)."""

    diffs: eqx.Module
    opt_states: object
    checkpoint: PackCheckpoint
    names: np.ndarray


class PackedStepper:
    """Members i = 0…k−1: ``models[i]`` trained on ``xs[i]``, ``ys[i]`` with batch key ``keys[i]`` at the
    learning rate ``etas[i]`` × ``lr_scales[i]``, test inputs ``x_tests[i]``, for the shared ``spec``
    (everything but ``optimizer.lr``; the step count must not depend on η₀).

    After checkpoint 0 (init), a checkpoint is one compiled call for the whole pack: it advances
    every member and returns, for all members, the shared quantities the measurements read at
    checkpoint 0 (f(X_train) for the loss, and e.g. the training Gram); one they read for the
    first time later is computed then, for all members in one call, as are those of checkpoint 0
    (:class:`PackCheckpoint`). The calls compile with ``compile_options`` (XLA's defaults if none; a
    pack's runs take their unpacked programs' options, so each member's steps are the network
    stepper's bit for bit)."""

    def __init__(self, models: Sequence[eqx.Module], xs: Sequence[np.ndarray], ys: Sequence[np.ndarray],
                 x_tests: Sequence[np.ndarray], spec: TrainSpec, *, keys: Sequence, etas: Sequence[float],
                 lr_scales: Sequence[float], compile_options: dict | None = None):
        dtype = jnp.dtype(spec.dtype)
        self.members = len(models)
        self.continues = spec.optimizer.schedule == "constant"  # linear_decay's η_t depends on the total
        self.splits = True  # pieces between checkpoints run the advance without the checkpoint quantities
        self.xs, self.ys, self.dtype = xs, ys, dtype
        self.x = jnp.stack([jnp.asarray(a, dtype) for a in xs])
        self.evals = (self.x, jnp.stack([jnp.asarray(a, dtype) for a in x_tests]),
                      jnp.stack([jnp.asarray(a, jnp.float64) for a in xs]))
        if spec.batch_size is not None and spec.batch_size > self.x.shape[1]:
            raise ValueError(f"train.batch_size {spec.batch_size} exceeds the {self.x.shape[1]} training points")
        parts = [trainable(cast_floats(m, dtype)) for m in models]
        self.static = parts[0][1]
        self.direction = update_direction(spec.optimizer)
        self.diffs0 = stack([d for d, _ in parts])
        # optax's Params type leaves out registered pytrees such as equinox modules (a stub gap)
        self.opt_states0 = stack([self.direction.init(d) for d, _ in parts])  # pyright: ignore[reportArgumentType]
        self.multipliers = layer_multipliers(parts[0][0], spec.optimizer, dtype)
        self.chunk = _chunk(self.evals[2], np.shape(ys[0])[1])
        self.options: dict[str, Any] = dict(loss_name=spec.loss, direction=self.direction,
                                            schedule=spec.optimizer.schedule, batch_size=spec.batch_size,
                                            chunk=self.chunk)
        self.lr = jnp.stack([jnp.asarray(eta * scale) for eta, scale in zip(etas, lr_scales)])
        self.keys = jnp.stack(list(keys))
        self.program = jit_with_options(_advance_pack, compile_options)

    def init(self, steps: np.ndarray) -> PackState:
        self.total = jnp.asarray(int(steps[-1]))
        self.data = [TrainingData(x, y, self.dtype, key, self.options["batch_size"], int(steps[-1]))
                     for x, y, key in zip(self.xs, self.ys, self.keys)]
        self.train_x, self.train_y = jnp.stack([d.x for d in self.data]), jnp.stack([d.y for d in self.data])
        self.checkpoints = {int(s) for s in steps}
        return PackState(self.diffs0, self.opt_states0, PackCheckpoint(self.diffs0, self.static, self.evals, self.chunk, {}),
                         np.zeros(len(QUANTITIES), bool))

    def advance(self, state: PackState, done: int, target: int) -> tuple[PackState, np.ndarray]:
        # those read at checkpoint 0 (every run reads f_train for its loss), or, for a pack joined from
        # its members' states (:meth:`joined`), at the checkpoint it was joined at
        names = frozenset({q for q, on in zip(QUANTITIES, state.names) if on} or state.checkpoint.used)
        measured = names if target in self.checkpoints else frozenset()  # a piece between checkpoints
        diffs, opt_states, finite, computed = state.diffs, state.opt_states, np.ones(self.members, bool), {}
        for pieces in zip(*(d.pieces(done, target) for d in self.data)):  # the members' windows: the same steps
            start, end = pieces[0][:2]
            sets = [piece[2] for piece in pieces]
            data = TrainingSet(self.train_x, self.train_y, jnp.stack([t.orders for t in sets]),
                               jnp.stack([t.first_epoch for t in sets]), jnp.stack([t.n for t in sets]))
            diffs, opt_states, ok, computed = self.program(
                diffs, self.static, opt_states, jnp.asarray(start), jnp.asarray(end - start), self.lr,
                self.multipliers, self.total, data, self.evals, names=measured if end == target else frozenset(),
                **self.options)
            finite &= np.asarray(ok)
        checkpoint = PackCheckpoint(diffs, self.static, self.evals, self.chunk, computed)
        return PackState(diffs, opt_states, checkpoint, np.array([q in names for q in QUANTITIES])), np.asarray(finite)

    def checkpoint(self, state: PackState, member: int) -> PackCheckpoint:
        return state.checkpoint

    def can_diverge(self, state: PackState, member: int) -> bool:
        return True

    def final(self, state: PackState, member: int) -> tuple[eqx.Module, dict[str, float]]:
        return eqx.combine(unstack(state.diffs, member), self.static), {}

    def member(self, state: PackState, member: int) -> NetworkState:
        """Member ``member``'s state as :class:`ntkpipe.train.loop.NetworkStepper` holds it."""
        return NetworkState(unstack(state.diffs, member), unstack(state.opt_states, member), self.static)

    def joined(self, states: Sequence[NetworkState]) -> PackState:
        """The pack's state from its members' (as a network stepper holds them): the checkpoint at their
        step is measured from them, and the quantities the advancing call computes are those that
        measurement reads (:meth:`advance`)."""
        diffs, opt_states = stack([s.diff for s in states]), stack([s.opt_state for s in states])
        return PackState(diffs, opt_states, PackCheckpoint(diffs, self.static, self.evals, self.chunk, {}),
                         np.zeros(len(QUANTITIES), bool))


def packed_stepper(runs: Sequence[Run]) -> PackedStepper:
    """The stepper of the runs of one pack (kind ``network`` or ``linearized``, equal :func:`structure_key`),
    compiled as each of its runs alone would be (equal shapes, steps and optimizer: equal options)."""
    return PackedStepper([run.model0 for run in runs], [run.data.x_train for run in runs],
                         [run.data.y_train for run in runs], [run.data.x_test for run in runs], runs[0].spec.train,
                         keys=[run_keys(run.spec.seed)[1] for run in runs],
                         etas=[run.spec.train.optimizer.lr for run in runs],
                         lr_scales=[learning_rate_scale(run.spec.model) for run in runs],
                         compile_options=training_compile_options(runs[0]))


def train_packed(models: Sequence[eqx.Module], xs: Sequence[np.ndarray], ys: Sequence[np.ndarray],
                 x_tests: Sequence[np.ndarray], spec: TrainSpec, *, keys: Sequence, etas: Sequence[float],
                 lr_scales: Sequence[float], measures: Sequence[Callable[[PackCheckpoint, int, int, bool], dict]],
                 label: str = "pack") -> list[Trajectory]:
    """Train the members of a :class:`PackedStepper` through :func:`ntkpipe.train.driver.drive`, calling
    ``measures[i](checkpoint, i, index, last)`` at every checkpoint, with ``checkpoint`` a
    :class:`PackCheckpoint`. Returns one :class:`Trajectory` per member; its ``seconds['train']`` (the
    compiled calls) and ``seconds['measure']`` (the rest of the measurements) are the pack's divided by k."""
    stepper = PackedStepper(models, xs, ys, x_tests, spec, keys=keys, etas=etas, lr_scales=lr_scales)
    member_measures = [lambda checkpoint, index, last, i=i: measures[i](checkpoint, i, index, last)
                       for i in range(len(models))]
    return drive(stepper, spec, member_measures, n_train=stepper.x.shape[1], etas=etas, label=label)
