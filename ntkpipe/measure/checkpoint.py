"""Measurements taken at every checkpoint; each maps a :class:`ModelView` to named values."""

from __future__ import annotations

import numpy as np

from ntkpipe.measure.accuracy import accuracy
from ntkpipe.measure.context import ModelView
from ntkpipe.measure.rotation import energy_concentration
from ntkpipe.measure.specialization import target_projections, trace_per_point, traced_alignment
from ntkpipe.measure.weights import first_layer_alignment, moving_network
from ntkpipe.ntk import component_grams
from ntkpipe.ntk.kernel_stats import kernel_alignment, kernel_norm
from ntkpipe.theory import two_layer
from ntkpipe.theory.final_kernel import mode_strengths
from ntkpipe.train.losses import LOSSES


def _loss(f: np.ndarray, y: np.ndarray, name: str) -> float:
    return float(np.mean(LOSSES[name](f, y)))


def train_loss(view: ModelView, item) -> dict:
    """Training loss on the full training set (the optimized objective, un-batched)."""
    return {"loss": _loss(view.f_train, view.run.data.y_train, view.run.spec.train.loss)}


def test_loss(view: ModelView, item) -> dict:
    return {"test_loss": _loss(view.f_test, view.run.data.y_test, view.run.spec.train.loss)}


def train_accuracy(view: ModelView, item) -> dict:
    return {"train_accuracy": accuracy(view.f_train, view.run.data.y_train)}


def test_accuracy(view: ModelView, item) -> dict:
    return {"test_accuracy": accuracy(view.f_test, view.run.data.y_test)}


def gram_norm(view: ModelView, item) -> dict:
    return {"kernel_norm": kernel_norm(view.gram_train)}


def gram_alignment(view: ModelView, item) -> dict:
    return {"alignment": kernel_alignment(view.gram_train, view.run.data.y_train)}


def layer_one_alignment(view: ModelView, item) -> dict:
    return {"first_layer_alignment": first_layer_alignment(view.model, view.run.teacher[0])}


def readout_norm_sq(view: ModelView, item) -> dict:
    """u² = |a|², the squared readout norm (silent-alignment Eq. 8, C.4)."""
    readout = np.asarray(moving_network(view.model).weights[-1], np.float64)
    return {"readout_norm_sq": float(np.sum(readout**2))}


def teacher_overlaps(view: ModelView, item) -> dict:
    """q = ½(|a|² + βᵀWᵀWβ) and r = aᵀWβ of a two-layer net (silent-alignment App. C.1, Eq. 33)."""
    q, r = two_layer.teacher_overlaps(moving_network(view.model), view.run.teacher[0])
    return {"q": q, "r": r}


def mode_strength(view: ModelView, item) -> dict:
    """m_k = u_kᵀ Σ_fx v_k along the singular modes of the target map (silent-alignment Fig. H.1)."""
    strengths, _ = mode_strengths(view.f_train, view.run.data.flat_train, view.run.data.y_train)
    return {"mode_strength": strengths}


def energy(view: ModelView, item) -> dict:
    """‖Φ_Kᵀy‖/‖y‖ on the first ``subset`` training points (linearized-networks Table 1), at init, at
    the end and every ``every``-th checkpoint; NaN at the others."""
    options = item.options
    if not view.scheduled(options["every"]):
        return {"energy_concentration": float("nan")}
    y = view.run.data.y_train[: options["subset"]]
    gram = view.gram_subset(len(y))
    return {"energy_concentration": energy_concentration(gram, y, options["top_k"])}


def subset_size(n_train: int, subset: int) -> int:
    """Training points a ``subset`` option selects: the first ``subset``, all of them for 0."""
    return min(subset, n_train) if subset else n_train


def traced_kernel_alignment(view: ModelView, item) -> dict:
    """A(K_tr, YYᵀ) = ⟨K_tr, Σ_d y_d y_dᵀ⟩_F / (‖K_tr‖_F ‖YYᵀ‖_F), K_tr = C⁻¹ Σ_c K^{c,c}
    (kernel-alignment Sec. 4.3), on the first ``subset`` training points, at init, at the end and
    every ``every``-th checkpoint; NaN at the others."""
    options = item.options
    if not view.scheduled(options["every"]):
        return {"traced_alignment": float("nan")}
    y = view.run.data.y_train[: subset_size(len(view.run.data.y_train), options["subset"])]
    return {"traced_alignment": traced_alignment(view.kernel_subset(len(y)), y)}


def kernel_components(view: ModelView, item) -> dict:
    """Readout (K_V) and hidden (K_W) NTK components on the first ``subset`` training points
    (kernel-alignment Figs. 6–7): y_dᵀK_X^{c,c}y_d/|y_d|² per (output c, target d) and
    tr(K_X^{c,c})/P per output, X = V, W, at init, at the end and every ``every``-th checkpoint
    (NaN at the others); and the outputs f on the subset at every checkpoint (the theory
    integrates them)."""
    options = item.options
    n = subset_size(len(view.run.data.y_train), options["subset"])
    y = view.run.data.y_train[:n]
    out = {"subset_outputs": view.f_train[:n]}
    if not view.scheduled(options["every"]):
        c = y.shape[1]
        return out | {f"{key}_{what}": np.full(shape, np.nan) for key in ("kv", "kw")
                      for what, shape in (("projection", (c, c)), ("trace", (c,)))}
    grams = component_grams(view.model, view.run.data.x_train[:n])
    for key, part in (("kv", "readout"), ("kw", "hidden")):
        out[f"{key}_projection"] = target_projections(grams[part], y)
        out[f"{key}_trace"] = trace_per_point(grams[part])
    return out


def layer_alignment(view: ModelView, item) -> dict:
    """cos θ = u·w / (|u||w|) with w = W n, the hidden pre-activation of the unit input direction n,
    and the norms |u|, |w| (solvable-model Sec. 2.2–2.3: learning by alignment and by rescaling)."""
    net = moving_network(view.model)
    w = np.asarray(net.weights[0], np.float64) @ view.run.data.principal_direction
    u = np.asarray(net.weights[1], np.float64)[0]
    u_norm, w_norm = float(np.linalg.norm(u)), float(np.linalg.norm(w))
    return {"layer_alignment": float(u @ w) / (u_norm * w_norm), "readout_norm": u_norm, "hidden_norm": w_norm}
