"""Kernel models: steppers whose outputs at the checkpoints are closed forms of the initial kernel
(kernel-alignment Figs. 1–2; the kinds' math is in :mod:`ntkpipe.lang.model_kinds`).

    kgd      K₀ frozen: f_{k+1} = f_k − (η/P) K₀ (f_k − y), exact through K₀'s eigendecomposition (Eq. 4)
    akgd     the same with K₀ · ‖K_T‖_F / ‖K₀‖_F, K_T the final NTK of the run's trained network
             (either is unbounded, like a diverged network, when (η/P)·λ_max > 2)
    ofe      Δ̇ = −(1/P) K Δ, K̇ = (γ/P)(ΔΔᵀK + KΔΔᵀ) in gradient-flow time t = η₀·step, Δ₀ = −y (Eq. 6)
    ofe_fit  the OFE with γ̂, fitted so that A(K₀ + γ̂yyᵀ, y) is the trained network's final alignment

Their checkpoints are the run's (same steps, same time axis t = η₀·step), so they overlay the network,
and the driver (:func:`ntkpipe.train.driver.drive`) judges their divergence as a network's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.compile_options import measurement_jit
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.models import learning_rate_scale
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.ntk.precision import cast_floats
from ntkpipe.theory.feature_evolution import fit_feature_rate, ofe_solve
from ntkpipe.theory.kernel_gd import kernel_gd
from ntkpipe.train.driver import Run


@dataclass(frozen=True)
class KernelStart:
    """What a kernel model starts from: the initial NTK Gram over train ∪ test (((P+M)·C)², train first,
    float64), the network's initial outputs f₀ (P+M, C) and the training targets y (P, C)."""

    gram: np.ndarray
    f0: np.ndarray
    y: np.ndarray


class KernelOutputs(NamedTuple):
    """A kernel model at a checkpoint: outputs on the training points (P, C), on the test points
    (M, C; None where it evolves the training outputs only) and its training Gram (P·C, P·C)."""

    f_train: np.ndarray
    f_test: np.ndarray | None
    gram_train: np.ndarray


@measurement_jit
def _outputs(model, x):
    return jax.vmap(model)(x)


def kernel_start(run: Run) -> KernelStart:
    """K₀ and f₀ of the run's network over train ∪ test (the OFE kinds' network is unscaled), f₀ in the
    training dtype as its checkpoint-0 measurements read it."""
    gram = np.asarray(flatten_gram(empirical_ntk(run.model0, run.data.x_all)), np.float64)
    dtype = jnp.dtype(run.spec.train.dtype)
    model = cast_floats(run.model0, dtype)
    f0 = [np.asarray(_outputs(model, jnp.asarray(x, dtype)), np.float64) for x in (run.data.x_train, run.data.x_test)]
    return KernelStart(gram, np.concatenate(f0), run.data.y_train)


class ClosedFormStepper:
    """A model whose state at every checkpoint is computed at once by ``states(steps)``: a list of
    (f_train (P·C,), f_test (M·C,) or None, training Gram) per checkpoint, whether it stays bounded
    (else only step 0 is given, and the first step diverges), whether it is defined (else its states
    are NaN and it cannot diverge: an ``ofe_fit`` that no γ̂ fits) and the numbers its dynamics yields."""

    members = 1
    continues = False  # its states are computed at once for all checkpoints: a longer run recomputes them
    splits = False  # its state counts checkpoints

    def __init__(self, states, y: np.ndarray):
        self.states, self.shape = states, y.shape

    def init(self, steps: np.ndarray) -> int:
        self.checkpoints, self.bounded, self.defined, self.finals = self.states(steps)
        return 0

    def advance(self, state: int, done: int, target: int) -> tuple[int, np.ndarray]:
        return state + 1, np.array([self.bounded])

    def checkpoint(self, state: int, member: int) -> KernelOutputs:
        f_train, f_test, gram = self.checkpoints[state]
        c = self.shape[1]
        return KernelOutputs(f_train.reshape(self.shape), None if f_test is None else f_test.reshape(-1, c), gram)

    def can_diverge(self, state: int, member: int) -> bool:
        return self.defined

    def final(self, state: int, member: int) -> tuple[None, dict[str, float]]:
        return None, self.finals

    def member(self, state: int, member: int) -> int:
        return state

    def joined(self, states: Sequence[int]) -> int:
        return states[0]


def kgd_states(start: KernelStart, rate: float, scale: float):
    """``states(steps)`` of KGD with K = ``scale``·K₀ and rate η/P: (f_train, f_test, K) at each
    checkpoint; |1 − rλ_max| > 1 grows without bound, like a diverged network."""
    n = start.y.size
    k_train, y = start.gram[:n, :n], start.y.reshape(-1)

    def states(steps: np.ndarray):
        bounded = not rate * scale * np.linalg.eigvalsh(k_train)[-1] > 2.0
        delta, f_test = kernel_gd(scale * k_train, scale * start.gram[n:, :n], start.f0[: len(start.y)].reshape(-1) - y,
                                  start.f0[len(start.y):].reshape(-1), rate, steps if bounded else steps[:1])
        return [(delta[i] + y, f_test[i], scale * k_train) for i in range(len(delta))], bounded, True, {}

    return states


def ofe_states(start: KernelStart, gamma: float, lr: float):
    """``states(steps)`` of the OFE from Δ₀ = −y with rate 1/P per unit t = ``lr``·step: (f_train, None, K)
    at each checkpoint, and its γ, conservation error and A(K∞, y); all NaN for a NaN γ (no γ̂ fits)."""
    n = start.y.size
    k_train, y = start.gram[:n, :n], start.y.reshape(-1)

    def states(steps: np.ndarray):
        if not np.isfinite(gamma):
            nan = float("nan")
            return ([(np.full(n, nan), None, np.full_like(k_train, nan)) for _ in steps], True, False,
                    dict.fromkeys(MODEL_KINDS["ofe"].finals, nan))
        solution = ofe_solve(k_train, -y, gamma, 1.0 / len(start.y), steps * lr)
        return ([(solution.delta[i] + y, None, solution.kernel[i]) for i in range(len(steps))], True, True,
                {"ofe_gamma": gamma, "ofe_conservation_error": solution.conservation_error,
                 "ofe_final_alignment": kernel_alignment(solution.conserved, y)})

    return states


def unfollowed_states(start: KernelStart, test: bool, finals: dict[str, float]):
    """``states(steps)`` of a kernel run whose trained network diverged, so that what it follows (the final
    norm or alignment, NaN) does not exist: its initial outputs and K₀ at step 0, then divergence at the
    first step, like the network's; ``test``: it predicts the test points."""
    n = start.y.size
    f_train, f_test = start.f0[: len(start.y)].reshape(-1), start.f0[len(start.y):].reshape(-1)

    def states(steps: np.ndarray):
        return [(f_train, f_test if test else None, start.gram[:n, :n])], False, True, finals

    return states


def _kgd_rate(run: Run) -> float:
    """η/P of KGD: η₀ times γ² of a rescaled network, over the P training points."""
    return run.spec.train.optimizer.lr * learning_rate_scale(run.spec.model) / len(run.data.y_train)


def kgd_stepper(run: Run, reference: dict[str, float]) -> ClosedFormStepper:
    """``kgd``: the network's K₀ frozen."""
    start = kernel_start(run)
    return ClosedFormStepper(kgd_states(start, _kgd_rate(run), 1.0), start.y)


def akgd_stepper(run: Run, reference: dict[str, float]) -> ClosedFormStepper:
    """``akgd``: K₀ rescaled to the norm of the trained network's final NTK (``reference['kernel_norm']``)."""
    start = kernel_start(run)
    if not np.isfinite(reference["kernel_norm"]):  # the network diverged
        return ClosedFormStepper(unfollowed_states(start, True, {}), start.y)
    n = start.y.size
    scale = float(reference["kernel_norm"] / np.linalg.norm(start.gram[:n, :n]))
    return ClosedFormStepper(kgd_states(start, _kgd_rate(run), scale), start.y)


def ofe_stepper(run: Run, reference: dict[str, float]) -> ClosedFormStepper:
    """``ofe``: the OFE with γ = ``model.gamma``."""
    start = kernel_start(run)
    return ClosedFormStepper(ofe_states(start, run.spec.model.gamma, run.spec.train.optimizer.lr), start.y)


def ofe_fit_stepper(run: Run, reference: dict[str, float]) -> ClosedFormStepper:
    """``ofe_fit``: the OFE with γ̂ fitted to the trained network's final alignment (``reference['alignment']``;
    NaN when it is below A(K₀), so no γ̂ ≥ 0 fits; diverged when the network did)."""
    start = kernel_start(run)
    if not np.isfinite(reference["alignment"]):  # the network diverged
        nan = float("nan")
        return ClosedFormStepper(unfollowed_states(start, False, dict.fromkeys(MODEL_KINDS["ofe"].finals, nan)), start.y)
    n = start.y.size
    y = start.y.reshape(-1)
    gamma = fit_feature_rate(start.gram[:n, :n], -y, y, reference["alignment"])
    return ClosedFormStepper(ofe_states(start, gamma, run.spec.train.optimizer.lr), start.y)

