"""XLA compile options by kind of program (issue 23: compile time is a quarter of the main job).

ntkpipe's compiled programs are of two kinds:

* **loops that run a whole run**: the optimizer steps between checkpoints (:mod:`ntkpipe.train.loop`,
  :mod:`ntkpipe.train.packed`) and the ODE integrations of the theories. They keep XLA's defaults:
  on XLA:CPU its fusion emitters make their steps up to 1.6× faster than its loop emitters
  (tanh float32; ReLU float32 minibatch steps 1.25×), and training keeps its numbers bit for bit.
* **measurements** (:data:`MEASUREMENT`): the outputs, Jacobians, Grams and alignments of one model,
  called once per checkpoint. XLA:CPU's loop emitters compile them in about 0.6× the time, and they
  run as fast where a GEMM dominates (the Gram: ``benchmarks/gram_vs_gemm.py``). Their numbers agree
  with the fusion emitters' to float rounding.

The option names a field of XLA:CPU's ``DebugOptions``; other backends refuse it (XLA:GPU fails the
compile: "No such compile option"), so programs compiled for them take none (:func:`measurement_options`).
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

MEASUREMENT = {"xla_cpu_use_fusion_emitters": False}
"""``compiler_options`` of a measurement program on XLA:CPU."""


def measurement_options() -> dict[str, bool]:
    """:data:`MEASUREMENT` where JAX's default backend, which compiles the program, is XLA:CPU; none elsewhere."""
    return MEASUREMENT if jax.default_backend() == "cpu" else {}


def measurement_jit(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` as :func:`~ntkpipe.filter_jit.filter_jit` compiles it (array leaves traced, every other
    leaf static), with the :data:`MEASUREMENT` options where it is a program of its own on XLA:CPU.
    Called inside ``jax.jit`` or ``jax.vmap`` (on tracers, or on arrays the enclosing function closes
    over) it is part of the enclosing program, whose options hold: JAX takes compile options only at
    the top level."""
    own = filter_jit(fn, compiler_options=MEASUREMENT)
    nested = filter_jit(fn)

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        if not measurement_options() or any(
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
