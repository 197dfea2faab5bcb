"""Theory of the solvable two-layer model (Kunin et al.; docs/papers.md §6.2) against the measurements: the
closed form of a linear two-layer net f = κuᵀWx on data on a line (:mod:`ntkpipe.theory.solvable`)."""

from __future__ import annotations

import numpy as np

from ntkpipe.measure import requirements as req
from ntkpipe.measure.context import moving_network
from ntkpipe.measure.record import MLP_ONLY, Measurement, Variable, series
from ntkpipe.theory import solvable

_SERIES = ("layer_alignment_theory", "readout_norm_theory", "hidden_norm_theory", "loss_theory", "kernel_norm_theory")


def _solvable_theory(run, traj, item) -> dict:
    """From the run's initial u₀, w₀ = W₀n: P points x_μ = a_μ n reduce to one with κ → κā, y → y*.
    Layer rates per unit time t = η·step are η_W = m_W and η_u = m_u (the layer multipliers); the
    series hold for gradient flow only (full-batch GD at a constant rate) and are NaN otherwise."""
    net = moving_network(run.model0)
    n = run.data.principal_direction
    u0 = np.asarray(net.weights[1], np.float64)[0]
    w0 = np.asarray(net.weights[0], np.float64) @ n
    a = run.data.flat_train @ n
    a_bar, y_star, irreducible = solvable.line_reduction(a, run.data.y_train[:, 0])
    kappa = float(net.output_scale) * a_bar
    opt = run.spec.train.optimizer
    m_w, m_u = opt.layer_lr or (1.0, 1.0)
    eta_w, eta_u = m_w, m_u * opt.lr_ratio
    speed, target_term, init_term = solvable.learning_speed(u0, w0, kappa, y_star, eta_u, eta_w)
    out = {"layer_alignment_invariant": solvable.final_alignment(u0, w0, kappa, y_star), "learning_speed": speed,
           "learning_speed_target_term": target_term, "learning_speed_init_term": init_term}
    flow = (opt.name == "gd" and opt.schedule == "constant" and run.spec.train.batch_size is None)
    if not flow:
        return out | {k: np.full(len(traj.time), np.nan) for k in _SERIES} | {"layer_alignment_theory_error": np.nan}
    theory = solvable.closed_form(u0, w0, kappa, y_star, eta_u, eta_w, traj.time)
    gram_scale = float(net.output_scale)**2 * float(a @ a)
    series_ = {"layer_alignment_theory": theory["layer_alignment"], "readout_norm_theory": np.sqrt(theory["u_norm_sq"]),
               "hidden_norm_theory": np.sqrt(theory["w_norm_sq"]),
               "loss_theory": 0.5 * theory["residual"] ** 2 + irreducible,
               "kernel_norm_theory": gram_scale * (theory["u_norm_sq"] + theory["w_norm_sq"])}
    error = np.nanmax(np.abs(traj.series["layer_alignment"] - theory["layer_alignment"])) \
        if "layer_alignment" in traj.series else np.nan
    return out | series_ | {"layer_alignment_theory_error": float(error)}


MEASUREMENTS = [
    Measurement("solvable_theory", "final",
                "closed form of the solvable two-layer linear model on a line (solvable-model Sec. 2, docs/papers.md §6.2): "
                "cos θ(t) = f/√(f² + κ²A₀²), |u|, |w|, the loss and ‖K‖_F under gradient flow (NaN for other "
                "optimizers), the invariant's final alignment y/√(y² + κ²A₀²) and the learning speed λ with "
                "its target (4κ²η_uη_W y²) and init (κ⁴Δ₀) terms",
                (series("layer_alignment_theory", "cos θ (theory)", theory_of="layer_alignment",
                        description="cos θ(t) = f/√(f² + κ²A₀²) of the solvable model under gradient flow "
                                    "(solvable-model Sec. 2.2, Eq. 5)"),
                 series("readout_norm_theory", "|u| (theory)", theory_of="readout_norm",
                        description="|u(t)| of the solvable model's closed form under gradient flow (solvable-model Sec. 2)"),
                 series("hidden_norm_theory", "|w| (theory)", theory_of="hidden_norm",
                        description="|w(t)| = |W(t) n| of the solvable model's closed form under gradient flow "
                                    "(solvable-model Sec. 2)"),
                 series("loss_theory", "training loss (theory)", theory_of="loss",
                        description="½(f(t) − y*)² plus the irreducible loss of the points' spread on the line, "
                                    "from the closed form (solvable-model Sec. 2)"),
                 series("kernel_norm_theory", "‖K‖_F (theory)", theory_of="kernel_norm",
                        description="‖K‖_F = κ²(|u|² + |w|²) aᵀa of the Gram on the line, from the closed form"),
                 Variable("layer_alignment_invariant", "final cos θ predicted by the invariant A₀",
                          theory_of="layer_alignment",
                          description="final cos θ = y/√(y² + κ²A₀²) from the gradient-flow invariant A₀², for any "
                                      "η_u/η_W (solvable-model Sec. 2.2, Fig. 5)"),
                 Variable("layer_alignment_theory_error", "max_t |cos θ − cos θ (theory)|",
                          description="max_t |cos θ − cos θ_theory|: the simulation's largest deviation from the closed form"),
                 Variable("learning_speed", "learning speed λ",
                          description="λ = √(4κ²η_uη_W y² + κ⁴Δ₀) (solvable-model Eq. 5/17)"),
                 Variable("learning_speed_target_term", "target term 4κ²η_uη_W y² of λ²",
                          description="4κ²η_uη_W y², the target term of λ² (solvable-model Eq. 5/17)"),
                 Variable("learning_speed_init_term", "init term κ⁴Δ₀ of λ²",
                          description="κ⁴Δ₀, Δ₀ = (η_W|u₀|² + η_u|w₀|²)² − 4η_uη_W(u₀·w₀)², the init term of λ² "
                                      "(solvable-model Eq. 5/17)")),
                _solvable_theory, req.solvable_model, architectures=MLP_ONLY, where_applicable=True,
                assumptions="two-layer linear net f = κuᵀWx (no bias, standard parameterization, model.kind network, "
                            "model.gamma 1, MSE loss) on data on a line (linear_teacher, inputs line), one output; "
                            "the series also need gradient flow (full-batch GD, constant schedule); NaN otherwise"),
]
