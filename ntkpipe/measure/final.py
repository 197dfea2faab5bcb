"""Measurements taken once per run, from its recorded series, initial model and final model.

Each function maps ``(RunContext, Trajectory, MeasureItem)`` to named values: floats, or arrays
whose dims the registry declares.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from ntkpipe.measure.checkpoint import subset_size
from ntkpipe.measure.context import ModelView, RunContext
from ntkpipe.measure.crossing import first_crossing, half_loss_time, variation_after
from ntkpipe.measure.kernel_regression import kernel_predictions
from ntkpipe.measure.rotation import parameter_distances
from ntkpipe.measure.specialization import diagonal_ratio, kernel_specialization_matrix
from ntkpipe.measure.weights import moving_network
from ntkpipe.models import layer_components, trainable
from ntkpipe.ntk import empirical_ntk, jacobian_alignment, jacobian_alignments
from ntkpipe.theory import deep_linear, feature_evolution, final_kernel, relu_components, solvable, two_layer
from ntkpipe.train.loop import Trajectory


def t_half(run: RunContext, traj: Trajectory, item) -> dict:
    return {"t_half": half_loss_time(traj.time, traj.series["loss"])}


def t_align(run: RunContext, traj: Trajectory, item) -> dict:
    threshold = item.options["threshold"]
    return {"t_align": first_crossing(traj.time, traj.series["first_layer_alignment"], threshold, downward=False)}


def alignment_after_half(run: RunContext, traj: Trajectory, item) -> dict:
    """Fraction of the total variation of A(t) after t½: ≈ 0 when the kernel aligned silently
    before the loss fell, larger when it keeps rotating while the loss falls (silent-alignment Fig. 4)."""
    t_half_value = half_loss_time(traj.time, traj.series["loss"])
    return {"alignment_after_half": variation_after(traj.time, traj.series["alignment"], t_half_value)}


def _initial_gain(run: RunContext) -> float:
    """c₀ of the gain ODE: (q₀ + r₀)/2 for two layers, exact for the early phase (App. C.5); for
    deeper nets the gain along β of the nearest balanced, β-aligned network
    (``deep_linear.aligned_initial_gain``, which equals (q₀ + r₀)/2 at L = 2)."""
    net = moving_network(run.model0)
    if run.spec.model.depth == 2:
        q0, r0 = two_layer.teacher_overlaps(net, run.teacher[0])
        return (q0 + r0) / 2.0
    return deep_linear.aligned_initial_gain(net.weights, run.teacher[0])


def t_half_theory(run: RunContext, traj: Trajectory, item) -> dict:
    """t½ of ċ = L c^{2−2/L}(s − c) from c₀ (see ``_initial_gain``; silent-alignment App. E.1), with the
    irreducible loss of the best linear predictor added to the loss (0 for a linear teacher)."""
    c0, (beta, s) = _initial_gain(run), run.teacher
    x, y = run.data.flat_train, run.data.y_train[:, 0]
    irreducible = 0.5 * float(np.mean((x @ (s * beta) - y) ** 2))
    try:
        value = deep_linear.half_loss_time(c0, s, run.spec.model.depth, irreducible)
    except ValueError:  # c₀ ≥ s, or the loss cannot halve
        value = float("nan")
    return {"t_half_theory": value}


def label_eigenvalue(run: RunContext, traj: Trajectory, item) -> dict:
    return {"eigenvalue": run.label_eigenpair[0]}


def label_alignment(run: RunContext, traj: Trajectory, item) -> dict:
    """α(φ_j) = ‖Σ_x φ_j(x) ∇θ f(x)‖² at init over train ∪ test (linearized-networks Lemma 1)."""
    return {"alignment_init": float(jacobian_alignment(run.model0, run.data.x_all, run.label_eigenpair[1]))}


def predictors(run: RunContext, traj: Trajectory, item) -> dict:
    """Kernel regression with the initial and the final NTK vs the network on test points
    (silent-alignment Sec. 2, Fig. 1b–c)."""
    ridge, rcond = item.options["ridge"], item.options["rcond"]
    return kernel_predictions(run.model0, traj.model, run.data.x_train, run.data.y_train, run.data.x_test,
                              ridge=ridge, rcond=rcond)


def input_spectrum(run: RunContext, traj: Trajectory, item) -> dict:
    """Nonzero eigenvalues (above 1e-10 λ_max) of XᵀX/P of the (whitened) training inputs,
    descending (silent-alignment Fig. 4a)."""
    x = run.data.flat_train
    eigenvalues = np.linalg.svd(x, compute_uv=False) ** 2 / len(x)
    return {"input_spectrum": eigenvalues[eigenvalues > 1e-10 * eigenvalues[0]]}


def overlaps_theory(run: RunContext, traj: Trajectory, item) -> dict:
    """q(t), r(t) of Eq. 50–51 and u(t)² of Eq. C.4 from the measured (q₀, r₀) — u₀² = (q₀ + r₀)/2
    plays c₀ (App. C.5) — and the largest deviation of the simulation from each, relative to the
    curve's maximum."""
    beta, s = run.teacher
    q0, r0 = two_layer.teacher_overlaps(moving_network(run.model0), beta)
    q, r = two_layer.overlaps(traj.time, q0, s, r0)
    u_sq = deep_linear.two_layer_gain(traj.time, (q0 + r0) / 2.0, s)
    out = {"q_theory": q, "r_theory": r, "readout_norm_sq_theory": u_sq}
    for name, theory in (("q", q), ("r", r), ("readout_norm_sq", u_sq)):
        simulated = traj.series[name]
        out[f"{name}_max_relerr"] = float(np.nanmax(np.abs(simulated - theory)) / np.max(np.abs(theory)))
    return out


def final_ntk(run: RunContext, traj: Trajectory, item) -> dict:
    """The final NTK xᵀMx' of a linear net against K∞ = s^{2(L−1)/L} xᵀ[(L−1)ββᵀ + I]x'
    (silent-alignment Eq. 63): ratio along β vs ⊥β (theory: L) and relative Frobenius error."""
    beta, s = run.teacher
    depth = run.spec.model.depth
    measured = final_kernel.linear_ntk_matrix(moving_network(traj.model))
    theory = final_kernel.final_ntk_matrix(beta, s, depth)
    return {"final_ntk_ratio": final_kernel.direction_ratio(measured, beta),
            "final_ntk_ratio_theory": float(depth),
            "final_ntk_relerr": float(np.linalg.norm(measured - theory) / np.linalg.norm(theory))}


def min_norm_error(run: RunContext, traj: Trajectory, item) -> dict:
    """|w − w_min| / |w_min| for the learned linear map w and the min-norm interpolant X(XᵀX)⁻¹y."""
    w = np.asarray(moving_network(traj.model).end_to_end_matrix(), np.float64)[0]
    w_min = final_kernel.min_norm_interpolant(run.data.flat_train, run.data.y_train[:, 0])
    return {"min_norm_relerr": float(np.linalg.norm(w - w_min) / np.linalg.norm(w_min))}


def alignment_theory(run: RunContext, traj: Trajectory, item) -> dict:
    """Final kernel alignment of a depth-L linear net, A(X M∞ Xᵀ, y) (silent-alignment Fig. 1a, E.1b)."""
    beta, s = run.teacher
    m = final_kernel.final_ntk_matrix(beta, s, run.spec.model.depth)
    return {"alignment_theory": final_kernel.kernel_alignment_of_matrix(m, run.data.flat_train, run.data.y_train)}


def mode_strength_theory(run: RunContext, traj: Trajectory, item) -> dict:
    """Each target mode k = (u_k, s_k, v_k) follows ċ = L c^{2−2/L}(s_k − c) (Saxe et al. 2014;
    silent-alignment App. H); c₀ from ``two_layer.initial_mode_gains`` for two layers (the early
    phase solved per mode), |W_Lᵀu_k|^L for deeper nets (approximate: it ignores how long the inner
    layers take to align)."""
    _, s, u = final_kernel.target_modes(run.data.flat_train, run.data.y_train)
    net = moving_network(run.model0)
    depth = run.spec.model.depth
    if depth == 2:
        c0 = two_layer.initial_mode_gains(net, run.data.flat_train, run.data.y_train)
    else:
        c0 = np.linalg.norm(np.asarray(net.weights[-1], np.float64).T @ u, axis=0) ** depth
    return {"mode_strength_theory": final_kernel.mode_strength_trajectories(traj.time, c0, s, depth).T,
            "mode_target": s}


def rotation(run: RunContext, traj: Trajectory, item) -> dict:
    """α_T(φ_i)/α_0(φ_i), i = 1…K, α_t(φ) = ‖J_tᵀφ‖² over train ∪ test (linearized-networks Fig. 7):
    α_T from the final model's Jacobian (Lemma 1), α_0(φ_i) = λ_i of the label stage."""
    values, vectors = run.label_eigenpairs(item.options["top_k"])
    n = len(run.data.x_all)
    cotangents = vectors.T.reshape(len(values), n, -1)
    ratio = np.asarray(jacobian_alignments(traj.model, run.data.x_all, cotangents)) / values
    return {"rotation": ratio, "rotation_peak": int(np.argmax(ratio)) + 1}


def steps_to_threshold(run: RunContext, traj: Trajectory, item) -> dict:
    return {"steps_to_threshold": first_crossing(traj.steps, traj.series["loss"], item.options["threshold"],
                                                 downward=True)}


def param_distance(run: RunContext, traj: Trajectory, item) -> dict:
    """‖θ_T − θ_0‖₂ and 1 − cos(θ_T, θ_0) over the trainable parameters (a linearization's θ_0 is
    its origin)."""
    theta_final, _ = ravel_pytree(trainable(traj.model)[0])
    theta_init, _ = ravel_pytree(trainable(run.model0)[0])
    distance, cosine_distance = parameter_distances(theta_final, theta_init)
    return {"param_distance": distance, "param_cosine_distance": cosine_distance}


def relative_kernel_change(run: RunContext, traj: Trajectory, item) -> dict:
    """‖K_T − K_0‖_F / ‖K_0‖_F of the train NTK Gram of the final and the initial model."""
    k0 = ModelView(run.model0, run).gram_train
    kt = ModelView(traj.model, run).gram_train
    return {"relative_kernel_change": float(np.linalg.norm(kt - k0) / np.linalg.norm(k0))}


def nad_alignment(run: RunContext, traj: Trajectory, item) -> dict:
    """σ_j² of the run's NAD v_j: the predicted alignment α(g_{v_j}) of Theorem 1."""
    j = run.spec.data.directions.nad_index
    return {"nad_alignment": float(run.stages["directions"]["sigma_sq"].values[j - 1])}


def stein_check(run: RunContext, traj: Trajectory, item) -> dict:
    """The NAD stage's Stein check of Theorem 1, one relative error per test vector."""
    return {"stein_relerr": run.stages["directions"]["stein_relerr"].values}


def nad_directions(run: RunContext, traj: Trajectory, item) -> dict:
    """The first ``count`` NADs as (row, column, channel) images."""
    return {"nad_directions": run.stages["directions"]["directions"].values[: item.options["count"]]}


def ofe_numbers(run: RunContext, traj: Trajectory, item) -> dict:
    """What the OFE run yields besides its series: the γ it used (γ̂ for ``ofe_fit``), the max relative
    drift of C = γΔΔᵀ + K (App. B, Eq. 35), and the final alignment A(K∞, y), K∞ = γyyᵀ + K₀ (Eq. 7)."""
    return {k: traj.finals[k] for k in ("ofe_gamma", "ofe_conservation_error", "ofe_final_alignment")}


def gamma_hat(run: RunContext, traj: Trajectory, item) -> dict:
    """γ̂: the feature-learning rate at which the OFE's final kernel K₀ + γ̂yyᵀ has the network's final
    alignment (kernel-alignment Fig. 2C–D, 5B), with K₀ the initial NTK of the unscaled network
    (γ²·K_g for a network rescaled by γ) and Δ₀ = −y."""
    y = run.data.y_train.reshape(-1)
    k0 = ModelView(run.model0, run).gram_train * run.spec.model.gamma**2
    return {"gamma_hat": feature_evolution.fit_feature_rate(k0, -y, y, float(traj.series["alignment"][-1]))}


def kernel_specialization(run: RunContext, traj: Trajectory, item) -> dict:
    """KSM(c, d) = A(K^{c,c}, y_d y_dᵀ) / (C⁻¹ Σ_{d'} A(K^{d',d'}, y_d y_dᵀ)) (kernel-alignment Eq. 9,
    Fig. 3) of the final and the initial NTK on the first ``subset`` training points, and the final
    KSM's mean diagonal over its mean off-diagonal entry (> 1: kernel specialization)."""
    n = subset_size(len(run.data.y_train), item.options["subset"])
    x, y = run.data.x_train[:n], run.data.y_train[:n]
    ksm, ksm_init = (kernel_specialization_matrix(np.asarray(empirical_ntk(model, x)), y)
                     for model in (traj.model, run.model0))
    return {"ksm": ksm, "ksm_init": ksm_init, "ksm_diagonal_ratio": diagonal_ratio(ksm)}


def _own_and_other(growth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means over c of growth[:, c, c] and over c ≠ d of growth[:, c, d] (NaN for one output)."""
    c = growth.shape[-1]
    own = np.einsum("tcc->t", growth) / c
    other = (growth.sum(axis=(1, 2)) - c * own) / (c * (c - 1)) if c > 1 else np.full(len(growth), np.nan)
    return own, other


def _growth_ratio(growth: np.ndarray | float, reference: np.ndarray | float) -> np.ndarray:
    """growth / reference, NaN where the reference did not grow (0: the ratio is undefined)."""
    growth, reference = np.asarray(growth, np.float64), np.asarray(reference, np.float64)
    safe = np.where(reference == 0, 1.0, reference)
    return np.where(reference == 0, np.nan, growth / safe)


def component_growth(run: RunContext, traj: Trajectory, item) -> dict:
    """Growth (value − initial value) of the readout (K_V) and hidden (K_W) components along the
    targets, from ``kernel_components`` (kernel-alignment Sec. 6, Figs. 6–7).

    Own growth averages y_cᵀK_X^{c,c}y_c/|y_c|² over c, other growth y_dᵀK_X^{c,c}y_d/|y_d|² over
    c ≠ d. The end-of-training ratios and their theory values:
    ``kv_growth_ratio`` = mean_c [Δ(ŷ_cᵀK_V^{c,c}ŷ_c) / Δ(tr K_V^{c,c}/P)] / (P/2) ≈ 1 (K_V grows ≈ P/2
    times faster along y than on average; Eq. 16, Eqs. 78–82, :mod:`ntkpipe.theory.relu_components`);
    ``kw_isotropy_ratio``, the same for K_W without the P/2, ≈ 1 (isotropic growth, Eq. 86);
    ``kw_specialization_ratio`` = own / other growth of K_W ≈ 2 (Eq. 21) and
    ``kv_specialization_ratio`` ≈ 1 (K_V^{c,c} is the same for all c).
    """
    series = traj.series
    p = series["subset_outputs"].shape[1]
    out, along_over_trace = {}, {}
    for key in ("kv", "kw"):
        projection = series[f"{key}_projection"] - series[f"{key}_projection"][0]
        trace = series[f"{key}_trace"] - series[f"{key}_trace"][0]
        own, other = _own_and_other(projection)
        out |= {f"{key}_own_growth": own, f"{key}_other_growth": other,
                f"{key}_specialization_ratio": float(_growth_ratio(own[-1], other[-1]))}
        along_over_trace[key] = float(np.mean(_growth_ratio(np.diagonal(projection[-1]), trace[-1])))
    return out | {"kv_growth_ratio": along_over_trace["kv"] / (p / 2.0),
                  "kw_isotropy_ratio": along_over_trace["kw"],
                  "kw_other_growth_theory": 0.5 * out["kw_own_growth"]}


def component_theory(run: RunContext, traj: Trajectory, item) -> dict:
    """ŷᵀK_Vŷ, tr(K_V)/P and ŷᵀK_Wŷ of a scalar two-layer ReLU net from their initial values and the
    rates of Eq. 16 / Eqs. 76–86 in ntkpipe's convention, integrated with the measured outputs f(t)
    over the checkpoint times (:mod:`ntkpipe.theory.relu_components`); and the relative error of the
    predicted growth of ŷᵀK_Vŷ at the end."""
    series = traj.series
    y = run.data.y_train[:, 0]
    initial = {"kv_projection": series["kv_projection"][0, 0, 0], "kv_trace": series["kv_trace"][0, 0],
               "kw_projection": series["kw_projection"][0, 0, 0]}
    theory = relu_components.component_trajectories(traj.time, series["subset_outputs"][:, :, 0], y, initial)
    measured = series["kv_projection"][-1, 0, 0] - initial["kv_projection"]
    predicted = theory["kv_projection"][-1] - initial["kv_projection"]
    return {f"{name}_theory": value for name, value in theory.items()} | {
        "kv_growth_theory_relerr": float(abs(predicted - measured) / abs(measured))}


def weight_norm(run: RunContext, traj: Trajectory, item) -> dict:
    """Σ_ℓ ‖θ_ℓ‖₂ over weight layers ℓ (weights and bias), after training and at init: the "sum of norm
    of all layers" of solvable-model Fig. 2 (a larger init ends larger: learning by disalignment)."""
    def total(model) -> float:
        arrays = trainable(model)[0]
        components, count = layer_components(arrays)
        squares = np.zeros(count + 1)
        for c, leaf in zip(components, jax.tree.leaves(arrays)):
            squares[min(c, count)] += float(np.sum(np.asarray(leaf, np.float64) ** 2))
        return float(np.sum(np.sqrt(squares)))

    return {"weight_norm": total(traj.model), "weight_norm_init": total(run.model0)}


def solvable_theory(run: RunContext, traj: Trajectory, item) -> dict:
    """The closed form of the solvable two-layer linear model (:mod:`ntkpipe.theory.solvable`, STUDIES §3)
    from the run's initial u₀, w₀ = W₀n: P points x_μ = a_μ n reduce to one with κ → κā, y → y*.

    Layer rates per unit time t = η·step are η_W = m_W and η_u = m_u (the layer multipliers). The
    series (cos θ, |u|, |w|, the loss, ‖K‖_F of the Gram κ²(|u|² + |w|²) aaᵀ) hold for gradient flow
    and are NaN for other optimizers (SGD, Adam, momentum, a schedule); the invariant's final alignment
    y*/√(y*² + κ²A₀²) and the learning speed λ (its target and init terms) are given for every run;
    ``layer_alignment_theory_error`` is max_t |cos θ − cos θ_theory|."""
    net = moving_network(run.model0)
    n = run.data.principal_direction
    u0 = np.asarray(net.weights[1], np.float64)[0]
    w0 = np.asarray(net.weights[0], np.float64) @ n
    a = run.data.flat_train @ n
    a_bar, y_star, irreducible = solvable.line_reduction(a, run.data.y_train[:, 0])
    kappa = net.output_scale * a_bar
    opt = run.spec.train.optimizer
    m_w, m_u = opt.layer_lr or (1.0, 1.0)
    eta_w, eta_u = m_w, m_u * opt.lr_ratio
    speed, target_term, init_term = solvable.learning_speed(u0, w0, kappa, y_star, eta_u, eta_w)
    out = {"layer_alignment_invariant": solvable.final_alignment(u0, w0, kappa, y_star), "learning_speed": speed,
           "learning_speed_target_term": target_term, "learning_speed_init_term": init_term}
    flow = (opt.name == "gd" and opt.schedule == "constant" and run.spec.train.batch_size is None)
    names = ("layer_alignment_theory", "readout_norm_theory", "hidden_norm_theory", "loss_theory",
             "kernel_norm_theory")
    if not flow:
        return out | {k: np.full(len(traj.time), np.nan) for k in names} | {"layer_alignment_theory_error": np.nan}
    theory = solvable.closed_form(u0, w0, kappa, y_star, eta_u, eta_w, traj.time)
    gram_scale = net.output_scale**2 * float(a @ a)
    series = {"layer_alignment_theory": theory["layer_alignment"], "readout_norm_theory": np.sqrt(theory["u_norm_sq"]),
              "hidden_norm_theory": np.sqrt(theory["w_norm_sq"]), "loss_theory": 0.5 * theory["residual"] ** 2 + irreducible,
              "kernel_norm_theory": gram_scale * (theory["u_norm_sq"] + theory["w_norm_sq"])}
    error = np.nanmax(np.abs(traj.series["layer_alignment"] - theory["layer_alignment"])) \
        if "layer_alignment" in traj.series else np.nan
    return out | series | {"layer_alignment_theory_error": float(error)}
