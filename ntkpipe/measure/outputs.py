"""Measurements of the network's outputs: losses, accuracies, mode strengths, and the times the loss
reaches a level. Each record's ``compute`` reads the outputs and targets and calls the array math."""

from __future__ import annotations

import numpy as np

from ntkpipe.measure import requirements as req
from ntkpipe.measure.accuracy import accuracy
from ntkpipe.measure.crossing import first_crossing, half_loss_time
from ntkpipe.measure.options import Option
from ntkpipe.measure.record import TIME_UNITS, Measurement, Variable, series
from ntkpipe.theory.final_kernel import mode_strengths, target_modes
from ntkpipe.train.losses import LOSSES


def mean_loss(f: np.ndarray, y: np.ndarray, name: str) -> float:
    """The mean over points of the loss ``name`` (:data:`ntkpipe.train.losses.LOSSES`)."""
    return float(np.mean(LOSSES[name](f, y)))


def train_loss(view, item) -> dict:
    return {"loss": mean_loss(view.f_train, view.run.data.y_train, view.run.spec.train.loss)}


def mode_half_times(times: np.ndarray, strengths: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(K,): per mode the first t at which m_k(t) reaches s_k/2, interpolated between checkpoints
    (``first_crossing``), NaN for a mode that starts at or above it or never reaches it; ``strengths``
    is (T, K). The time a mode is learned (silent-alignment App. H, Fig. H.1)."""
    strengths = np.asarray(strengths, dtype=np.float64)
    return np.array([first_crossing(times, m, 0.5 * s, downward=False) if m[0] < 0.5 * s else np.nan
                     for m, s in zip(strengths.T, np.asarray(targets, dtype=np.float64))])


MEASUREMENTS = [
    Measurement("loss", "checkpoint", "training loss on the full training set (un-batched): mse L = (1/2P) Σ_μ "
                "|f(x_μ) − y_μ|² (silent-alignment Sec. 3), bce the mean of log(1 + e^{−y f}) on one logit",
                (series("loss", "training loss"),), train_loss, kernel_models=True),
    Measurement("test_loss", "checkpoint", "loss on the test set, the training loss's formula on the test points",
                (series("test_loss", "test loss"),),
                lambda view, item: {"test_loss": mean_loss(view.f_test, view.run.data.y_test, view.run.spec.train.loss)},
                req.needs_test, kernel_models=True),
    Measurement("train_accuracy", "checkpoint", "fraction of training points classified correctly: sign f = y "
                "for one output with ±1 labels (f ≥ 0 → +1), argmax for one-hot targets",
                (series("train_accuracy", "train accuracy"),),
                lambda view, item: {"train_accuracy": accuracy(view.f_train, view.run.data.y_train)},
                req.needs_classes, kernel_models=True, where_applicable=True),
    Measurement("test_accuracy", "checkpoint", "fraction of test points classified correctly: sign f = y for one "
                "output with ±1 labels (f ≥ 0 → +1), argmax for one-hot targets",
                (series("test_accuracy", "test accuracy"),),
                lambda view, item: {"test_accuracy": accuracy(view.f_test, view.run.data.y_test)},
                lambda r: req.needs_test(r) or req.needs_classes(r), kernel_models=True, where_applicable=True),
    Measurement("mode_strength", "checkpoint", "m_k = u_kᵀ Σ_fx v_k, the learned input-output map Σ_fx = Fᵀx/P "
                "along the k-th singular mode (u_k, s_k, v_k) of the target map (silent-alignment Fig. H.1)",
                (series("mode_strength", "mode strength m_k", "mode"),),
                lambda view, item: {"mode_strength": mode_strengths(view.f_train, view.run.data.flat_train,
                                                                    view.run.data.y_train)[0]},
                kernel_models=True),
    Measurement("mode_half_time", "final", "t_k: first time the mode strength m_k reaches half its target s_k, "
                "interpolated between checkpoints: when mode k is learned (silent-alignment App. H, Fig. H.1)",
                (Variable("mode_half_time", "mode learning time t_k (m_k = s_k/2)", ("mode",), units=TIME_UNITS,
                          description="first t with m_k(t) = s_k/2, s_k the k-th singular value of Σ_yx = Yᵀx/P; NaN "
                                      "for a mode that starts at or above s_k/2 or never reaches it"),),
                lambda run, traj, item: {"mode_half_time": mode_half_times(
                    traj.time, traj.series["mode_strength"],
                    target_modes(run.data.flat_train, run.data.y_train)[1])},
                depends_on=("mode_strength",), kernel_models=True),
    Measurement("t_half", "final", "t½: first time the training loss reaches half its initial value, "
                "interpolated between checkpoints (silent-alignment Fig. 3a)",
                (Variable("t_half", "t½", units=TIME_UNITS),),
                lambda run, traj, item: {"t_half": half_loss_time(traj.time, traj.series["loss"])},
                depends_on=("loss",), kernel_models=True),
    Measurement("steps_to_threshold", "final", "first optimizer step at which the training loss reaches the "
                "threshold, interpolated between checkpoints (linearized-networks Figs. 3, 13)",
                (Variable("steps_to_threshold", "steps to training loss threshold", units="optimizer steps"),),
                lambda run, traj, item: {"steps_to_threshold": first_crossing(
                    traj.steps, traj.series["loss"], item.options["threshold"], downward=True)},
                depends_on=("loss",), options=(Option("threshold", float, 0.01, "training-loss level", 0.0,
                                                      open_low=True),), kernel_models=True),
]
