"""Theory of silent alignment (Atanasov, Bordelon & Pehlevan 2022) against the measurements: the
deep-linear gain ODE's t½, the two-layer overlaps q(t), r(t), the final NTK K∞ and its alignment, and
the per-mode trajectories. Each record's ``compute`` reads the initial weights, the teacher and the
series and calls :mod:`ntkpipe.theory`."""

from __future__ import annotations

import numpy as np

from ntkpipe.measure import requirements as req
from ntkpipe.measure.context import ModelView, moving_network
from ntkpipe.measure.record import MLP_ONLY, TIME_UNITS, Measurement, Variable, series, train_gram
from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.theory import deep_linear, final_kernel, two_layer

GRAM_DIMS = ("train_point", "train_point_nu")
"""The two sample dims of a training Gram: rows μ, columns ν."""
_GRADIENT_FLOW = ("whitened data (data.gamma 0), no bias, standard parameterization, model.kind network, "
                  "model.gamma 1, MSE loss, full-batch GD with a constant schedule (gradient flow), one output")


def _initial_gain(run) -> float:
    """c₀ of the gain ODE: (q₀ + r₀)/2 for two layers, exact for the early phase (App. C.5); for
    deeper nets the gain along β of the nearest balanced, β-aligned network
    (``deep_linear.aligned_initial_gain``, which equals (q₀ + r₀)/2 at L = 2)."""
    net = moving_network(run.model0)
    if run.spec.model.depth == 2:
        q0, r0 = two_layer.initial_overlaps(net, run.teacher[0])
        return (q0 + r0) / 2.0
    return deep_linear.aligned_initial_gain(net.weights, run.teacher[0])


def _t_half_theory(run, traj, item) -> dict:
    """The irreducible loss of the best linear predictor is added to the loss (0 for a linear teacher)."""
    c0, s, irreducible = _initial_gain(run), run.teacher[1], _irreducible(run)
    try:
        value = deep_linear.half_loss_time(c0, s, run.spec.model.depth, irreducible)
    except ValueError:  # c₀ ≥ s, or the loss cannot halve
        value = float("nan")
    return {"t_half_theory": value}


def _irreducible(run) -> float:
    """The loss of the best linear predictor sβ·x on the training set (0 for a linear teacher)."""
    beta, s = run.teacher
    x, y = run.data.flat_train, run.data.y_train[:, 0]
    return 0.5 * float(np.mean((x @ (s * beta) - y) ** 2))


def _overlaps_theory(run, traj, item) -> dict:
    """q, r from the measured (q₀, r₀) (Eq. 50–51) and u² from the measured u₀² = |a₀|² as well
    (``two_layer.readout_norm_sq``, docs/papers.md §3.3); Eq. C.4 from u₀² = (q₀ + r₀)/2 assumed a
    balanced init and started 3.0× (synthetic, 2.5× in issue 26) and 1.4× (digits) below the measured u².
    Errors are per time: |ln(measured/theory)| for q and u², which grow over decades, and
    |r − r_theory|/q_theory for r, which crosses 0. On whitened data the loss is ½(s − r)² + ½|w⊥|² + the
    irreducible loss (w = Wᵀa, r = wᵀβ); the theory's w stays along β, so its loss is
    ½(s − r_theory)² + the irreducible loss (Fig. C.2a)."""
    beta, s = run.teacher
    net = moving_network(run.model0)
    q0, r0 = two_layer.initial_overlaps(net, beta)
    readout = np.asarray(net.weights[1], dtype=np.float64)[0]
    q, r = two_layer.overlaps(traj.time, q0, s, r0)
    u_sq = two_layer.readout_norm_sq(traj.time, q0, s, r0, float(readout @ readout))
    series = traj.series
    return {"q_theory": q, "r_theory": r, "readout_norm_sq_theory": u_sq,
            "two_layer_loss_theory": 0.5 * (s - r) ** 2 + _irreducible(run),
            "q_max_logerr": two_layer.max_log_error(series["q"], q),
            "r_max_relerr_q": two_layer.max_scaled_error(series["r"], r, q),
            "readout_norm_sq_max_logerr": two_layer.max_log_error(series["readout_norm_sq"], u_sq)}


def _final_ntk(run, traj, item) -> dict:
    beta, s = run.teacher
    depth = run.spec.model.depth
    measured = final_kernel.linear_ntk_matrix(moving_network(traj.model))
    theory = final_kernel.final_ntk_matrix(beta, s, depth)
    return {"final_ntk_ratio": final_kernel.direction_ratio(measured, beta),
            "final_ntk_ratio_theory": float(depth),
            "final_ntk_relerr": float(np.linalg.norm(measured - theory) / np.linalg.norm(theory))}


def _final_ntk_gram(run, traj, item) -> dict:
    """The measured Gram is the empirical NTK of the trained network (the NTK engine, any weights);
    its theory is Eq. 63 on the training inputs with the run's least-squares teacher (β, s)."""
    beta, s = run.teacher
    return {"final_ntk_gram": ModelView(traj.model, run).gram_train,
            "final_ntk_gram_theory": final_kernel.final_ntk_gram(run.data.flat_train, beta, s, run.spec.model.depth)}


def _alignment_theory(run, traj, item) -> dict:
    beta, s = run.teacher
    m = final_kernel.final_ntk_matrix(beta, s, run.spec.model.depth)
    return {"alignment_theory": final_kernel.kernel_alignment_of_matrix(m, run.data.flat_train, run.data.y_train)}


def _relu_alignment_theory(run, traj, item) -> dict:
    beta, s = run.teacher
    gram = final_kernel.relu_final_gram(run.data.flat_train, beta, s)
    return {"relu_alignment_theory": kernel_alignment(gram, run.data.y_train[:, 0])}


def _min_norm_theory(run, traj, item) -> dict:
    x, y = run.data.flat_train, run.data.y_train[:, 0]
    net = moving_network(run.model0)
    first = float(net.multipliers[0]) * np.asarray(net.weights[0], np.float64)
    return {"min_norm_relerr_theory": final_kernel.min_norm_error_theory(
        first, x, final_kernel.min_norm_interpolant(x, y), run.spec.model.depth)}


def _mode_strength_theory(run, traj, item) -> dict:
    """c₀ from ``two_layer.initial_mode_gains`` for two layers (the early phase solved per mode), from
    ``deep_linear.aligned_mode_gains`` for deeper nets (each mode's nearest balanced aligned chain, off
    the stronger modes' directions; docs/papers.md §3.5). The earlier |W_Lᵀu_k|^L, which reads the
    readout alone, put the L = 4 modes' learning times 4 %…39 % late; this puts them 4 %…9 % early."""
    v, s, u = final_kernel.target_modes(run.data.flat_train, run.data.y_train)
    net = moving_network(run.model0)
    depth = run.spec.model.depth
    if depth == 2:
        c0 = two_layer.initial_mode_gains(net, run.data.flat_train, run.data.y_train)
    else:
        c0 = deep_linear.aligned_mode_gains(net.weights, v, u)
    return {"mode_strength_theory": final_kernel.mode_strength_trajectories(traj.time, c0, s, depth).T,
            "mode_target": s,
            "mode_half_time_theory": np.array([deep_linear.gain_time(c, sk, depth, 0.5 * sk) if 0.0 < c < 0.5 * sk
                                               else np.nan for c, sk in zip(c0, s)]),
            "multioutput_alignment_theory": final_kernel.multioutput_final_alignment(
                run.data.flat_train, run.data.y_train, depth)}


MEASUREMENTS = [
    Measurement("t_half_theory", "final",
                "t½ of the deep-linear gain ODE ċ = L c^{2−2/L}(s − c) (silent-alignment App. E.1), c₀ from the "
                "initial weights ((q₀ + r₀)/2 for two layers, |a₀|^L deeper), plus the irreducible loss",
                (Variable("t_half_theory", "t½ (theory)", units=TIME_UNITS, theory_of="t_half"),),
                _t_half_theory, req.deep_linear_theory, architectures=MLP_ONLY, where_applicable=True,
                assumptions=f"deep linear net (activation linear, depth ≥ 2), {_GRADIENT_FLOW}; NaN otherwise, "
                            "or when c₀ ≥ s (the loss cannot halve)"),
    Measurement("two_layer_theory", "final",
                "q(t), r(t) (Eq. 50–51), u(t)² (Eq. C.4 from the measured initial state), the loss ½(s − r)² "
                "they give (Fig. C.2a) and the simulation's largest deviation from them at any time",
                (series("q_theory", "q(t) theory", theory_of="q",
                        description="q(t) of Eq. 50–51 (silent-alignment App. C) from the measured q₀, r₀"),
                 series("r_theory", "r(t) theory", theory_of="r",
                        description="r(t) of Eq. 50–51 (silent-alignment App. C) from the measured q₀, r₀"),
                 series("readout_norm_sq_theory", "u² theory", theory_of="readout_norm_sq",
                        description="u(t)² = q(t) + u₀² − q₀ from the measured u₀² = |a₀|², q₀, r₀: Eq. C.4's logistic "
                                    "plus the decaying mode and the conserved imbalance ½(|a|² − |Wβ|²) "
                                    "(docs/papers.md §3.3)"),
                 series("two_layer_loss_theory", "training loss (two-layer theory)", theory_of="loss",
                        description="½(s − r_theory(t))² plus the irreducible loss of the best linear predictor: the "
                                    "loss of a net whose end-to-end weights Wᵀa stay along β, on whitened data "
                                    "(silent-alignment Fig. C.2a)"),
                 Variable("q_max_logerr", "max_t |ln(q / q_theory)|",
                          description="max_t |ln(q(t)/q_theory(t))|: the simulation's largest deviation from Eq. 50–51 "
                                      "relative to the value at each time (q grows from O(σ²) to s)"),
                 Variable("r_max_relerr_q", "max_t |r − r_theory| / q_theory",
                          description="max_t |r(t) − r_theory(t)|/q_theory(t): the deviation from Eq. 50–51 at each time, "
                                      "scaled by q ≥ |r| because r crosses 0"),
                 Variable("readout_norm_sq_max_logerr", "max_t |ln(u² / u²_theory)|",
                          description="max_t |ln(u(t)²/u²_theory(t))|: the simulation's largest deviation from u² = q + "
                                      "u₀² − q₀ (docs/papers.md §3.3) relative to the value at each time")),
                _overlaps_theory, req.two_layer_linear_theory,
                depends_on=("teacher_overlaps", "readout_norm_sq"), architectures=MLP_ONLY, where_applicable=True,
                assumptions=f"two-layer linear net (depth 2, activation linear), {_GRADIENT_FLOW}; NaN otherwise"),
    Measurement("final_ntk", "final", "final NTK of a linear net vs K∞ (ratio along β vs ⊥β; theory L)",
                (Variable("final_ntk_ratio", "λ_β / λ_⊥ of the final NTK",
                          description="eigenvalue of the final NTK matrix M (K = xᵀMx') along the teacher β over its "
                                      "eigenvalue ⊥ β (silent-alignment App. E.2–E.3)"),
                 Variable("final_ntk_ratio_theory", "λ_β / λ_⊥ theory (= L)", theory_of="final_ntk_ratio",
                          description="L, the ratio of K∞ = s^{2(L−1)/L} xᵀ[(L−1)ββᵀ + I]x' (silent-alignment Eq. 63)"),
                 Variable("final_ntk_relerr", "‖M − M∞‖ / ‖M∞‖",
                          description="relative Frobenius distance of the final NTK matrix M from M∞ of Eq. 63")),
                _final_ntk, req.final_ntk_theory, architectures=MLP_ONLY, where_applicable=True,
                assumptions="deep linear net (activation linear, no bias, depth ≥ 2, standard parameterization, "
                            "model.kind network, one output) trained to convergence from small balanced init; NaN otherwise"),
    Measurement("final_ntk_gram", "final", "final NTK Gram K(x_μ, x_ν) over the training points and K∞ of "
                "silent-alignment Eq. 63 on them (Fig. E.3b)",
                (Variable("final_ntk_gram", "final NTK K(x_μ, x_ν)", GRAM_DIMS,
                          description="the empirical NTK Gram Σ_θ ∂f(x_μ)/∂θ ∂f(x_ν)/∂θ of the trained network over "
                                      "the training points, float64 (silent-alignment Fig. E.3b)"),
                 Variable("final_ntk_gram_theory", "K∞(x_μ, x_ν) theory", GRAM_DIMS, theory_of="final_ntk_gram",
                          description="K∞(x_μ, x_ν) = s^{2(L−1)/L} x_μᵀ[(L − 1)ββᵀ + I]x_ν (silent-alignment Eq. 63, "
                                      "docs/papers.md §3.4) with the least-squares teacher sβ of the training "
                                      "targets, float64")),
                _final_ntk_gram, req.final_ntk_theory, architectures=MLP_ONLY,
                assumptions="deep linear net (activation linear, no bias, depth ≥ 2, standard parameterization, "
                            "model.kind network, one output) trained to convergence from small init on whitened "
                            "data; the run must meet them",
                gram_points=train_gram),
    Measurement("alignment_theory", "final", "final alignment A(X M∞ Xᵀ, y) of a depth-L linear net, M∞ of "
                "silent-alignment Eq. 63 (Fig. 1a, E.1b)",
                (Variable("alignment_theory", "final alignment (linear-net theory)", theory_of="alignment"),),
                _alignment_theory, req.needs_scalar_output, architectures=MLP_ONLY, where_applicable=True,
                assumptions="a deep linear net trained to convergence from small init (activation linear); computed "
                            "for every one-output MLP run, NaN for several outputs; compare only where it applies",
                gram_points=train_gram),
    Measurement("relu_alignment_theory", "final", "final alignment A(K∞, y) of a two-layer ReLU net on a linear "
                "teacher, K∞ = s 1(zz' > 0)(zz' + xᵀx'), z = βᵀx (docs/papers.md §3.8; silent-alignment Fig. 1a)",
                (Variable("relu_alignment_theory", "final alignment (two-layer ReLU theory)", theory_of="alignment"),),
                _relu_alignment_theory, req.relu_linear_teacher_theory, architectures=MLP_ONLY, where_applicable=True,
                assumptions="two-layer bias-free ReLU net (depth 2, activation relu) on one linear teacher with "
                            f"Gaussian inputs, {_GRADIENT_FLOW}, trained to convergence from small init; NaN otherwise",
                gram_points=train_gram),
    Measurement("min_norm_theory", "final", "expected |w − w_min| / |w_min| = ‖W₁(0)P⊥‖_F / (√N |w_min|^{1/L}) of a "
                "depth-L linear net at convergence from small init: the part of W₁ frozen off the data's span "
                "(docs/papers.md §3.7; silent-alignment App. E.2, G.1)",
                (Variable("min_norm_relerr_theory", "|w − w_min| / |w_min| (theory, O(σ))", theory_of="min_norm_relerr",
                          description="‖W₁(0)P⊥‖_F / (√N |w_min|^{1/L}), P⊥ the projector off the training inputs' "
                                      "row space: σ√((D − rank X)/D)/|w_min|^{1/L} for W ~ N(0, σ²/D); linear in σ "
                                      "at every depth (docs/papers.md §3.7)"),),
                _min_norm_theory, req.final_ntk_theory, architectures=MLP_ONLY, where_applicable=True,
                assumptions="deep linear net (activation linear, no bias, depth ≥ 2, standard parameterization, "
                            "model.kind network, one output) trained to convergence from small init, so that its map is "
                            "X⁺y on the inputs' row space (the min-norm interpolant where one exists, D ≥ P); NaN "
                            "otherwise"),
    Measurement("mode_strength_theory", "final", "per-mode deep-linear ODE trajectories, their learning times "
                "(c_k = s_k/2), targets s_k and the final alignment with C outputs (silent-alignment App. H, Fig. H.1)",
                (series("mode_strength_theory", "mode strength (theory)", "mode", theory_of="mode_strength",
                        description="each target mode k follows ċ = L c^{2−2/L}(s_k − c) (Saxe et al. 2014; "
                                    "silent-alignment App. H, Fig. H.1) from c₀ of the initial weights"),
                 Variable("mode_target", "target singular value s_k", ("mode",),
                          description="singular values s_k of the target map Σ_yx = Yᵀx/P, the modes' asymptotes"),
                 Variable("mode_half_time_theory", "mode learning time t_k (ODE)", ("mode",), units=TIME_UNITS,
                          theory_of="mode_half_time",
                          description="the time c_k(t) of ċ = L c^{2−2/L}(s_k − c) reaches s_k/2 from the same c₀ "
                                      "(docs/papers.md §3.2, §3.5; for L = 2, (1/2s_k) ln(s_k/c₀ − 1)); NaN where "
                                      "c₀ ≥ s_k/2"),
                 Variable("multioutput_alignment_theory", "final alignment (linear-net theory, C outputs)",
                          theory_of="alignment",
                          description="A(K∞, yyᵀ) of the final NTK of a depth-L linear net with C outputs on the training "
                                      "points: layer ℓ adds [(ββᵀ)^{(L−ℓ)/L}]_{cc'} xᵀ(βᵀβ)^{(ℓ−1)/L}x', β the "
                                      "least-squares map (silent-alignment App. H, Fig. H.1a dashed)")),
                _mode_strength_theory, req.deep_linear_modes_theory, depends_on=("mode_strength",),
                architectures=MLP_ONLY, where_applicable=True,
                assumptions="deep linear net (activation linear, depth ≥ 2), whitened data (data.gamma 0), no bias, "
                            "standard parameterization, model.kind network, model.gamma 1, MSE loss, GD with a "
                            "constant schedule; NaN otherwise, and for a mode whose initial strength is not below its target "
                            "(0 < c_k(0) < s_k, the small-init regime)"),
]
