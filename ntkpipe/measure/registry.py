"""The measurements a study may ask for: when each is taken, what it needs, what it stores.

``checkpoint`` measurements are taken at every checkpoint (their variables get a ``time``
dimension); ``final`` ones once per run, from the recorded series and the initial and final
models. Each stores one or more :class:`Variable`; figures and summaries refer to variables.
This table is also the single source of the variables' dataset attributes (:func:`variable_attrs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ntkpipe.data.dataset import output_count
from ntkpipe.lang.schema import KERNEL_KINDS, RunSpec
from ntkpipe.measure import checkpoint, final
from ntkpipe.measure import requirements as req
from ntkpipe.measure.options import Option
from ntkpipe.models import ARCHITECTURES

TIME_UNITS = "gradient-flow time t = η₀·step"
"""The unit of ``time`` and of times read off it (t½, …): η₀ is train.optimizer.lr."""


@dataclass(frozen=True)
class Variable:
    """A stored variable; ``dims`` are its own dimensions besides the sweep axes ("time" for series).

    ``label`` is its CF ``long_name`` (and the figures' label), ``units`` its unit where one exists,
    ``description`` the formula and the paper equation it implements (empty: its measurement's doc).
    A theory variable names the measured variable it predicts in ``theory_of``; ``theory_at`` selects
    the entry of the measured variable's own dimensions it is compared with (e.g. output 1).
    """

    name: str
    label: str
    dims: tuple[str, ...] = ()
    units: str | None = None
    description: str = ""
    theory_of: str | None = None
    theory_at: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Measurement:
    """One measurement: when it is taken, what it stores, what it needs.

    ``requires(run)`` says why a run cannot have it (None if it can); ``architectures`` lists the
    model architectures it reads (None: any); ``kernel_models`` says it reads only outputs and the
    NTK Gram, so kernel kinds (kgd, akgd, ofe, ofe_fit) have it too; ``options`` are its declared options, whose defaults
    validation fills into every run's config; ``depends_on`` names measurements whose series it reads;
    ``assumptions`` says under which conditions its theory variables hold (and are not NaN);
    ``check_options(options, given, run)`` says which option does not fit the run's data and why, as
    (option name, message), or None (``options``: every option's value, ``given``: the names the
    spec wrote); ``gram_points(options, run)`` is the number of examples in the largest NTK Gram it
    holds (0: none), which the job's memory estimate reads (:mod:`ntkpipe.resources`).
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
    assumptions: str | None = None
    check_options: Callable[[dict, frozenset, RunSpec], tuple[str, str] | None] = lambda options, given, run: None
    gram_points: Callable[[dict, RunSpec], int] = lambda options, run: 0

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


def _series(name, label, *dims, **attrs):
    return Variable(name, label, ("time", *dims), **attrs)


_PREDICTION_DIMS = ("test_point", "output")
_KSM_DIMS = ("output", "target")
MLP_ONLY = tuple(name for name, record in ARCHITECTURES.items() if record.mlp_weights)
WITH_READOUT = tuple(name for name, record in ARCHITECTURES.items() if record.readout)
_EVERY = Option("every", int, 0, "also at every k-th checkpoint (0: init and end only)", 0)
_SCALAR_OUTPUT = (("output", 1), ("target", 1))
_GRADIENT_FLOW = ("whitened data (data.gamma 0), no bias, standard parameterization, model.kind network, "
                  "model.gamma 1, MSE loss, full-batch GD with a constant schedule (gradient flow), one output")


def _subset(default: int) -> Option:
    return Option("subset", int, default, "training points in the kernel (the first n; 0: all)", 0)


def _train_gram(options: dict, run: RunSpec) -> int:
    return run.data.n_train


def _train_and_test_gram(options: dict, run: RunSpec) -> int:
    return run.data.n_train + run.data.n_test


def _subset_gram(options: dict, run: RunSpec) -> int:
    return checkpoint.subset_size(run.data.n_train, options["subset"])


def _subset_fits(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """A ``subset`` the spec gives is at most n_train (a default larger than n_train means all of them)."""
    subset, n = options["subset"], run.data.n_train
    if "subset" in given and subset > n:
        return "subset", (f"subset {subset} exceeds data.n_train {n}: the kernel is taken on the first subset "
                          f"training points; use subset <= {n}")
    return None


def _energy_options(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """subset ≤ n_train, and top_k ≤ the eigenvectors of the subset's Gram (subset × outputs)."""
    if (problem := _subset_fits(options, given, run)) is not None:
        return problem
    n, outputs = _subset_gram(options, run), output_count(run.data)
    if options["top_k"] > n * outputs:
        key = "top_k" if "top_k" in given or "subset" not in given else "subset"
        return key, (f"top_k {options['top_k']} exceeds the {n * outputs} eigenvectors of the Gram on {n} training "
                     f"points × {outputs} output(s) (subset {options['subset']}, data.n_train {run.data.n_train}); "
                     f"use top_k <= {n * outputs} or a larger subset")
    return None


def _rotation_options(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """top_k ≤ the eigenvectors of the Gram over train ∪ test (the label stage's top_k: its check)."""
    n, outputs = _train_and_test_gram(options, run), output_count(run.data)
    if options["top_k"] > n * outputs:
        return "top_k", (f"top_k {options['top_k']} exceeds the {n * outputs} eigenvectors of the init NTK over "
                         f"train ∪ test ((n_train + n_test) × outputs); use top_k <= {n * outputs}")
    return None


def _nad_count_fits(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """count ≤ the input dimension: there are as many NADs as input coordinates."""
    if run.data.shape is None:
        return None
    d = math.prod(run.data.shape)
    if options["count"] > d:
        return "count", (f"count {options['count']} exceeds the {d} NADs of inputs of shape {list(run.data.shape)} "
                         f"(one per input coordinate); use count <= {d}")
    return None


MEASUREMENTS = [
    Measurement("loss", "checkpoint", "training loss on the full training set (un-batched): mse L = (1/2P) Σ_μ "
                "|f(x_μ) − y_μ|² (silent-alignment Sec. 3), bce the mean of log(1 + e^{−y f}) on one logit",
                (_series("loss", "training loss"),), checkpoint.train_loss, kernel_models=True),
    Measurement("test_loss", "checkpoint", "loss on the test set, the training loss's formula on the test points",
                (_series("test_loss", "test loss"),), checkpoint.test_loss, req.needs_test, kernel_models=True),
    Measurement("train_accuracy", "checkpoint", "fraction of training points classified correctly: sign f = y "
                "for one output with ±1 labels (f ≥ 0 → +1), argmax for one-hot targets",
                (_series("train_accuracy", "train accuracy"),), checkpoint.train_accuracy, req.needs_classes, kernel_models=True,
                where_applicable=True),
    Measurement("test_accuracy", "checkpoint", "fraction of test points classified correctly: sign f = y for one "
                "output with ±1 labels (f ≥ 0 → +1), argmax for one-hot targets",
                (_series("test_accuracy", "test accuracy"),), checkpoint.test_accuracy,
                lambda r: req.needs_test(r) or req.needs_classes(r), kernel_models=True, where_applicable=True),
    Measurement("kernel_norm", "checkpoint", "Frobenius norm ‖K‖_F of the train NTK Gram K over (example, output) "
                "pairs, K = J Jᵀ with J = ∂f/∂θ (silent-alignment Fig. 1)",
                (_series("kernel_norm", "‖K‖_F"),), checkpoint.gram_norm, kernel_models=True,
                gram_points=_train_gram),
    Measurement("alignment", "checkpoint", "kernel alignment A = yᵀKy / (‖K‖_F ‖y‖²) of the train NTK Gram with "
                "the targets (Cortes et al. 2012; kernel-alignment Eq. 2); 1 iff K ∝ yyᵀ",
                (_series("alignment", "kernel alignment A(t)"),), checkpoint.gram_alignment, kernel_models=True,
                gram_points=_train_gram),
    Measurement("first_layer_alignment", "checkpoint", "cos(W₁ᵀW₁, ββᵀ) = βᵀW₁ᵀW₁β / (‖W₁ᵀW₁‖_F |β|²) with β the "
                "least-squares (teacher) direction (silent-alignment Fig. 3b, E.1c); 1 when W₁ is rank one along β",
                (_series("first_layer_alignment", "cos(W₁ᵀW₁, ββᵀ)"),), checkpoint.layer_one_alignment,
                req.needs_scalar_output, architectures=MLP_ONLY),
    Measurement("readout_norm_sq", "checkpoint", "u² = |a|², the squared readout norm (silent-alignment Eq. 8, C.4)",
                (_series("readout_norm_sq", "u² = |a|²"),), checkpoint.readout_norm_sq,
                architectures=MLP_ONLY),
    Measurement("teacher_overlaps", "checkpoint", "q = ½(|a|² + βᵀWᵀWβ), r = aᵀWβ of a two-layer net "
                "(silent-alignment App. C.1, Eq. 33)",
                (_series("q", "q(t)", description="q = ½(|a|² + βᵀWᵀWβ) of a two-layer net with readout a, first "
                         "layer W and teacher direction β (silent-alignment App. C.1, Eq. 33)"),
                 _series("r", "r(t)", description="r = aᵀWβ of a two-layer net with readout a, first layer W and "
                         "teacher direction β (silent-alignment App. C.1, Eq. 33)")),
                checkpoint.teacher_overlaps, req.two_layers, architectures=MLP_ONLY),
    Measurement("mode_strength", "checkpoint", "m_k = u_kᵀ Σ_fx v_k, the learned input-output map Σ_fx = Fᵀx/P "
                "along the k-th singular mode (u_k, s_k, v_k) of the target map (silent-alignment Fig. H.1)",
                (_series("mode_strength", "mode strength m_k", "mode"),), checkpoint.mode_strength, kernel_models=True),
    Measurement("t_half", "final", "t½: first time the training loss reaches half its initial value, "
                "interpolated between checkpoints (silent-alignment Fig. 3a)",
                (Variable("t_half", "t½", units=TIME_UNITS),), final.t_half, depends_on=("loss",), kernel_models=True),
    Measurement("t_align", "final", "first time cos(W₁ᵀW₁, ββᵀ) reaches the threshold option, interpolated "
                "between checkpoints (silent-alignment Fig. 3b)",
                (Variable("t_align", "t_align", units=TIME_UNITS),), final.t_align, depends_on=("first_layer_alignment",),
                options=(Option("threshold", float, 0.5, "level of cos(W₁ᵀW₁, ββᵀ)", -1.0, 1.0),)),
    Measurement("alignment_after_half", "final", "share of the total variation of A(t) that happens after t½: ≈ 0 "
                "when the kernel aligned silently before the loss fell (silent-alignment Fig. 4)",
                (Variable("alignment_after_half", "share of alignment change after t½"),),
                final.alignment_after_half, depends_on=("loss", "alignment"), kernel_models=True),
    Measurement("t_half_theory", "final",
                "t½ of the deep-linear gain ODE ċ = L c^{2−2/L}(s − c) (silent-alignment App. E.1), c₀ from the "
                "initial weights ((q₀ + r₀)/2 for two layers, |a₀|^L deeper), plus the irreducible loss",
                (Variable("t_half_theory", "t½ (theory)", units=TIME_UNITS, theory_of="t_half"),),
                final.t_half_theory, req.deep_linear_theory, architectures=MLP_ONLY, where_applicable=True,
                assumptions=f"deep linear net (activation linear, depth ≥ 2), {_GRADIENT_FLOW}; NaN otherwise, "
                            "or when c₀ ≥ s (the loss cannot halve)"),
    Measurement("eigenvalue", "final", "eigenvalue λ_j of the init-NTK eigenvector φ_j whose sign gives the labels "
                "(linearized-networks Sec. 3.1); by Lemma 1 it equals α(φ_j)",
                (Variable("eigenvalue", "λ_j", theory_of="alignment_init"),), final.label_eigenvalue,
                req.needs_eigen_labels, where_applicable=True,
                assumptions="labels are the sign of an eigenvector of the init NTK Gram over train ∪ test "
                            "(data.labels.kind eigenvector_sign); NaN for other labels"),
    Measurement("alignment_init", "final", "α(φ_j) = ‖Σ_x φ_j(x) ∇θ f(x)‖² at init over train ∪ test, from the "
                "Jacobian (linearized-networks Lemma 1)",
                (Variable("alignment_init", "α(φ_j)"),), final.label_alignment, req.needs_eigen_labels,
                where_applicable=True),
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
                final.predictors, req.needs_test,
                options=(Option("ridge", float, 0.0, "ridge λ relative to the mean kernel diagonal", 0.0),
                         Option("rcond", float, 1e-10, "eigenvalue cutoff relative to λ_max", 0.0, 1.0,
                                open_low=True, open_high=True)), gram_points=_train_and_test_gram),
    Measurement("input_spectrum", "final", "nonzero eigenvalues (above 1e-10 λ_max) of XᵀX/P of the (whitened) "
                "training inputs, descending (silent-alignment Fig. 4a)",
                (Variable("input_spectrum", "eigenvalue of XᵀX/P", ("spectrum_index",)),), final.input_spectrum, kernel_models=True),
    Measurement("two_layer_theory", "final",
                "q(t), r(t) (Eq. 50–51) and u(t)² (Eq. C.4) and the simulation's largest deviation from them",
                (_series("q_theory", "q(t) theory", theory_of="q",
                         description="q(t) of Eq. 50–51 (silent-alignment App. C) from the measured q₀, r₀"),
                 _series("r_theory", "r(t) theory", theory_of="r",
                         description="r(t) of Eq. 50–51 (silent-alignment App. C) from the measured q₀, r₀"),
                 _series("readout_norm_sq_theory", "u² theory", theory_of="readout_norm_sq",
                         description="u(t)² of Eq. C.4, the two-layer gain ODE from u₀² = (q₀ + r₀)/2 (App. C.5)"),
                 Variable("q_max_relerr", "max |q − q_theory| / max q_theory",
                          description="max_t |q − q_theory| / max_t |q_theory|: the simulation's largest deviation "
                                      "from Eq. 50–51"),
                 Variable("r_max_relerr", "max |r − r_theory| / max r_theory",
                          description="max_t |r − r_theory| / max_t |r_theory|: the simulation's largest deviation "
                                      "from Eq. 50–51"),
                 Variable("readout_norm_sq_max_relerr", "max |u² − u²_theory| / max u²_theory",
                          description="max_t |u² − u²_theory| / max_t |u²_theory|: the simulation's largest deviation "
                                      "from Eq. C.4")),
                final.overlaps_theory, req.two_layer_linear_theory,
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
                final.final_ntk, req.final_ntk_theory, architectures=MLP_ONLY, where_applicable=True,
                assumptions="deep linear net (activation linear, no bias, depth ≥ 2, standard parameterization, "
                            "model.kind network, one output) trained to convergence from small balanced init; NaN otherwise"),
    Measurement("min_norm_error", "final", "|w − w_min| / |w_min|: distance of the learned linear map w from the "
                "min-norm interpolant w_min = X(XᵀX)⁻¹y (silent-alignment App. E.3)",
                (Variable("min_norm_relerr", "|w − w_min| / |w_min|"),), final.min_norm_error, req.linear_network,
                architectures=MLP_ONLY),
    Measurement("alignment_theory", "final", "final alignment A(X M∞ Xᵀ, y) of a depth-L linear net, M∞ of "
                "silent-alignment Eq. 63 (Fig. 1a, E.1b)",
                (Variable("alignment_theory", "final alignment (linear-net theory)", theory_of="alignment"),),
                final.alignment_theory, req.needs_scalar_output, architectures=MLP_ONLY, where_applicable=True,
                assumptions="a deep linear net trained to convergence from small init (activation linear); computed "
                            "for every one-output MLP run, NaN for several outputs; compare only where it applies",
                gram_points=_train_gram),
    Measurement("mode_strength_theory", "final", "per-mode deep-linear ODE trajectories and targets s_k",
                (_series("mode_strength_theory", "mode strength (theory)", "mode", theory_of="mode_strength",
                         description="each target mode k follows ċ = L c^{2−2/L}(s_k − c) (Saxe et al. 2014; "
                                     "silent-alignment App. H, Fig. H.1) from c₀ of the initial weights"),
                 Variable("mode_target", "target singular value s_k", ("mode",),
                          description="singular values s_k of the target map Σ_yx = Yᵀx/P, the modes' asymptotes")),
                final.mode_strength_theory, req.deep_linear_modes_theory, depends_on=("mode_strength",),
                architectures=MLP_ONLY, where_applicable=True,
                assumptions="deep linear net (activation linear, depth ≥ 2), whitened data (data.gamma 0), no bias, "
                            "standard parameterization, model.kind network, model.gamma 1, MSE loss, GD with a "
                            "constant schedule; NaN otherwise, and for a mode whose initial strength is not below its target "
                            "(0 < c_k(0) < s_k, the small-init regime)"),
    Measurement("energy_concentration", "checkpoint",
                "‖Φ_Kᵀy‖/‖y‖: share of the targets on the top-K eigenvectors of the current Gram, on a fixed "
                "training subset (linearized-networks Sec. 4.2, Table 1); NaN at checkpoints it skips",
                (_series("energy_concentration", "energy concentration ‖Φ_Kᵀy‖/‖y‖"),), checkpoint.energy,
                options=(Option("top_k", int, 50, "eigenvectors K", 1),
                         Option("subset", int, 500, "training points in the Gram (the first n)", 2),
                         Option("every", int, 0, "also at every k-th checkpoint (0: init and end only)", 0)),
                kernel_models=True, check_options=_energy_options, gram_points=_subset_gram),
    Measurement("rotation", "final",
                "α_T(φ_i)/α_0(φ_i) for the init eigenvectors i = 1…K, α_t(φ) = ‖J_tᵀφ‖² over train ∪ test "
                "(linearized-networks Fig. 7), and the index where it peaks",
                (Variable("rotation", "α_T(φ_i) / α_0(φ_i)", ("eigenfunction",),
                          description="α_T(φ_i)/α_0(φ_i), α_t(φ) = ‖J_tᵀφ‖² over train ∪ test, for the init NTK "
                                      "eigenvectors φ_i (linearized-networks Fig. 7, Lemma 1: α_0(φ_i) = λ_i)"),
                 Variable("rotation_peak", "argmax_i α_T(φ_i)/α_0(φ_i)",
                          description="the eigenfunction index i (from 1) where α_T(φ_i)/α_0(φ_i) peaks")),
                final.rotation, req.needs_eigen_labels, where_applicable=True,
                options=(Option("top_k", int, 100, "eigenfunctions K (at most the stage's top_k)", 1),),
                check_options=_rotation_options),
    Measurement("steps_to_threshold", "final", "first optimizer step at which the training loss reaches the "
                "threshold, interpolated between checkpoints (linearized-networks Figs. 3, 13)",
                (Variable("steps_to_threshold", "steps to training loss threshold", units="optimizer steps"),),
                final.steps_to_threshold,
                depends_on=("loss",), options=(Option("threshold", float, 0.01, "training-loss level", 0.0,
                                                      open_low=True),), kernel_models=True),
    Measurement("param_distance", "final", "‖θ_T − θ_0‖₂ and 1 − cos(θ_T, θ_0) over the trainable parameters "
                "(linearized-networks Fig. 14)",
                (Variable("param_distance", "‖θ_T − θ_0‖₂",
                          description="‖θ_T − θ_0‖₂ over the trainable parameters (a linearization's θ_0 is its origin; "
                                      "linearized-networks Fig. 14)"),
                 Variable("param_cosine_distance", "1 − cos(θ_T, θ_0)",
                          description="1 − θ_T·θ_0/(‖θ_T‖‖θ_0‖) over the trainable parameters "
                                      "(linearized-networks Fig. 14)")), final.param_distance),
    Measurement("relative_kernel_change", "final",
                "‖K_T − K_0‖_F / ‖K_0‖_F: relative change of the train NTK Gram from init to the end of training "
                "(→ 0 in the kernel phase, O(1) with feature learning; solvable-model Sec. 3)",
                (Variable("relative_kernel_change", "‖K_T − K_0‖_F / ‖K_0‖_F"),), final.relative_kernel_change,
                gram_points=_train_gram),
    Measurement("nad_alignment", "final", "predicted alignment σ_j² of the NAD v_j the data is built on "
                "(linearized-networks Theorem 1, Fig. 4 right)",
                (Variable("nad_alignment", "σ_j² (predicted alignment)"),), final.nad_alignment, req.needs_nad_data,
                where_applicable=True),
    Measurement("stein_check", "final", "Stein check of Theorem 1: relative error between the Monte-Carlo "
                "‖E[(uᵀx)∇θf(x)]‖² and ‖E[∇²ₓθf(x)]u‖² over stein_vector = 1…k, the top k NADs, then "
                "one random unit u (last)",
                (Variable("stein_relerr", "relative error of the Stein identity", ("stein_vector",)),),
                final.stein_check, req.needs_nad_data, where_applicable=True),
    Measurement("nad_directions", "final", "the first NADs v_j (right singular vectors of ∇²ₓθ f) as images "
                "(linearized-networks Fig. 10)",
                (Variable("nad_directions", "NAD v_j", ("nad", "row", "column", "channel")),),
                final.nad_directions, req.needs_image_nad_data, where_applicable=True,
                options=(Option("count", int, 10, "how many NADs", 1),), check_options=_nad_count_fits),
    Measurement("layer_alignment", "checkpoint", "layer alignment cos θ = u·w/(|u||w|), w = W n for the unit input "
                "direction n, and |u|, |w| of a two-layer net (solvable-model Sec. 2.2–2.3, Fig. 1)",
                (_series("layer_alignment", "layer alignment cos θ",
                         description="cos θ = u·w/(|u||w|) of a two-layer net: readout u, w = W n the hidden "
                                     "pre-activation of the unit input direction n (solvable-model Sec. 2.2, Fig. 1)"),
                 _series("readout_norm", "|u|", description="|u|, the readout norm of a two-layer net "
                         "(solvable-model Sec. 2.3: learning by rescaling)"),
                 _series("hidden_norm", "|w| = |W n|", description="|w| = |W n| for the unit input direction n "
                         "(solvable-model Sec. 2.3)")),
                checkpoint.layer_alignment, req.two_layers, architectures=MLP_ONLY),
    Measurement("solvable_theory", "final",
                "closed form of the solvable two-layer linear model on a line (solvable-model Sec. 2, STUDIES §3): "
                "cos θ(t) = f/√(f² + κ²A₀²), |u|, |w|, the loss and ‖K‖_F under gradient flow (NaN for other "
                "optimizers), the invariant's final alignment y/√(y² + κ²A₀²) and the learning speed λ with "
                "its target (4κ²η_uη_W y²) and init (κ⁴Δ₀) terms",
                (_series("layer_alignment_theory", "cos θ (theory)", theory_of="layer_alignment",
                         description="cos θ(t) = f/√(f² + κ²A₀²) of the solvable model under gradient flow "
                                     "(solvable-model Sec. 2.2, Eq. 5)"),
                 _series("readout_norm_theory", "|u| (theory)", theory_of="readout_norm",
                         description="|u(t)| of the solvable model's closed form under gradient flow (solvable-model Sec. 2)"),
                 _series("hidden_norm_theory", "|w| (theory)", theory_of="hidden_norm",
                         description="|w(t)| = |W(t) n| of the solvable model's closed form under gradient flow "
                                     "(solvable-model Sec. 2)"),
                 _series("loss_theory", "training loss (theory)", theory_of="loss",
                         description="½(f(t) − y*)² plus the irreducible loss of the points' spread on the line, "
                                     "from the closed form (solvable-model Sec. 2)"),
                 _series("kernel_norm_theory", "‖K‖_F (theory)", theory_of="kernel_norm",
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
                final.solvable_theory, req.solvable_model, architectures=MLP_ONLY, where_applicable=True,
                assumptions="two-layer linear net f = κuᵀWx (no bias, standard parameterization, model.kind network, "
                            "model.gamma 1, MSE loss) on data on a line (linear_teacher, inputs line), one output; "
                            "the series also need gradient flow (full-batch GD, constant schedule); NaN otherwise"),
    Measurement("weight_norm", "final", "Σ_ℓ ‖θ_ℓ‖₂, the sum of the layers' norms, after training and at init "
                "(solvable-model Fig. 2)",
                (Variable("weight_norm", "Σ_ℓ ‖θ_ℓ‖ after training",
                          description="Σ_ℓ ‖θ_ℓ‖₂ over weight layers ℓ (weights and bias) after training "
                                      "(solvable-model Fig. 2: learning by disalignment)"),
                 Variable("weight_norm_init", "Σ_ℓ ‖θ_ℓ‖ at init",
                          description="Σ_ℓ ‖θ_ℓ‖₂ over weight layers ℓ (weights and bias) at init (solvable-model Fig. 2)")),
                final.weight_norm),
    Measurement("gamma_hat", "final", "γ̂: the OFE feature-learning rate whose final kernel K₀ + γ̂yyᵀ has the "
                "network's final alignment (kernel-alignment Figs. 2C–D, 5B)",
                (Variable("gamma_hat", "fitted feature-learning rate γ̂"),), final.gamma_hat,
                req.needs_trained_weights, depends_on=("alignment",), where_applicable=True, gram_points=_train_gram),
    Measurement("ofe", "final", "the optimal-feature-evolution run's γ (γ̂ for ofe_fit), the max relative drift "
                "‖C(t) − C(0)‖_F/‖C(0)‖_F of C = γΔΔᵀ + K, and A(K∞, y) with K∞ = γyyᵀ + K₀ (Eqs. 6–7, 35)",
                (Variable("ofe_gamma", "OFE feature-learning rate γ",
                          description="the γ of Eq. 6 this OFE run used (the fitted γ̂ for ofe_fit; kernel-alignment Sec. 4.2)"),
                 Variable("ofe_conservation_error", "max relative drift of C = γΔΔᵀ + K",
                          description="max_t ‖C(t) − C(0)‖_F/‖C(0)‖_F of the conserved C = γΔΔᵀ + K "
                                      "(kernel-alignment App. B, Eq. 35): the integrator's error"),
                 Variable("ofe_final_alignment", "A(K∞, y), K∞ = γyyᵀ + K₀ (theory)", theory_of="alignment",
                          description="A(K∞, y) of the OFE's limit kernel K∞ = γyyᵀ + K₀ (kernel-alignment Eq. 7)")),
                final.ofe_numbers, req.needs_ofe, kernel_models=True, where_applicable=True,
                assumptions="model.kind ofe or ofe_fit, MSE loss, full-batch GD; the limit t → ∞ (a finite run's "
                            "final alignment is still approaching it); NaN for other kinds"),
    Measurement("traced_alignment", "checkpoint",
                "A(K_tr, YYᵀ) = ⟨K_tr, Σ_d y_d y_dᵀ⟩_F / (‖K_tr‖_F ‖YYᵀ‖_F) of the traced kernel K_tr = C⁻¹ Σ_c K^{c,c} "
                "(kernel-alignment Sec. 4.3); NaN at checkpoints it skips",
                (_series("traced_alignment", "traced-kernel alignment A(K_tr, YYᵀ)"),),
                checkpoint.traced_kernel_alignment, options=(_subset(0), _EVERY),
                check_options=_subset_fits, gram_points=_subset_gram),
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
                final.kernel_specialization, req.needs_several_outputs, options=(_subset(300),),
                check_options=_subset_fits, gram_points=_subset_gram),
    Measurement("kernel_components", "checkpoint",
                "readout (K_V) and hidden (K_W) NTK components along each target, y_dᵀK^{c,c}y_d/|y_d|², and "
                "their traces tr K^{c,c}/P, on a fixed training subset (kernel-alignment Figs. 6–7; NaN at "
                "checkpoints it skips), and the outputs on that subset at every checkpoint",
                (_series("kv_projection", "y_dᵀK_V^{c,c}y_d / |y_d|²", *_KSM_DIMS,
                         description="y_dᵀK_V^{c,c}y_d/|y_d|² of the readout NTK component K_V per output c and target d "
                                     "(kernel-alignment Sec. 6, Figs. 6–7); NaN at checkpoints it skips"),
                 _series("kw_projection", "y_dᵀK_W^{c,c}y_d / |y_d|²", *_KSM_DIMS,
                         description="y_dᵀK_W^{c,c}y_d/|y_d|² of the hidden NTK component K_W per output c and target d "
                                     "(kernel-alignment Sec. 6, Figs. 6–7); NaN at checkpoints it skips"),
                 _series("kv_trace", "tr K_V^{c,c} / P", "output",
                         description="tr K_V^{c,c}/P, the readout component's mean diagonal per output c (kernel-alignment Sec. 6)"),
                 _series("kw_trace", "tr K_W^{c,c} / P", "output",
                         description="tr K_W^{c,c}/P, the hidden component's mean diagonal per output c (kernel-alignment Sec. 6)"),
                 _series("subset_outputs", "f_c(x_μ) on the subset", "train_point", "output",
                         description="the network's outputs f_c(x_μ) on the subset's training points (Eq. 16 integrates them)")),
                checkpoint.kernel_components, req.hidden_layer, architectures=WITH_READOUT, options=(_subset(0), _EVERY),
                check_options=_subset_fits, gram_points=_subset_gram),
    Measurement("component_growth", "final",
                "growth of K_V and K_W along own (c = d) and other (c ≠ d) targets and its ratios: K_V along y vs "
                "its trace (≈ P/2, Eq. 16), K_W along y vs its trace (≈ 1), own vs other growth (K_W ≈ 2, Eq. 21; "
                "K_V ≈ 1)",
                (_series("kv_own_growth", "Δ y_cᵀK_V^{c,c}y_c / |y_c|² (mean over c)",
                         description="y_cᵀK_V^{c,c}y_c/|y_c|² minus its initial value, mean over outputs c (kernel-alignment Sec. 6)"),
                 _series("kv_other_growth", "Δ y_dᵀK_V^{c,c}y_d / |y_d|² (mean over c ≠ d)",
                         description="y_dᵀK_V^{c,c}y_d/|y_d|² minus its initial value, mean over c ≠ d (NaN for one output)"),
                 _series("kw_own_growth", "Δ y_cᵀK_W^{c,c}y_c / |y_c|² (mean over c)",
                         description="y_cᵀK_W^{c,c}y_c/|y_c|² minus its initial value, mean over outputs c (kernel-alignment Sec. 6)"),
                 _series("kw_other_growth", "Δ y_dᵀK_W^{c,c}y_d / |y_d|² (mean over c ≠ d)",
                         description="y_dᵀK_W^{c,c}y_d/|y_d|² minus its initial value, mean over c ≠ d (NaN for one output)"),
                 _series("kw_other_growth_theory", "½ · own K_W growth (Eq. 21)", theory_of="kw_other_growth",
                         description="½ × the own-target K_W growth: the other-target growth kernel-alignment Eq. 21 predicts"),
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
                final.component_growth, depends_on=("kernel_components",), architectures=WITH_READOUT,
                assumptions="Eq. 21 holds for a two-layer ReLU net with C one-hot outputs early in training "
                            "(kernel-alignment Sec. 6.2); computed for every run with kernel_components, NaN for one output"),
    Measurement("component_theory", "final",
                "ŷᵀK_Vŷ, tr K_V/P and ŷᵀK_Wŷ of a two-layer ReLU net from Eq. 16 (App. D.2) integrated with the "
                "measured outputs, and the relative error of the predicted ŷᵀK_Vŷ growth",
                (_series("kv_projection_theory", "ŷᵀK_Vŷ theory (Eq. 16)", theory_of="kv_projection",
                         theory_at=_SCALAR_OUTPUT,
                         description="ŷᵀK_Vŷ from its initial value and the rate of kernel-alignment Eq. 16 (Eqs. 76–82) "
                                     "integrated with the measured outputs f(t)"),
                 _series("kv_trace_theory", "tr K_V / P theory (Eq. 16)", theory_of="kv_trace",
                         theory_at=_SCALAR_OUTPUT[:1],
                         description="tr K_V/P from its initial value and the rate of kernel-alignment Eq. 16 "
                                     "integrated with the measured outputs f(t)"),
                 _series("kw_projection_theory", "ŷᵀK_Wŷ theory (Eq. 16)", theory_of="kw_projection",
                         theory_at=_SCALAR_OUTPUT,
                         description="ŷᵀK_Wŷ from its initial value and the rate of kernel-alignment Eq. 86 "
                                     "integrated with the measured outputs f(t)"),
                 Variable("kv_growth_theory_relerr", "|Δ theory − Δ measured| / |Δ measured| of ŷᵀK_Vŷ",
                          description="|Δ theory − Δ measured| / |Δ measured| of the growth of ŷᵀK_Vŷ at the end")),
                final.component_theory, req.relu_two_layer_theory, depends_on=("kernel_components",),
                architectures=MLP_ONLY, where_applicable=True,
                assumptions="scalar bias-free two-layer ReLU net (standard parameterization, output_scale 1, "
                            "model.kind network), MSE loss, full-batch GD without momentum at a constant rate, "
                            "components on all training points; unit-norm, nearly orthogonal inputs (App. D.2, "
                            "not checked); NaN otherwise"),
]

REGISTRY: dict[str, Measurement] = {m.name: m for m in MEASUREMENTS}
VARIABLES: dict[str, Variable] = {v.name: v for m in MEASUREMENTS for v in m.variables}
ALWAYS_RECORDED = (Variable("diverged", "diverged", description="1 if at a checkpoint the training loss or the "
                            "parameters became non-finite or the loss exceeded train.divergence_factor (default 1e6) "
                            "times its initial loss: the run stopped there, its later series and final measurements "
                            "are NaN, however finite it would have looked later; or if its last loss exceeds 10 "
                            "times its initial loss (series kept); else 0"),)
_OWNER: dict[str, Measurement] = {v.name: m for m in MEASUREMENTS for v in m.variables}


def variable_attrs(name: str) -> dict[str, str]:
    """CF-style attrs of a registered variable: ``long_name``, ``units`` (where one exists),
    ``description`` (formula and paper equation), and for theory variables ``theory_of`` and
    ``assumptions`` (when it holds and is not NaN). Raises KeyError for an unregistered name."""
    recorded = {v.name: v for v in ALWAYS_RECORDED}
    variable = VARIABLES[name] if name in VARIABLES else recorded[name]
    owner = _OWNER.get(name)
    attrs = {"long_name": variable.label, "description": variable.description or owner.doc}
    if variable.units:
        attrs["units"] = variable.units
    if variable.theory_of:
        attrs["theory_of"] = variable.theory_of
        attrs["assumptions"] = owner.assumptions
    return attrs
