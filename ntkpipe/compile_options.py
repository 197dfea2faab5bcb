"""XLA compile options by kind of program (issue 23: compile time is a quarter of the main job).

On XLA:CPU, the loop emitters (:data:`LOOP_EMITTERS`) compile a program in about 0.5–0.6× the time of
its default fusion emitters; the fusion emitters' loops run up to 1.6× faster where transcendental
functions dominate (tanh float32), and about as fast elsewhere. ntkpipe's compiled programs are of two
kinds:

* **measurements**: the outputs, Jacobians, Grams and alignments of one model, called once per
  checkpoint: always the loop emitters (:func:`measurement_jit`). They run as fast where a GEMM
  dominates (the Gram: ``benchmarks/gram_vs_gemm.py``), and their numbers agree with the fusion
  emitters' to float rounding.
* **loops that run a whole run**: the optimizer steps between checkpoints (:mod:`ntkpipe.train.loop`,
  a pack's in :mod:`ntkpipe.train.packed`) take the loop emitters where the run's training is short
  (:func:`training_options`: the compile time saved exceeds what slower steps could cost) and its
  optimizer keeps a rounding difference small, XLA's defaults otherwise; the ODE integrations of the
  theories keep XLA's defaults.

The minibatch orders (:func:`ntkpipe.train.batches.epoch_orders`, one program per training-set size and
window of epochs) take the loop emitters too: integers, the same under either emitter.

The option names a field of XLA:CPU's ``DebugOptions``; other backends refuse it (XLA:GPU fails the
compile: "No such compile option"), so programs compiled for them take none (:func:`loop_emitter_options`).
The persistent compilation cache keys programs by their options too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import jax
import jax.core

from ntkpipe.filter_jit import filter_jit

P = ParamSpec("P")
T = TypeVar("T")

LOOP_EMITTERS = {"xla_cpu_use_fusion_emitters": False}
"""``compiler_options`` of a program that runs briefly, on XLA:CPU: XLA:CPU's loop emitters."""

SHORT_TRAINING_FLOPS = {"mlp": 2e10, "other": 3e10}
"""Training FLOPs (:func:`ntkpipe.train.flops.training_flops`) below which a run's training program
compiles with the loop emitters, for MLPs and for other architectures. Measured on 2 CPU cores, one
process, fusion and loop emitters alternating (``benchmarks/training_emitters.py``; ``benchmarks/README.md``,
"Short runs' training with the loop emitters"): the loop emitters save 0.1–0.6 s of XLA time on an MLP's
step program and 0.9–2 s on LeNet-5's, and their steps take 0.93–1.17× the fusion emitters' time, 1.55×
for tanh; MLPs train at 6–8·10¹⁰ FLOP/s there and LeNet-5 at 1.6–2.4·10¹⁰, so below these counts
(≈ 0.3 s of an MLP's training, ≈ 2 s of LeNet-5's) even tanh's slower steps cost less than the compile
time saved."""


def loop_emitter_options() -> dict[str, bool]:
    """:data:`LOOP_EMITTERS` where JAX's default backend, which compiles the program, is XLA:CPU; none elsewhere."""
    return LOOP_EMITTERS if jax.default_backend() == "cpu" else {}


def training_options(architecture: str, optimizer: str, flops: float) -> dict[str, bool]:
    """Compile options of the training program of a run of ``architecture`` trained by ``optimizer``
    whose training takes ``flops``: :func:`loop_emitter_options` below :data:`SHORT_TRAINING_FLOPS`,
    XLA's defaults above, and for Adam. Adam's step m̂/(√v̂ + ε) divides by the gradient's running
    scale, so where the gradients vanish (near interpolation) it turns a rounding difference into a
    difference of the step itself: the loop emitters moved the final layer alignment of
    ``learning_rate_ratio``'s full-batch Adam runs by up to 0.02 (0.980 → 0.958), where every SGD and
    GD run of the shipped studies trained to the same parameters bit for bit."""
    limit = SHORT_TRAINING_FLOPS["mlp" if architecture == "mlp" else "other"]
    return loop_emitter_options() if flops < limit and optimizer != "adam" else {}


def jit_with_options(fn: Callable, options: dict | None) -> Callable:
    """``fn`` as :func:`~ntkpipe.filter_jit.filter_jit` compiles it with the XLA ``compiler_options``
    ``options`` (none: XLA's defaults): one compiled function per (``fn``, options), shared by callers."""
    return _jit_with(fn, frozenset((options or {}).items()))


@functools.cache
def _jit_with(fn: Callable, options: frozenset) -> Callable:
    return filter_jit(fn, compiler_options=dict(options) or None)


def measurement_jit(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` as :func:`~ntkpipe.filter_jit.filter_jit` compiles it (array leaves traced, every other
    leaf static), with the :data:`LOOP_EMITTERS` options where it is a program of its own on XLA:CPU.
    Called inside ``jax.jit`` or ``jax.vmap`` (on tracers, or on arrays the enclosing function closes
    over) it is part of the enclosing program, whose options hold: JAX takes compile options only at
    the top level."""
    own = filter_jit(fn, compiler_options=LOOP_EMITTERS)
    nested = filter_jit(fn)

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        if not loop_emitter_options() or any(
            isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs))
        ):
            return nested(*args, **kwargs)
        try:
            return own(*args, **kwargs)
        except ValueError as error:  # inside an enclosing jit on closed-over arrays only: options refused
            if "compiler_options" not in str(error):
                raise
            return nested(*args, **kwargs)

    return call
