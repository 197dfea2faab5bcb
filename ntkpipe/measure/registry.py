"""The measurements a study may ask for: when each is taken, what it needs, what it stores.

``checkpoint`` measurements are taken at every checkpoint (their variables get a ``time``
dimension); ``final`` ones once per run, from the recorded series and the initial and final
models. Each stores one or more :class:`Variable`; figures and summaries refer to variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from ntkpipe.measure import checkpoint, final
from ntkpipe.measure import requirements as req
from ntkpipe.measure.options import Option
from ntkpipe.spec.schema import KERNEL_KINDS, RunSpec


@dataclass(frozen=True)
class Variable:
    """A stored variable; ``dims`` are its own dimensions besides the sweep axes ("time" for series)."""

    name: str
    label: str
    dims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measurement:
    """One measurement: when it is taken, what it stores, what it needs.

    ``requires(run)`` says why a run cannot have it (None if it can); ``architectures`` lists the
    model architectures it reads (None: any); ``kernel_models`` says it reads only outputs and the
    NTK Gram, so kernel kinds (kgd, akgd, ofe, ofe_fit) have it too; ``options`` are its declared options, whose defaults
    validation fills into every run's config; ``depends_on`` names measurements whose series it reads.
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

    def unmet(self, run: RunSpec) -> str | None:
        """Why ``run`` cannot have this measurement: its model kind and architecture, then its own requirements."""
        if run.model.kind in KERNEL_KINDS and not self.kernel_models:
            return (f"reads the network's weights or Jacobian; model.kind {run.model.kind!r} evolves a kernel "
                    "(applies to kinds network, linearized)")
        arch = run.model.architecture
        if self.architectures is not None and arch not in self.architectures:
            return (f"reads {' / '.join(self.architectures)} weights; model.architecture is {arch!r} "
                    f"(applies to: {', '.join(self.architectures)})")
        return self.requires(run)


def _series(name, label, *dims):
    return Variable(name, label, ("time", *dims))


_PREDICTION_DIMS = ("test_point", "output")
_KSM_DIMS = ("output", "target")
MLP_ONLY = ("mlp",)
WITH_READOUT = ("mlp", "cnn")
_EVERY = Option("every", int, 0, "also at every k-th checkpoint (0: init and end only)", 0)


def _subset(default: int) -> Option:
    return Option("subset", int, default, "training points in the kernel (the first n; 0: all)", 0)


MEASUREMENTS = [
    Measurement("loss", "checkpoint", "training loss on the full training set",
                (_series("loss", "training loss"),), checkpoint.train_loss, kernel_models=True),
    Measurement("test_loss", "checkpoint", "loss on the test set",
                (_series("test_loss", "test loss"),), checkpoint.test_loss, req.needs_test, kernel_models=True),
    Measurement("train_accuracy", "checkpoint", "accuracy on the training set",
                (_series("train_accuracy", "train accuracy"),), checkpoint.train_accuracy, req.needs_classes, kernel_models=True,
                where_applicable=True),
    Measurement("test_accuracy", "checkpoint", "accuracy on the test set",
                (_series("test_accuracy", "test accuracy"),), checkpoint.test_accuracy,
                lambda r: req.needs_test(r) or req.needs_classes(r), kernel_models=True, where_applicable=True),
    Measurement("kernel_norm", "checkpoint", "Frobenius norm of the train NTK Gram",
                (_series("kernel_norm", "‖K‖_F"),), checkpoint.gram_norm, kernel_models=True),
    Measurement("alignment", "checkpoint", "kernel alignment yᵀKy / (‖K‖_F ‖y‖²) on the train set",
                (_series("alignment", "kernel alignment A(t)"),), checkpoint.gram_alignment, kernel_models=True),
    Measurement("first_layer_alignment", "checkpoint", "cos(W₁ᵀW₁, ββᵀ) with β the least-squares direction",
                (_series("first_layer_alignment", "cos(W₁ᵀW₁, ββᵀ)"),), checkpoint.layer_one_alignment,
                req.needs_scalar_output, architectures=MLP_ONLY),
    Measurement("readout_norm_sq", "checkpoint", "u² = |a|², the squared readout norm",
                (_series("readout_norm_sq", "u² = |a|²"),), checkpoint.readout_norm_sq,
                architectures=MLP_ONLY),
    Measurement("teacher_overlaps", "checkpoint", "q = ½(|a|² + βᵀWᵀWβ), r = aᵀWβ of a two-layer net",
                (_series("q", "q(t)"), _series("r", "r(t)")), checkpoint.teacher_overlaps, req.two_layers,
                architectures=MLP_ONLY),
    Measurement("mode_strength", "checkpoint", "strengths u_kᵀ Σ_fx v_k along the target's singular modes",
                (_series("mode_strength", "mode strength m_k", "mode"),), checkpoint.mode_strength, kernel_models=True),
    Measurement("t_half", "final", "first time the loss reaches half its initial value",
                (Variable("t_half", "t½"),), final.t_half, depends_on=("loss",), kernel_models=True),
    Measurement("t_align", "final", "first time cos(W₁ᵀW₁, ββᵀ) reaches the threshold",
                (Variable("t_align", "t_align"),), final.t_align, depends_on=("first_layer_alignment",),
                options=(Option("threshold", float, 0.5, "level of cos(W₁ᵀW₁, ββᵀ)", -1.0, 1.0),)),
    Measurement("alignment_after_half", "final", "fraction of the total variation of A(t) after t½",
                (Variable("alignment_after_half", "share of alignment change after t½"),),
                final.alignment_after_half, depends_on=("loss", "alignment"), kernel_models=True),
    Measurement("t_half_theory", "final",
                "t½ from the deep-linear ODE ċ = L c^{2-2/L}(s − c), c₀ from the initial weights",
                (Variable("t_half_theory", "t½ (theory)"),), final.t_half_theory, req.deep_linear_theory,
                architectures=MLP_ONLY, where_applicable=True),
    Measurement("eigenvalue", "final", "eigenvalue λ_j of the label eigenvector",
                (Variable("eigenvalue", "λ_j"),), final.label_eigenvalue, req.needs_eigen_labels,
                where_applicable=True),
    Measurement("alignment_init", "final", "α(φ_j) = ‖Σ_x φ_j(x) ∇θ f(x)‖² at init, from the Jacobian",
                (Variable("alignment_init", "α(φ_j)"),), final.label_alignment, req.needs_eigen_labels,
                where_applicable=True),
    Measurement("kernel_predictors", "final",
                "kernel regression with the initial and final NTK vs the network on test points",
                (Variable("prediction_network", "network prediction", _PREDICTION_DIMS),
                 Variable("prediction_final_ntk", "final-NTK regression", _PREDICTION_DIMS),
                 Variable("prediction_init_ntk", "initial-NTK regression", _PREDICTION_DIMS),
                 Variable("pred_corr_final", "corr(network, final-NTK regression)"),
                 Variable("pred_corr_init", "corr(network, initial-NTK regression)"),
                 Variable("pred_relerr_final", "rel. error of final-NTK regression"),
                 Variable("pred_relerr_init", "rel. error of initial-NTK regression"),
                 Variable("kr_rank_final", "rank used, final NTK"),
                 Variable("kr_rank_init", "rank used, initial NTK"),
                 Variable("kr_ridge", "ridge (× mean diag K)"),
                 Variable("kr_rcond", "eigenvalue cutoff (× λ_max)")),
                final.predictors, req.needs_test,
                options=(Option("ridge", float, 0.0, "ridge λ relative to the mean kernel diagonal", 0.0),
                         Option("rcond", float, 1e-10, "eigenvalue cutoff relative to λ_max", 0.0, 1.0,
                                open_low=True, open_high=True))),
    Measurement("input_spectrum", "final", "eigenvalues of XᵀX/P of the training inputs",
                (Variable("input_spectrum", "eigenvalue of XᵀX/P", ("spectrum_index",)),), final.input_spectrum, kernel_models=True),
    Measurement("two_layer_theory", "final",
                "q(t), r(t) (Eq. 50–51) and u(t)² (Eq. C.4) and the simulation's largest deviation from them",
                (_series("q_theory", "q(t) theory"), _series("r_theory", "r(t) theory"),
                 _series("readout_norm_sq_theory", "u² theory"),
                 Variable("q_max_relerr", "max |q − q_theory| / max q_theory"),
                 Variable("r_max_relerr", "max |r − r_theory| / max r_theory"),
                 Variable("readout_norm_sq_max_relerr", "max |u² − u²_theory| / max u²_theory")),
                final.overlaps_theory, req.two_layer_linear_theory,
                depends_on=("teacher_overlaps", "readout_norm_sq"), architectures=MLP_ONLY, where_applicable=True),
    Measurement("final_ntk", "final", "final NTK of a linear net vs K∞ (ratio along β vs ⊥β; theory L)",
                (Variable("final_ntk_ratio", "λ_β / λ_⊥ of the final NTK"),
                 Variable("final_ntk_ratio_theory", "λ_β / λ_⊥ theory (= L)"),
                 Variable("final_ntk_relerr", "‖M − M∞‖ / ‖M∞‖")),
                final.final_ntk, req.final_ntk_theory, architectures=MLP_ONLY, where_applicable=True),
    Measurement("min_norm_error", "final", "distance of the learned linear map from the min-norm interpolant",
                (Variable("min_norm_relerr", "|w − w_min| / |w_min|"),), final.min_norm_error, req.linear_network,
                architectures=MLP_ONLY),
    Measurement("alignment_theory", "final", "final alignment A(X M∞ Xᵀ, y) of a depth-L linear net",
                (Variable("alignment_theory", "final alignment (linear-net theory)"),), final.alignment_theory,
                req.needs_scalar_output, architectures=MLP_ONLY, where_applicable=True),
    Measurement("mode_strength_theory", "final", "per-mode deep-linear ODE trajectories and targets s_k",
                (_series("mode_strength_theory", "mode strength (theory)", "mode"),
                 Variable("mode_target", "target singular value s_k", ("mode",))),
                final.mode_strength_theory, req.deep_linear_modes_theory, depends_on=("mode_strength",),
                architectures=MLP_ONLY, where_applicable=True),
    Measurement("energy_concentration", "checkpoint",
                "‖Φ_Kᵀy‖/‖y‖: share of the targets on the top-K eigenvectors of the current Gram, on a fixed "
                "training subset (linearized-networks Sec. 4.2, Table 1); NaN at checkpoints it skips",
                (_series("energy_concentration", "energy concentration ‖Φ_Kᵀy‖/‖y‖"),), checkpoint.energy,
                options=(Option("top_k", int, 50, "eigenvectors K", 1),
                         Option("subset", int, 500, "training points in the Gram (the first n)", 2),
                         Option("every", int, 0, "also at every k-th checkpoint (0: init and end only)", 0)), kernel_models=True),
    Measurement("rotation", "final",
                "α_T(φ_i)/α_0(φ_i) for the init eigenvectors i = 1…K, α_t(φ) = ‖J_tᵀφ‖² over train ∪ test "
                "(linearized-networks Fig. 7), and the index where it peaks",
                (Variable("rotation", "α_T(φ_i) / α_0(φ_i)", ("eigenfunction",)),
                 Variable("rotation_peak", "argmax_i α_T(φ_i)/α_0(φ_i)")),
                final.rotation, req.needs_eigen_labels, where_applicable=True,
                options=(Option("top_k", int, 100, "eigenfunctions K (at most the stage's top_k)", 1),)),
    Measurement("steps_to_threshold", "final", "first optimizer step at which the training loss reaches the "
                "threshold, interpolated between checkpoints (linearized-networks Figs. 3, 13)",
                (Variable("steps_to_threshold", "steps to training loss threshold"),), final.steps_to_threshold,
                depends_on=("loss",), options=(Option("threshold", float, 0.01, "training-loss level", 0.0,
                                                      open_low=True),), kernel_models=True),
    Measurement("param_distance", "final", "‖θ_T − θ_0‖₂ and 1 − cos(θ_T, θ_0) over the trainable parameters "
                "(linearized-networks Fig. 14)",
                (Variable("param_distance", "‖θ_T − θ_0‖₂"),
                 Variable("param_cosine_distance", "1 − cos(θ_T, θ_0)")), final.param_distance),
    Measurement("relative_kernel_change", "final",
                "‖K_T − K_0‖_F / ‖K_0‖_F: relative change of the train NTK Gram from init to the end of training "
                "(→ 0 in the kernel phase, O(1) with feature learning; solvable-model Sec. 3)",
                (Variable("relative_kernel_change", "‖K_T − K_0‖_F / ‖K_0‖_F"),), final.relative_kernel_change),
    Measurement("nad_alignment", "final", "predicted alignment σ_j² of the NAD v_j the data is built on "
                "(linearized-networks Theorem 1, Fig. 4 right)",
                (Variable("nad_alignment", "σ_j² (predicted alignment)"),), final.nad_alignment, req.needs_nad_data,
                where_applicable=True),
    Measurement("stein_check", "final", "Stein check of Theorem 1: relative error between the Monte-Carlo "
                "‖E[(uᵀx)∇θf(x)]‖² and ‖E[∇²ₓθf(x)]u‖² over stein_vector = 1…k, the top k NADs, then "
                "one random unit u (last)",
                (Variable("stein_relerr", "relative error of the Stein identity", ("stein_vector",)),),
                final.stein_check, req.needs_nad_data, where_applicable=True),
    Measurement("nad_directions", "final", "the first NADs as images (linearized-networks Fig. 10)",
                (Variable("nad_directions", "NAD v_j", ("nad", "row", "column", "channel")),),
                final.nad_directions, req.needs_image_nad_data, where_applicable=True,
                options=(Option("count", int, 10, "how many NADs", 1),)),
    Measurement("layer_alignment", "checkpoint", "layer alignment cos θ = u·w/(|u||w|), w = W n for the unit input "
                "direction n, and |u|, |w| of a two-layer net (solvable-model Sec. 2.2–2.3, Fig. 1)",
                (_series("layer_alignment", "layer alignment cos θ"), _series("readout_norm", "|u|"),
                 _series("hidden_norm", "|w| = |W n|")),
                checkpoint.layer_alignment, req.two_layers, architectures=MLP_ONLY),
    Measurement("solvable_theory", "final",
                "closed form of the solvable two-layer linear model on a line (solvable-model Sec. 2, STUDIES §3): "
                "cos θ(t) = f/√(f² + κ²A₀²), |u|, |w|, the loss and ‖K‖_F under gradient flow (NaN for other "
                "optimizers), the invariant's final alignment y/√(y² + κ²A₀²) and the learning speed λ with "
                "its target (4κ²η_uη_W y²) and init (κ⁴Δ₀) terms",
                (_series("layer_alignment_theory", "cos θ (theory)"), _series("readout_norm_theory", "|u| (theory)"),
                 _series("hidden_norm_theory", "|w| (theory)"), _series("loss_theory", "training loss (theory)"),
                 _series("kernel_norm_theory", "‖K‖_F (theory)"),
                 Variable("layer_alignment_invariant", "final cos θ predicted by the invariant A₀"),
                 Variable("layer_alignment_theory_error", "max_t |cos θ − cos θ (theory)|"),
                 Variable("learning_speed", "learning speed λ"),
                 Variable("learning_speed_target_term", "target term 4κ²η_uη_W y² of λ²"),
                 Variable("learning_speed_init_term", "init term κ⁴Δ₀ of λ²")),
                final.solvable_theory, req.solvable_model, architectures=MLP_ONLY, where_applicable=True),
    Measurement("weight_norm", "final", "Σ_ℓ ‖θ_ℓ‖₂, the sum of the layers' norms, after training and at init "
                "(solvable-model Fig. 2)",
                (Variable("weight_norm", "Σ_ℓ ‖θ_ℓ‖ after training"), Variable("weight_norm_init", "Σ_ℓ ‖θ_ℓ‖ at init")),
                final.weight_norm),
    Measurement("gamma_hat", "final", "γ̂: the OFE feature-learning rate whose final kernel K₀ + γ̂yyᵀ has the "
                "network's final alignment (kernel-alignment Figs. 2C–D, 5B)",
                (Variable("gamma_hat", "fitted feature-learning rate γ̂"),), final.gamma_hat,
                req.needs_trained_weights, depends_on=("alignment",), where_applicable=True),
    Measurement("ofe", "final", "the optimal-feature-evolution run's γ (γ̂ for ofe_fit), the max relative drift "
                "‖C(t) − C(0)‖_F/‖C(0)‖_F of C = γΔΔᵀ + K, and A(K∞, y) with K∞ = γyyᵀ + K₀ (Eqs. 6–7, 35)",
                (Variable("ofe_gamma", "OFE feature-learning rate γ"),
                 Variable("ofe_conservation_error", "max relative drift of C = γΔΔᵀ + K"),
                 Variable("ofe_final_alignment", "A(K∞, y), K∞ = γyyᵀ + K₀ (theory)")),
                final.ofe_numbers, req.needs_ofe, kernel_models=True, where_applicable=True),
    Measurement("traced_alignment", "checkpoint",
                "A(K_tr, YYᵀ) = ⟨K_tr, Σ_d y_d y_dᵀ⟩_F / (‖K_tr‖_F ‖YYᵀ‖_F) of the traced kernel K_tr = C⁻¹ Σ_c K^{c,c} "
                "(kernel-alignment Sec. 4.3); NaN at checkpoints it skips",
                (_series("traced_alignment", "traced-kernel alignment A(K_tr, YYᵀ)"),),
                checkpoint.traced_kernel_alignment, options=(_subset(0), _EVERY)),
    Measurement("kernel_specialization", "final",
                "kernel specialization matrix KSM(c, d) (kernel-alignment Eq. 9, Fig. 3) at the end and at init, "
                "and its mean diagonal over mean off-diagonal entry",
                (Variable("ksm", "KSM(c, d)", _KSM_DIMS),
                 Variable("ksm_init", "KSM(c, d) at init", _KSM_DIMS),
                 Variable("ksm_diagonal_ratio", "KSM mean diagonal / mean off-diagonal")),
                final.kernel_specialization, req.needs_several_outputs, options=(_subset(300),)),
    Measurement("kernel_components", "checkpoint",
                "readout (K_V) and hidden (K_W) NTK components along each target, y_dᵀK^{c,c}y_d/|y_d|², and "
                "their traces tr K^{c,c}/P, on a fixed training subset (kernel-alignment Figs. 6–7; NaN at "
                "checkpoints it skips), and the outputs on that subset at every checkpoint",
                (_series("kv_projection", "y_dᵀK_V^{c,c}y_d / |y_d|²", *_KSM_DIMS),
                 _series("kw_projection", "y_dᵀK_W^{c,c}y_d / |y_d|²", *_KSM_DIMS),
                 _series("kv_trace", "tr K_V^{c,c} / P", "output"),
                 _series("kw_trace", "tr K_W^{c,c} / P", "output"),
                 _series("subset_outputs", "f_c(x_μ) on the subset", "train_point", "output")),
                checkpoint.kernel_components, architectures=WITH_READOUT, options=(_subset(0), _EVERY)),
    Measurement("component_growth", "final",
                "growth of K_V and K_W along own (c = d) and other (c ≠ d) targets and its ratios: K_V along y vs "
                "its trace (≈ P/2, Eq. 16), K_W along y vs its trace (≈ 1), own vs other growth (K_W ≈ 2, Eq. 21; "
                "K_V ≈ 1)",
                (_series("kv_own_growth", "Δ y_cᵀK_V^{c,c}y_c / |y_c|² (mean over c)"),
                 _series("kv_other_growth", "Δ y_dᵀK_V^{c,c}y_d / |y_d|² (mean over c ≠ d)"),
                 _series("kw_own_growth", "Δ y_cᵀK_W^{c,c}y_c / |y_c|² (mean over c)"),
                 _series("kw_other_growth", "Δ y_dᵀK_W^{c,c}y_d / |y_d|² (mean over c ≠ d)"),
                 _series("kw_other_growth_theory", "½ · own K_W growth (Eq. 21)"),
                 Variable("kv_growth_ratio", "[ΔŷᵀK_Vŷ / Δ(tr K_V/P)] / (P/2)"),
                 Variable("kw_isotropy_ratio", "ΔŷᵀK_Wŷ / Δ(tr K_W/P)"),
                 Variable("kw_specialization_ratio", "K_W growth, own / other targets"),
                 Variable("kv_specialization_ratio", "K_V growth, own / other targets")),
                final.component_growth, depends_on=("kernel_components",), architectures=WITH_READOUT),
    Measurement("component_theory", "final",
                "ŷᵀK_Vŷ, tr K_V/P and ŷᵀK_Wŷ of a two-layer ReLU net from Eq. 16 (App. D.2) integrated with the "
                "measured outputs, and the relative error of the predicted ŷᵀK_Vŷ growth",
                (_series("kv_projection_theory", "ŷᵀK_Vŷ theory (Eq. 16)"),
                 _series("kv_trace_theory", "tr K_V / P theory (Eq. 16)"),
                 _series("kw_projection_theory", "ŷᵀK_Wŷ theory (Eq. 16)"),
                 Variable("kv_growth_theory_relerr", "|Δ theory − Δ measured| / |Δ measured| of ŷᵀK_Vŷ")),
                final.component_theory, req.relu_two_layer_theory, depends_on=("kernel_components",),
                architectures=MLP_ONLY, where_applicable=True),
]

REGISTRY: dict[str, Measurement] = {m.name: m for m in MEASUREMENTS}
VARIABLES: dict[str, Variable] = {v.name: v for m in MEASUREMENTS for v in m.variables}
ALWAYS_RECORDED = (Variable("diverged", "diverged"),)
