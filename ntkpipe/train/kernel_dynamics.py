"""Kernel models: the outputs of the kernel kinds at a run's checkpoints (kernel-alignment Figs. 1–2).

With L = (1/2P) Σ_μ |f_μ − y_μ|², a network's outputs move as ḟ = −(η/P) K (f − y); the kernel kinds
replace the network by a prescribed kernel K(t):

    kgd      K₀ frozen: f_{k+1} = f_k − (η/P) K₀ (f_k − y), exact through K₀'s eigendecomposition (Eq. 4)
    akgd     the same with K₀ · ‖K_T‖_F / ‖K₀‖_F, K_T the final NTK of the run's trained network
             (either diverges, like a network, when (η/P)·λ_max > 2)
    ofe      Δ̇ = −(1/P) K Δ, K̇ = (γ/P)(ΔΔᵀK + KΔΔᵀ) in gradient-flow time t = η₀·step, Δ₀ = −y (Eq. 6)
    ofe_fit  the OFE with γ̂, fitted so that A(K₀ + γ̂yyᵀ, y) is the trained network's final alignment

Their checkpoints are the run's (same steps, same time axis t = η₀·step), so they overlay the network.
A kernel run is diverged like a network's (:mod:`ntkpipe.train.loop`): a non-finite loss or one above
``train.divergence_factor`` times the initial (which stop it), a final loss above ``EXPLOSION_FACTOR``
times the initial, or (KGD) a step beyond the stability edge.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ntkpipe.lang.schema import TrainSpec
from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.progress import Progress
from ntkpipe.theory.feature_evolution import fit_feature_rate, ofe_solve
from ntkpipe.theory.kernel_gd import kernel_gd
from ntkpipe.train.loop import Trajectory, blew_up, checkpoint_steps, exploded, stack_records, total_steps


@dataclass(frozen=True)
class KernelStart:
    """What a kernel model starts from: the initial NTK Gram over train ∪ test (((P+M)·C)², train first,
    float64), the network's initial outputs f₀ (P+M, C) and the training targets y (P, C)."""

    gram: np.ndarray
    f0: np.ndarray
    y: np.ndarray


Measure = Callable[[int, bool, np.ndarray, np.ndarray | None, np.ndarray], dict]
"""(checkpoint index, last, f_train (P, C), f_test (M, C) or None, train Gram) → measured values."""


def evolve_kernel(kind: str, start: KernelStart, spec: TrainSpec, *, gamma: float, lr_scale: float,
                  reference: dict[str, float], measure: Measure, label: str) -> Trajectory:
    """Run kernel kind ``kind`` over the checkpoints of ``spec``, calling ``measure`` at each.

    ``gamma`` is the OFE's γ (``ofe``); ``lr_scale`` multiplies η₀ for ``kgd``/``akgd`` (γ² of a
    rescaled network); ``reference`` holds the trained network's final ``kernel_norm`` (``akgd``)
    or ``alignment`` (``ofe_fit``).
    """
    tic = time.perf_counter()
    p, c = start.y.shape
    steps = checkpoint_steps(spec.checkpoints, total_steps(spec, p))
    times = steps * spec.optimizer.lr
    finals: dict[str, float] = {}
    if kind in ("kgd", "akgd"):
        states, unstable = _kgd_states(kind, start, spec.optimizer.lr * lr_scale / p, reference, steps)
        unfitted = False
    else:
        states, finals = _ofe_states(kind, start, gamma, reference, times)
        unstable, unfitted = False, not np.isfinite(finals["ofe_gamma"])
    records, diverged = [], False
    progress = Progress(label, len(steps))
    for index, (f_train, f_test, gram) in enumerate(states):
        with np.errstate(over="ignore", invalid="ignore"):  # an exploding model's measurements overflow
            record = measure(index, index == len(steps) - 1, f_train.reshape(p, c),
                             None if f_test is None else f_test.reshape(-1, c), gram)
        records.append(record)
        if not unfitted and blew_up(records[0]["loss"], record["loss"], spec.divergence_factor):
            diverged = True
            break
        progress.update(index, loss=record["loss"])
    diverged = diverged or unstable or (not unfitted and exploded(records[0]["loss"], records[-1]["loss"]))
    progress.close(diverged=diverged)
    return Trajectory(steps=steps, time=times, epoch=steps.astype(float), series=stack_records(records, len(steps)),
                      diverged=diverged, model=None, seconds={"train": time.perf_counter() - tic, "measure": 0.0},
                      finals=finals)


def _kgd_states(kind: str, start: KernelStart, rate: float, reference: dict[str, float], steps: np.ndarray):
    """(f_train, f_test, K) at each checkpoint of KGD/aKGD with rate η/P, and whether it is unstable:
    |1 − rλ_max| > 1 grows without bound, like a diverged network (then only step 0 is given)."""
    n = start.y.size
    k_train = start.gram[:n, :n]
    scale = reference["kernel_norm"] / np.linalg.norm(k_train) if kind == "akgd" else 1.0
    unstable = rate * scale * np.linalg.eigvalsh(k_train)[-1] > 2.0
    y = start.y.reshape(-1)
    delta, f_test = kernel_gd(scale * k_train, scale * start.gram[n:, :n], start.f0[: len(start.y)].reshape(-1) - y,
                              start.f0[len(start.y):].reshape(-1), rate, steps[:1] if unstable else steps)
    return [(delta[i] + y, f_test[i], scale * k_train) for i in range(len(delta))], unstable


def _ofe_states(kind: str, start: KernelStart, gamma: float, reference: dict[str, float], times: np.ndarray):
    """(f_train, None, K) at each checkpoint time of the OFE from Δ₀ = −y with rate 1/P per unit t, and
    its γ (γ̂ for ``ofe_fit``; NaN when the network's final alignment is below A(K₀), so no γ̂ ≥ 0 fits),
    conservation error and A(K∞, y)."""
    n = start.y.size
    k_train, y = start.gram[:n, :n], start.y.reshape(-1)
    if kind == "ofe_fit":
        gamma = fit_feature_rate(k_train, -y, y, reference["alignment"])
    if not np.isfinite(gamma):
        nan = float("nan")
        states = [(np.full(n, nan), None, np.full_like(k_train, nan)) for _ in times]
        return states, {"ofe_gamma": nan, "ofe_conservation_error": nan, "ofe_final_alignment": nan}
    solution = ofe_solve(k_train, -y, gamma, 1.0 / len(start.y), times)
    states = [(solution.delta[i] + y, None, solution.kernel[i]) for i in range(len(times))]
    return states, {"ofe_gamma": gamma, "ofe_conservation_error": solution.conservation_error,
                    "ofe_final_alignment": kernel_alignment(solution.conserved, y)}
