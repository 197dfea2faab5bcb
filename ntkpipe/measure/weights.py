"""Measurements of the weights: alignments of the layers with each other and with the teacher, norms,
and the distance travelled. Each record's ``compute`` reads the weights and calls the array math."""

from __future__ import annotations

import jax
import numpy as np

from ntkpipe.measure import requirements as req
from ntkpipe.measure.context import moving_network
from ntkpipe.measure.crossing import first_crossing, half_loss_time
from ntkpipe.measure.layers import first_layer_alignment, gram_alignment, layer_alignment, layer_norm_sum
from ntkpipe.measure.options import Option
from ntkpipe.measure.record import MLP_ONLY, TIME_UNITS, Measurement, Variable, series
from ntkpipe.measure.rotation import parameter_distances
from ntkpipe.models import layer_components, trainable
from ntkpipe.models.flat import flat_vector
from ntkpipe.theory import final_kernel, two_layer

_THRESHOLD = Option("threshold", float, 0.5, "level of cos(W₁ᵀW₁, ββᵀ)", -1.0, 1.0)


def _weight(model, layer: int) -> np.ndarray:
    return np.asarray(moving_network(model).weights[layer], np.float64)


def _teacher_overlaps(view, item) -> dict:
    q, r = two_layer.teacher_overlaps(_weight(view.model, 0), _weight(view.model, 1)[0], view.run.teacher[0])
    return {"q": q, "r": r}


def _layer_alignment(view, item) -> dict:
    cos, u_norm, w_norm = layer_alignment(_weight(view.model, 0), _weight(view.model, 1)[0],
                                          view.run.data.principal_direction)
    return {"layer_alignment": cos, "readout_norm": u_norm, "hidden_norm": w_norm}


def _readout_alignment(model) -> float:
    return gram_alignment(_weight(model, -1), _weight(model, -2))


def _layer_norm_sum(model) -> float:
    arrays = trainable(model)[0]
    layers, count = layer_components(arrays)
    return layer_norm_sum(jax.tree.leaves(arrays), layers, count)


def _param_distance(run, traj, item) -> dict:
    theta_final = flat_vector(trainable(traj.model)[0])
    distance, cosine_distance = parameter_distances(theta_final, run.theta0)
    return {"param_distance": distance, "param_cosine_distance": cosine_distance}


def _alignment_lead(run, traj, item) -> dict:
    """t½ / t_align, NaN unless t_align > 0 (a first layer aligned at init has no lead to measure)."""
    t_align = first_crossing(traj.time, traj.series["first_layer_alignment"], item.options["threshold"],
                             downward=False)
    t_half = half_loss_time(traj.time, traj.series["loss"])
    return {"alignment_lead": t_half / t_align if t_align > 0 else float("nan")}


def _param_distance_path(view, item) -> dict:
    theta = flat_vector(trainable(view.model)[0])
    distance, cosine_distance = parameter_distances(theta, view.run.theta0)
    return {"param_distance_t": distance, "param_cosine_distance_t": cosine_distance}


def _distance_at_threshold(run, traj, item) -> dict:
    steps = np.asarray(traj.steps, np.float64)
    step = first_crossing(steps, traj.series["loss"], item.options["threshold"], downward=True)
    at = {}
    for name, source in (("distance_at_threshold", "param_distance_t"),
                         ("cosine_distance_at_threshold", "param_cosine_distance_t")):
        at[name] = float(np.interp(step, steps, np.asarray(traj.series[source], np.float64))) \
            if np.isfinite(step) else float("nan")
    return at


def _min_norm_error(run, traj, item) -> dict:
    w = np.asarray(moving_network(traj.model).end_to_end_matrix(), np.float64)[0]
    w_min = final_kernel.min_norm_interpolant(run.data.flat_train, run.data.y_train[:, 0])
    return {"min_norm_relerr": float(np.linalg.norm(w - w_min) / np.linalg.norm(w_min))}


MEASUREMENTS = [
    Measurement("first_layer_alignment", "checkpoint", "cos(W₁ᵀW₁, ββᵀ) = βᵀW₁ᵀW₁β / (‖W₁ᵀW₁‖_F |β|²) with β the "
                "least-squares (teacher) direction (silent-alignment Fig. 3b, E.1c); 1 when W₁ is rank one along β",
                (series("first_layer_alignment", "cos(W₁ᵀW₁, ββᵀ)"),),
                lambda view, item: {"first_layer_alignment": first_layer_alignment(
                    moving_network(view.model).weights[0], view.run.teacher[0])},
                req.needs_scalar_output, architectures=MLP_ONLY),
    Measurement("readout_norm_sq", "checkpoint", "u² = |a|², the squared readout norm (silent-alignment Eq. 8, C.4)",
                (series("readout_norm_sq", "u² = |a|²"),),
                lambda view, item: {"readout_norm_sq": float(np.sum(_weight(view.model, -1) ** 2))},
                architectures=MLP_ONLY),
    Measurement("teacher_overlaps", "checkpoint", "q = ½(|a|² + βᵀWᵀWβ), r = aᵀWβ of a two-layer net "
                "(silent-alignment App. C.1, Eq. 33)",
                (series("q", "q(t)", description="q = ½(|a|² + βᵀWᵀWβ) of a two-layer net with readout a, first "
                        "layer W and teacher direction β (silent-alignment App. C.1, Eq. 33)"),
                 series("r", "r(t)", description="r = aᵀWβ of a two-layer net with readout a, first layer W and "
                        "teacher direction β (silent-alignment App. C.1, Eq. 33)")),
                _teacher_overlaps, req.two_layers, architectures=MLP_ONLY),
    Measurement("layer_alignment", "checkpoint", "layer alignment cos θ = u·w/(|u||w|), w = W n for the unit input "
                "direction n, and |u|, |w| of a two-layer net (solvable-model Sec. 2.2–2.3, Fig. 1)",
                (series("layer_alignment", "layer alignment cos θ",
                        description="cos θ = u·w/(|u||w|) of a two-layer net: readout u, w = W n the hidden "
                                    "pre-activation of the unit input direction n (solvable-model Sec. 2.2, Fig. 1)"),
                 series("readout_norm", "|u|", description="|u|, the readout norm of a two-layer net "
                        "(solvable-model Sec. 2.3: learning by rescaling)"),
                 series("hidden_norm", "|w| = |W n|", description="|w| = |W n| for the unit input direction n "
                        "(solvable-model Sec. 2.3)")),
                _layer_alignment, req.two_layers, architectures=MLP_ONLY),
    Measurement("t_align", "final", "first time cos(W₁ᵀW₁, ββᵀ) reaches the threshold option, interpolated "
                "between checkpoints (silent-alignment Fig. 3b)",
                (Variable("t_align", "t_align", units=TIME_UNITS),),
                lambda run, traj, item: {"t_align": first_crossing(
                    traj.time, traj.series["first_layer_alignment"], item.options["threshold"], downward=False)},
                depends_on=("first_layer_alignment",),
                options=(_THRESHOLD,)),
    Measurement("alignment_lead", "final", "t½ / t_align: how far ahead of the loss drop the first layer aligns "
                "(> 1: alignment first, silent-alignment Fig. 3c; t_align at the threshold option)",
                (Variable("alignment_lead", "t½ / t_align",
                          description="t½ over t_align, the first times the loss reaches half its initial value and "
                                      "cos(W₁ᵀW₁, ββᵀ) the threshold (silent-alignment Fig. 3c, E.1c)"),),
                _alignment_lead,
                depends_on=("first_layer_alignment", "loss"), architectures=MLP_ONLY, options=(_THRESHOLD,)),
    Measurement("min_norm_error", "final", "|w − w_min| / |w_min|: distance of the learned linear map w from the "
                "min-norm interpolant w_min = X(XᵀX)⁻¹y (silent-alignment App. E.3)",
                (Variable("min_norm_relerr", "|w − w_min| / |w_min|"),), _min_norm_error, req.linear_network,
                architectures=MLP_ONLY),
    Measurement("weight_norm", "final", "Σ_ℓ ‖θ_ℓ‖₂, the sum of the layers' norms, after training and at init "
                "(solvable-model Fig. 2)",
                (Variable("weight_norm", "Σ_ℓ ‖θ_ℓ‖ after training",
                          description="Σ_ℓ ‖θ_ℓ‖₂ over weight layers ℓ (weights and bias) after training "
                                      "(solvable-model Fig. 2: learning by disalignment)"),
                 Variable("weight_norm_init", "Σ_ℓ ‖θ_ℓ‖ at init",
                          description="Σ_ℓ ‖θ_ℓ‖₂ over weight layers ℓ (weights and bias) at init (solvable-model Fig. 2)")),
                lambda run, traj, item: {"weight_norm": _layer_norm_sum(traj.model),
                                         "weight_norm_init": _layer_norm_sum(run.model0)}),
    Measurement("readout_alignment", "final", "cos(W_LᵀW_L, W_{L−1}W_{L−1}ᵀ) of the readout W_L and the layer "
                "below it, after training and at init: the layer alignment cos²θ of solvable-model Sec. 2.2 for "
                "any MLP (1: the readout reads the directions the layer below writes; Fig. 2: disalignment)",
                (Variable("readout_alignment", "readout–hidden alignment cos(W_LᵀW_L, W_{L−1}W_{L−1}ᵀ)",
                          description="tr(W_LᵀW_L W_{L−1}W_{L−1}ᵀ)/(‖W_LᵀW_L‖_F ‖W_{L−1}W_{L−1}ᵀ‖_F) after training: "
                                      "cos²θ of solvable-model Sec. 2.2 for a two-layer net with one input dimension; a larger "
                                      "init that learns by disalignment ends lower (Fig. 2)"),
                 Variable("readout_alignment_init", "readout–hidden alignment at init",
                          description="tr(W_LᵀW_L W_{L−1}W_{L−1}ᵀ)/(‖W_LᵀW_L‖_F ‖W_{L−1}W_{L−1}ᵀ‖_F) at init "
                                      "(scale-free: the same for every σ of one draw)")),
                lambda run, traj, item: {"readout_alignment": _readout_alignment(traj.model),
                                         "readout_alignment_init": _readout_alignment(run.model0)},
                req.hidden_layer, architectures=MLP_ONLY),
    Measurement("param_distance", "final", "‖θ_T − θ_0‖₂ and 1 − cos(θ_T, θ_0) over the trainable parameters "
                "(linearized-networks Fig. 14)",
                (Variable("param_distance", "‖θ_T − θ_0‖₂",
                          description="‖θ_T − θ_0‖₂ over the trainable parameters (a linearization's θ_0 is its origin; "
                                      "linearized-networks Fig. 14)"),
                 Variable("param_cosine_distance", "1 − cos(θ_T, θ_0)",
                          description="1 − θ_T·θ_0/(‖θ_T‖‖θ_0‖) over the trainable parameters "
                                      "(linearized-networks Fig. 14)")), _param_distance),
    Measurement("param_distance_path", "checkpoint", "‖θ_t − θ_0‖₂ and 1 − cos(θ_t, θ_0) over the trainable "
                "parameters at every checkpoint t (linearized-networks Fig. 14)",
                (series("param_distance_t", "‖θ_t − θ_0‖₂",
                        description="‖θ_t − θ_0‖₂ over the trainable parameters at checkpoint t (a linearization's "
                                    "θ_0 is its origin; linearized-networks Fig. 14)"),
                 series("param_cosine_distance_t", "1 − cos(θ_t, θ_0)",
                        description="1 − θ_t·θ_0/(‖θ_t‖‖θ_0‖) over the trainable parameters at checkpoint t "
                                    "(linearized-networks Fig. 14)")), _param_distance_path),
    Measurement("distance_at_threshold", "final", "‖θ_t* − θ_0‖₂ and 1 − cos(θ_t*, θ_0) at the first step t* at which "
                "the training loss reaches the threshold (t* and the distances linear between checkpoints; NaN if "
                "never): the distance travelled to fit a task to one loss (linearized-networks Fig. 14: loss 0.01)",
                (Variable("distance_at_threshold", "‖θ_t* − θ_0‖₂ at the loss threshold",
                          description="‖θ_t* − θ_0‖₂, t* the first step at which the training loss reaches the "
                                      "threshold, interpolated between checkpoints (linearized-networks Fig. 14)"),
                 Variable("cosine_distance_at_threshold", "1 − cos(θ_t*, θ_0) at the loss threshold",
                          description="1 − cos(θ_t*, θ_0), t* the first step at which the training loss reaches "
                                      "the threshold, interpolated between checkpoints (linearized-networks Fig. 14)")),
                _distance_at_threshold, depends_on=("loss", "param_distance_path"),
                options=(Option("threshold", float, 0.01, "training-loss level", 0.0, open_low=True),)),
]
