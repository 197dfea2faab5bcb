"""Measurements of the NTK: its norm and alignment with the targets, its change and rotation, kernel
regression with it, and the structure of multi-output kernels (kernel-alignment Secs. 4.3, 6). Each
record's ``compute`` reads Grams, Jacobians and targets from the run and calls the array math."""

from __future__ import annotations

import numpy as np

from ntkpipe.data.dataset import output_count
from ntkpipe.lang.schema import RunSpec
from ntkpipe.measure import requirements as req
from ntkpipe.measure.context import ModelView
from ntkpipe.measure.crossing import first_crossing, half_loss_time, rise_time, variation_after
from ntkpipe.measure.kernel_regression import kernel_predictions
from ntkpipe.measure.options import Option
from ntkpipe.measure.record import (
    EVERY,
    TIME_UNITS,
    WITH_READOUT,
    Measurement,
    Variable,
    series,
    subset_fits,
    subset_gram,
    subset_option,
    subset_size,
    train_and_test_gram,
    train_gram,
)
from ntkpipe.measure.rotation import energy_concentration
from ntkpipe.measure.specialization import (
    component_growth,
    diagonal_ratio,
    kernel_specialization_matrix,
    target_projections,
    trace_per_point,
    traced_alignment,
)
from ntkpipe.ntk import component_grams, empirical_ntk, jacobian_alignment, jacobian_alignments
from ntkpipe.ntk.kernel_stats import kernel_alignment, kernel_norm

_PREDICTION_DIMS = ("test_point", "output")
_KSM_DIMS = ("output", "target")


def _alignment_after_half(run, traj, item) -> dict:
    t_half = half_loss_time(traj.time, traj.series["loss"])
    return {"alignment_after_half": variation_after(traj.time, traj.series["alignment"], t_half)}


def _alignment_growth_times(run, traj, item) -> dict:
    """t_A: A(t) has covered the fraction ``rise`` of its change; t_K: ‖K‖ first reaches the fraction
    ``level`` of its last finite value; their ratio t_K / t_A (NaN unless both are positive)."""
    t, norm = traj.time, np.asarray(traj.series["kernel_norm"], np.float64)
    t_rise = rise_time(t, traj.series["alignment"], item.options["rise"])
    finite = norm[np.isfinite(norm)]
    t_growth = first_crossing(t, norm, item.options["level"] * float(finite[-1]), downward=False) if finite.size \
        else float("nan")
    ratio = t_growth / t_rise if t_rise > 0 and t_growth > 0 else float("nan")
    return {"t_alignment_rise": t_rise, "t_kernel_growth": t_growth, "growth_over_alignment": ratio}


def _input_spectrum(run, traj, item) -> dict:
    x = run.data.flat_train
    eigenvalues = np.linalg.svd(x, compute_uv=False) ** 2 / len(x)
    return {"input_spectrum": eigenvalues[eigenvalues > 1e-10 * eigenvalues[0]]}


def _relative_kernel_change(run, traj, item) -> dict:
    k0 = ModelView(run.model0, run).gram_train
    kt = ModelView(traj.model, run).gram_train
    return {"relative_kernel_change": float(np.linalg.norm(kt - k0) / np.linalg.norm(k0))}


def _energy(view, item) -> dict:
    options = item.options
    if not view.scheduled(options["every"]):
        return {"energy_concentration": float("nan")}
    y = view.run.data.y_train[: options["subset"]]
    return {"energy_concentration": energy_concentration(view.gram_subset(len(y)), y, options["top_k"])}


def _energy_options(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """subset ≤ n_train, and top_k ≤ the eigenvectors of the subset's Gram (subset × outputs)."""
    if (problem := subset_fits(options, given, run)) is not None:
        return problem
    n, outputs = subset_gram(options, run), output_count(run.data)
    if options["top_k"] > n * outputs:
        key = "top_k" if "top_k" in given or "subset" not in given else "subset"
        return key, (f"top_k {options['top_k']} exceeds the {n * outputs} eigenvectors of the Gram on {n} training "
                     f"points × {outputs} output(s) (subset {options['subset']}, data.n_train {run.data.n_train}); "
                     f"use top_k <= {n * outputs} or a larger subset")
    return None


def _rotation(run, traj, item) -> dict:
    values, vectors = run.label_eigenpairs(item.options["top_k"])
    cotangents = vectors.T.reshape(len(values), len(run.data.x_all), -1)
    ratio = np.asarray(jacobian_alignments(traj.model, run.data.x_all, cotangents)) / values
    return {"rotation": ratio, "rotation_peak": int(np.argmax(ratio)) + 1}


def _rotation_options(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """top_k ≤ the eigenvectors of the Gram over train ∪ test (the label stage's top_k: its check)."""
    n, outputs = train_and_test_gram(options, run), output_count(run.data)
    if options["top_k"] > n * outputs:
        return "top_k", (f"top_k {options['top_k']} exceeds the {n * outputs} eigenvectors of the init NTK over "
                         f"train ∪ test ((n_train + n_test) × outputs); use top_k <= {n * outputs}")
    return None


def _traced_alignment(view, item) -> dict:
    options = item.options
    if not view.scheduled(options["every"]):
        return {"traced_alignment": float("nan")}
    y = view.run.data.y_train[: subset_size(len(view.run.data.y_train), options["subset"])]
    return {"traced_alignment": traced_alignment(view.kernel_subset(len(y)), y)}


def _kernel_specialization(run, traj, item) -> dict:
    n = subset_size(len(run.data.y_train), item.options["subset"])
    x, y = run.data.x_train[:n], run.data.y_train[:n]
    ksm, ksm_init = (kernel_specialization_matrix(np.asarray(empirical_ntk(model, x)), y)
                     for model in (traj.model, run.model0))
    return {"ksm": ksm, "ksm_init": ksm_init, "ksm_diagonal_ratio": diagonal_ratio(ksm)}


def _kernel_components(view, item) -> dict:
    """The components on the first ``subset`` training points at the scheduled checkpoints (NaN at the
    others), and the outputs on them at every checkpoint (the theory integrates them)."""
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


MEASUREMENTS = [
    Measurement("kernel_norm", "checkpoint", "Frobenius norm ‖K‖_F of the train NTK Gram K over (example, output) "
                "pairs, K = J Jᵀ with J = ∂f/∂θ (silent-alignment Fig. 1)",
                (series("kernel_norm", "‖K‖_F"),), lambda view, item: {"kernel_norm": kernel_norm(view.gram_train)},
                kernel_models=True, gram_points=train_gram),
    Measurement("alignment", "checkpoint", "kernel alignment A = yᵀKy / (‖K‖_F ‖y‖²) of the train NTK Gram with "
                "the targets (Cortes et al. 2012; kernel-alignment Eq. 2); 1 iff K ∝ yyᵀ",
                (series("alignment", "kernel alignment A(t)"),),
                lambda view, item: {"alignment": kernel_alignment(view.gram_train, view.run.data.y_train)},
                kernel_models=True, gram_points=train_gram),
    Measurement("alignment_after_half", "final", "share of the total variation of A(t) that happens after t½: ≈ 0 "
                "when the kernel aligned silently before the loss fell (silent-alignment Fig. 4)",
                (Variable("alignment_after_half", "share of alignment change after t½"),),
                _alignment_after_half, depends_on=("loss", "alignment"), kernel_models=True),
    Measurement("alignment_growth_times", "final", "t_A, when A(t) has covered the fraction rise of its change, "
                "t_K, when ‖K‖ first reaches the fraction level of its final value, and t_K / t_A: the kernel aligns "
                "while it is small, then grows (silent-alignment Sec. 3: t_K ∝ log(s/σ²) for two layers, t_A does "
                "not depend on σ; docs/papers.md §3.9)",
                (Variable("t_alignment_rise", "t_A (A(t) at 90 % of its rise)", units=TIME_UNITS,
                          description="first t at which A(t) = A(0) + rise·(A_end − A(0)), interpolated between "
                                      "checkpoints (rise 0.9 by default)"),
                 Variable("t_kernel_growth", "t_K (‖K‖ at 10 % of its final value)", units=TIME_UNITS,
                          description="first t at which ‖K(t)‖_F = level·‖K_end‖_F, interpolated between checkpoints "
                                      "(level 0.1 by default)"),
                 Variable("growth_over_alignment", "t_K / t_A",
                          description="t_K / t_A: how long after the kernel aligned it grows; grows like log(s/σ²) "
                                      "for a two-layer net from small init (silent-alignment Sec. 3)")),
                _alignment_growth_times, depends_on=("alignment", "kernel_norm"), kernel_models=True,
                options=(Option("rise", float, 0.9, "fraction of the change of A(t) reached at t_A", 0.0, 1.0),
                         Option("level", float, 0.1, "fraction of the final ‖K‖ reached at t_K", 0.0, 1.0))),
    Measurement("alignment_init", "final", "α(φ_j) = ‖Σ_x φ_j(x) ∇θ f(x)‖² at init over train ∪ test, from the "
                "Jacobian (linearized-networks Lemma 1)",
                (Variable("alignment_init", "α(φ_j)"),),
                lambda run, traj, item: {"alignment_init": float(jacobian_alignment(
                    run.model0, run.data.x_all, run.label_eigenpair[1]))},
                req.needs_eigen_labels, where_applicable=True),
    Measurement("kernel_predictors", "final",
                "kernel regression with the initial and final NTK vs the network on test points "
                "(silent-alignment Sec. 2, Fig. 1b–c)",
                (Variable("prediction_network", "network prediction", _PREDICTION_DIMS,
                          description="the trained network's output f(x) on each test point"),
                 Variable("prediction_final_ntk", "final-NTK regression", _PREDICTION_DIMS,
                          description="f₀(x) + K_T(x, X) K_T(X, X)⁺ (y − f₀(X)): kernel regression with the final NTK "
                                      "K_T (silent-alignment Sec. 2, Fig. 1b)"),
                 Variable("prediction_init_ntk", "initial-NTK regression", _PREDICTION_DIMS,
                          description="f₀(x) + K₀(x, X) K₀(X, X)⁺ (y − f₀(X)): kernel regression with the initial NTK "
                                      "K₀ (silent-alignment Sec. 2, Fig. 1c)"),
                 Variable("pred_corr_final", "corr(network, final-NTK regression)",
                          description="Pearson correlation of the network's and the final-NTK regression's test predictions"),
                 Variable("pred_corr_init", "corr(network, initial-NTK regression)",
                          description="Pearson correlation of the network's and the initial-NTK regression's test predictions"),
                 Variable("pred_relerr_final", "rel. error of final-NTK regression",
                          description="‖f_K_T − f_net‖ / ‖f_net‖ over the test points"),
                 Variable("pred_relerr_init", "rel. error of initial-NTK regression",
                          description="‖f_K₀ − f_net‖ / ‖f_net‖ over the test points"),
                 Variable("kr_rank_final", "rank used, final NTK",
                          description="eigenvalues of the final-NTK Gram kept by the pseudo-inverse (above rcond·λ_max)"),
                 Variable("kr_rank_init", "rank used, initial NTK",
                          description="eigenvalues of the initial-NTK Gram kept by the pseudo-inverse (above rcond·λ_max)"),
                 Variable("kr_ridge", "ridge (× mean diag K)",
                          description="ridge λ added to the Gram's diagonal, relative to its mean diagonal (option ridge)"),
                 Variable("kr_rcond", "eigenvalue cutoff (× λ_max)",
                          description="eigenvalues below rcond·λ_max are dropped from the pseudo-inverse (option rcond)")),
                lambda run, traj, item: kernel_predictions(
                    run.model0, traj.model, run.data.x_train, run.data.y_train, run.data.x_test,
                    ridge=item.options["ridge"], rcond=item.options["rcond"]),
                req.needs_test,
                options=(Option("ridge", float, 0.0, "ridge λ relative to the mean kernel diagonal", 0.0),
                         Option("rcond", float, 1e-10, "eigenvalue cutoff relative to λ_max", 0.0, 1.0,
                                open_low=True, open_high=True)), gram_points=train_and_test_gram),
    Measurement("input_spectrum", "final", "nonzero eigenvalues (above 1e-10 λ_max) of XᵀX/P of the (whitened) "
                "training inputs, descending (silent-alignment Fig. 4a)",
                (Variable("input_spectrum", "eigenvalue of XᵀX/P", ("spectrum_index",)),), _input_spectrum,
                kernel_models=True),
    Measurement("energy_concentration", "checkpoint",
                "‖Φ_Kᵀy‖/‖y‖: share of the targets on the top-K eigenvectors of the current Gram, on a fixed "
                "training subset (linearized-networks Sec. 4.2, Table 1); NaN at checkpoints it skips",
                (series("energy_concentration", "energy concentration ‖Φ_Kᵀy‖/‖y‖"),), _energy,
                options=(Option("top_k", int, 50, "eigenvectors K", 1),
                         Option("subset", int, 500, "training points in the Gram (the first n)", 2),
                         Option("every", int, 0, "also at every k-th checkpoint (0: init and end only)", 0)),
                kernel_models=True, check_options=_energy_options, gram_points=subset_gram),
    Measurement("rotation", "final",
                "α_T(φ_i)/α_0(φ_i) for the init eigenvectors i = 1…K, α_t(φ) = ‖J_tᵀφ‖² over train ∪ test "
                "(linearized-networks Fig. 7), and the index where it peaks",
                (Variable("rotation", "α_T(φ_i) / α_0(φ_i)", ("eigenfunction",),
                          description="α_T(φ_i)/α_0(φ_i), α_t(φ) = ‖J_tᵀφ‖² over train ∪ test, for the init NTK "
                                      "eigenvectors φ_i (linearized-networks Fig. 7, Lemma 1: α_0(φ_i) = λ_i)"),
                 Variable("rotation_peak", "argmax_i α_T(φ_i)/α_0(φ_i)",
                          description="the eigenfunction index i (from 1) where α_T(φ_i)/α_0(φ_i) peaks")),
                _rotation, req.needs_eigen_labels, where_applicable=True,
                options=(Option("top_k", int, 100, "eigenfunctions K (at most the stage's top_k)", 1),),
                check_options=_rotation_options),
    Measurement("relative_kernel_change", "final",
                "‖K_T − K_0‖_F / ‖K_0‖_F: relative change of the train NTK Gram from init to the end of training "
                "(→ 0 in the kernel phase, O(1) with feature learning; solvable-model Sec. 3)",
                (Variable("relative_kernel_change", "‖K_T − K_0‖_F / ‖K_0‖_F"),), _relative_kernel_change,
                gram_points=train_gram),
    Measurement("traced_alignment", "checkpoint",
                "A(K_tr, YYᵀ) = ⟨K_tr, Σ_d y_d y_dᵀ⟩_F / (‖K_tr‖_F ‖YYᵀ‖_F) of the traced kernel K_tr = C⁻¹ Σ_c K^{c,c} "
                "(kernel-alignment Sec. 4.3); NaN at checkpoints it skips",
                (series("traced_alignment", "traced-kernel alignment A(K_tr, YYᵀ)"),),
                _traced_alignment, options=(subset_option(0), EVERY),
                check_options=subset_fits, gram_points=subset_gram),
    Measurement("kernel_specialization", "final",
                "kernel specialization matrix KSM(c, d) (kernel-alignment Eq. 9, Fig. 3) at the end and at init, "
                "and its mean diagonal over mean off-diagonal entry",
                (Variable("ksm", "KSM(c, d)", _KSM_DIMS,
                          description="KSM(c, d) = A(K^{c,c}, y_d y_dᵀ) / (C⁻¹ Σ_d' A(K^{d',d'}, y_d y_dᵀ)) of the final "
                                      "NTK on the first subset training points (kernel-alignment Eq. 9, Fig. 3)"),
                 Variable("ksm_init", "KSM(c, d) at init", _KSM_DIMS,
                          description="KSM(c, d) of kernel-alignment Eq. 9 for the initial NTK"),
                 Variable("ksm_diagonal_ratio", "KSM mean diagonal / mean off-diagonal",
                          description="the final KSM's mean diagonal over its mean off-diagonal entry "
                                      "(> 1: kernel specialization; kernel-alignment Fig. 3)")),
                _kernel_specialization, req.needs_several_outputs, options=(subset_option(300),),
                check_options=subset_fits, gram_points=subset_gram),
    Measurement("kernel_components", "checkpoint",
                "readout (K_V) and hidden (K_W) NTK components along each target, y_dᵀK^{c,c}y_d/|y_d|², and "
                "their traces tr K^{c,c}/P, on a fixed training subset (kernel-alignment Figs. 6–7; NaN at "
                "checkpoints it skips), and the outputs on that subset at every checkpoint",
                (series("kv_projection", "y_dᵀK_V^{c,c}y_d / |y_d|²", *_KSM_DIMS,
                        description="y_dᵀK_V^{c,c}y_d/|y_d|² of the readout NTK component K_V per output c and target d "
                                    "(kernel-alignment Sec. 6, Figs. 6–7); NaN at checkpoints it skips"),
                 series("kw_projection", "y_dᵀK_W^{c,c}y_d / |y_d|²", *_KSM_DIMS,
                        description="y_dᵀK_W^{c,c}y_d/|y_d|² of the hidden NTK component K_W per output c and target d "
                                    "(kernel-alignment Sec. 6, Figs. 6–7); NaN at checkpoints it skips"),
                 series("kv_trace", "tr K_V^{c,c} / P", "output",
                        description="tr K_V^{c,c}/P, the readout component's mean diagonal per output c (kernel-alignment Sec. 6)"),
                 series("kw_trace", "tr K_W^{c,c} / P", "output",
                        description="tr K_W^{c,c}/P, the hidden component's mean diagonal per output c (kernel-alignment Sec. 6)"),
                 series("subset_outputs", "f_c(x_μ) on the subset", "train_point", "output",
                        description="the network's outputs f_c(x_μ) on the subset's training points (Eq. 16 integrates them)")),
                _kernel_components, req.hidden_layer, architectures=WITH_READOUT, options=(subset_option(0), EVERY),
                check_options=subset_fits, gram_points=subset_gram),
    Measurement("component_growth", "final",
                "growth of K_V and K_W along own (c = d) and other (c ≠ d) targets, K_V's along each target, and "
                "its ratios: K_V along y vs its trace (≈ P/2, Eq. 16), K_W along y vs its trace (≈ 1), own vs other growth (K_W ≈ 2, Eq. 21; "
                "K_V ≈ 1)",
                (series("kv_own_growth", "Δ y_cᵀK_V^{c,c}y_c / |y_c|² (mean over c)",
                        description="y_cᵀK_V^{c,c}y_c/|y_c|² minus its initial value, mean over outputs c (kernel-alignment Sec. 6)"),
                 series("kv_other_growth", "Δ y_dᵀK_V^{c,c}y_d / |y_d|² (mean over c ≠ d)",
                        description="y_dᵀK_V^{c,c}y_d/|y_d|² minus its initial value, mean over c ≠ d (NaN for one output)"),
                 series("kw_own_growth", "Δ y_cᵀK_W^{c,c}y_c / |y_c|² (mean over c)",
                        description="y_cᵀK_W^{c,c}y_c/|y_c|² minus its initial value, mean over outputs c (kernel-alignment Sec. 6)"),
                 series("kw_other_growth", "Δ y_dᵀK_W^{c,c}y_d / |y_d|² (mean over c ≠ d)",
                        description="y_dᵀK_W^{c,c}y_d/|y_d|² minus its initial value, mean over c ≠ d (NaN for one output)"),
                 series("kw_other_growth_theory", "½ · own K_W growth (Eq. 21)", theory_of="kw_other_growth",
                        description="½ × the own-target K_W growth: the other-target growth kernel-alignment Eq. 21 predicts"),
                 Variable("kv_target_growth", "Δ y_dᵀK_V^{c,c}y_d / |y_d|² at the end (mean over c)", ("target",),
                          description="y_dᵀK_V^{c,c}y_d/|y_d|² at the end minus its initial value, per target d, mean "
                                      "over outputs c: alike for every d (kernel-alignment Fig. 7A)"),
                 Variable("kv_growth_ratio", "[ΔŷᵀK_Vŷ / Δ(tr K_V/P)] / (P/2)",
                          description="mean_c [Δ(ŷ_cᵀK_V^{c,c}ŷ_c) / Δ(tr K_V^{c,c}/P)] / (P/2) at the end: ≈ 1 by "
                                      "kernel-alignment Eq. 16 (Eqs. 78–82)"),
                 Variable("kw_isotropy_ratio", "ΔŷᵀK_Wŷ / Δ(tr K_W/P)",
                          description="mean_c Δ(ŷ_cᵀK_W^{c,c}ŷ_c) / Δ(tr K_W^{c,c}/P) at the end: ≈ 1, isotropic growth "
                                      "(kernel-alignment Eq. 86)"),
                 Variable("kw_specialization_ratio", "K_W growth, own / other targets",
                          description="own over other-target K_W growth at the end: ≈ 2 by kernel-alignment Eq. 21"),
                 Variable("kv_specialization_ratio", "K_V growth, own / other targets",
                          description="own over other-target K_V growth at the end: ≈ 1 (K_V^{c,c} is the same for all c)")),
                lambda run, traj, item: component_growth(traj.series), depends_on=("kernel_components",),
                architectures=WITH_READOUT,
                assumptions="Eq. 21 holds for a two-layer ReLU net with C one-hot outputs early in training "
                            "(kernel-alignment Sec. 6.2); computed for every run with kernel_components, NaN for one output"),
]
