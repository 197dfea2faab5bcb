"""A measurement as one record: when it is taken, what it needs, what it stores, how.

A :class:`Measurement` holds its formula text once (``doc``, and per variable ``description``):
the dataset attributes (:func:`ntkpipe.measure.registry.variable_attrs`), ``ntkpipe measurements``
and the docs read it there. Its ``compute`` is a thin adapter: it reads the run's context (a
:class:`~ntkpipe.measure.context.ModelView` at a checkpoint; the
:class:`~ntkpipe.measure.context.RunContext`, the trajectory and the item once per run) and calls
array-level math (:mod:`ntkpipe.ntk`, :mod:`ntkpipe.theory`, the array modules of this package),
which takes arrays and numbers, never spec objects. The subject modules (:mod:`.outputs`,
:mod:`.kernels`, :mod:`.weights`, :mod:`.theory_silent_alignment`, …) each list their records in
``MEASUREMENTS``; :mod:`ntkpipe.measure.registry` collects them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import RunSpec
from ntkpipe.measure.options import Option
from ntkpipe.models import ARCHITECTURES

TIME_UNITS = "gradient-flow time t = η₀·step"
"""The unit of ``time`` and of times read off it (t½, …): η₀ is train.optimizer.lr."""

MLP_ONLY = tuple(name for name, record in ARCHITECTURES.items() if record.mlp_weights)
WITH_READOUT = tuple(name for name, record in ARCHITECTURES.items() if record.readout)


@dataclass(frozen=True)
class Variable:
    """A stored variable; ``dims`` are its own dimensions besides the sweep axes ("time" for series).

    ``label`` is its CF ``long_name`` (and the figures' label), ``units`` its unit where one exists,
    ``description`` the formula and the paper equation it implements (empty: its measurement's doc).
    A theory variable names the measured variable it predicts in ``theory_of``; ``theory_at`` selects
    the entry of the measured variable's own dimensions it is compared with (e.g. output 1).
    """

    name: str
    label: str
    dims: tuple[str, ...] = ()
    units: str | None = None
    description: str = ""
    theory_of: str | None = None
    theory_at: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Measurement:
    """One measurement: when it is taken, what it stores, what it needs, how it is computed.

    ``compute`` maps ``(view, item)`` (``when`` checkpoint) or ``(run, trajectory, item)`` (final)
    to ``{variable name: value}``, one entry per variable. ``requires(run)`` says why a run cannot
    have it (None if it can); ``architectures`` lists the model architectures it reads (None: any);
    ``kernel_models`` says it reads only outputs and the NTK Gram, so kernel kinds (kgd, akgd, ofe,
    ofe_fit) have it too; ``options`` are its declared options, whose defaults validation fills into
    every run's config; ``depends_on`` names measurements whose series it reads; ``assumptions``
    says under which conditions its theory variables hold (and are not NaN);
    ``check_options(options, given, run)`` says which option does not fit the run's data and why, as
    (option name, message), or None (``options``: every option's value, ``given``: the names the
    spec wrote); ``gram_points(options, run)`` is the number of examples in the largest NTK Gram it
    holds (0: none), which the job's memory estimate reads (:mod:`ntkpipe.resources`).
    """

    name: str
    when: Literal["checkpoint", "final"]
    doc: str
    variables: tuple[Variable, ...]
    compute: Callable
    requires: Callable[[RunSpec], str | None] = lambda run: None
    depends_on: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    architectures: tuple[str, ...] | None = None
    kernel_models: bool = False
    where_applicable: bool = False
    """Computed for the runs that meet its requirements, NaN for the others (theory overlays, and
    measurements of one task in a study of several); otherwise every run must meet them."""
    assumptions: str | None = None
    check_options: Callable[[dict, frozenset, RunSpec], tuple[str, str] | None] = lambda options, given, run: None
    gram_points: Callable[[dict, RunSpec], int] = lambda options, run: 0

    def unmet(self, run: RunSpec) -> str | None:
        """Why ``run`` cannot have this measurement: its model kind and architecture, then its own requirements."""
        if MODEL_KINDS[run.model.kind].kernel and not self.kernel_models:
            return (f"reads the network's weights or Jacobian; model.kind {run.model.kind!r} evolves a kernel "
                    "(applies to kinds network, linearized)")
        arch = run.model.architecture
        if self.architectures is not None and arch not in self.architectures:
            return (f"reads {' / '.join(self.architectures)} weights; model.architecture is {arch!r} "
                    f"(applies to: {', '.join(self.architectures)})")
        return self.requires(run)


def series(name: str, label: str, *dims: str, **attrs) -> Variable:
    """A variable recorded at every checkpoint: dims ``time`` then ``dims``."""
    return Variable(name, label, ("time", *dims), **attrs)


EVERY = Option("every", int, 0, "also at every k-th checkpoint (0: init and end only)", 0)


def subset_option(default: int) -> Option:
    return Option("subset", int, default, "training points in the kernel (the first n; 0: all)", 0)


def subset_size(n_train: int, subset: int) -> int:
    """Training points a ``subset`` option selects: the first ``subset``, all of them for 0."""
    return min(subset, n_train) if subset else n_train


def train_gram(options: dict, run: RunSpec) -> int:
    return run.data.n_train


def train_and_test_gram(options: dict, run: RunSpec) -> int:
    return run.data.n_train + run.data.n_test


def subset_gram(options: dict, run: RunSpec) -> int:
    return subset_size(run.data.n_train, options["subset"])


def subset_fits(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """A ``subset`` the spec gives is at most n_train (a default larger than n_train means all of them)."""
    subset, n = options["subset"], run.data.n_train
    if "subset" in given and subset > n:
        return "subset", (f"subset {subset} exceeds data.n_train {n}: the kernel is taken on the first subset "
                          f"training points; use subset <= {n}")
    return None
