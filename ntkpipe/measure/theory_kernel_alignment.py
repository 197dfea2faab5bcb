"""Theory of kernel alignment (Shan & Bordelon 2022) against the measurements: the feature-learning
rate γ̂ of optimal feature evolution (OFE) that fits a network, an OFE run's own numbers, and the
components' growth of Eq. 16 integrated with the measured outputs."""

from __future__ import annotations

from ntkpipe.measure import requirements as req
from ntkpipe.measure.context import ModelView
from ntkpipe.measure.record import MLP_ONLY, Measurement, Variable, series, train_gram
from ntkpipe.theory import feature_evolution, relu_components


def _gamma_hat(run, traj, item) -> dict:
    """K₀ is the initial NTK of the unscaled network (γ²·K_g for a network rescaled by γ), Δ₀ = −y."""
    y = run.data.y_train.reshape(-1)
    k0 = ModelView(run.model0, run).gram_train * run.spec.model.gamma**2
    return {"gamma_hat": feature_evolution.fit_feature_rate(k0, -y, y, float(traj.series["alignment"][-1]))}


def _component_theory(run, traj, item) -> dict:
    series_ = traj.series
    initial = {"kv_projection": series_["kv_projection"][0, 0, 0], "kv_trace": series_["kv_trace"][0, 0],
               "kw_projection": series_["kw_projection"][0, 0, 0]}
    theory = relu_components.component_trajectories(traj.time, series_["subset_outputs"][:, :, 0],
                                                    run.data.y_train[:, 0], initial)
    measured = series_["kv_projection"][-1, 0, 0] - initial["kv_projection"]
    predicted = theory["kv_projection"][-1] - initial["kv_projection"]
    return {f"{name}_theory": value for name, value in theory.items()} | {
        "kv_growth_theory_relerr": float(abs(predicted - measured) / abs(measured))}


_SCALAR_OUTPUT = (("output", 1), ("target", 1))

MEASUREMENTS = [
    Measurement("gamma_hat", "final", "γ̂: the OFE feature-learning rate whose final kernel K₀ + γ̂yyᵀ has the "
                "network's final alignment (kernel-alignment Figs. 2C–D, 5B)",
                (Variable("gamma_hat", "fitted feature-learning rate γ̂"),), _gamma_hat,
                req.needs_trained_weights, depends_on=("alignment",), where_applicable=True, gram_points=train_gram),
    Measurement("ofe", "final", "the optimal-feature-evolution run's γ (γ̂ for ofe_fit), the max relative drift "
                "‖C(t) − C(0)‖_F/‖C(0)‖_F of C = γΔΔᵀ + K, and A(K∞, y) with K∞ = γyyᵀ + K₀ (Eqs. 6–7, 35)",
                (Variable("ofe_gamma", "OFE feature-learning rate γ",
                          description="the γ of Eq. 6 this OFE run used (the fitted γ̂ for ofe_fit; kernel-alignment Sec. 4.2)"),
                 Variable("ofe_conservation_error", "max relative drift of C = γΔΔᵀ + K",
                          description="max_t ‖C(t) − C(0)‖_F/‖C(0)‖_F of the conserved C = γΔΔᵀ + K "
                                      "(kernel-alignment App. B, Eq. 35): the integrator's error"),
                 Variable("ofe_final_alignment", "A(K∞, y), K∞ = γyyᵀ + K₀ (theory)", theory_of="alignment",
                          description="A(K∞, y) of the OFE's limit kernel K∞ = γyyᵀ + K₀ (kernel-alignment Eq. 7)")),
                lambda run, traj, item: {k: traj.finals[k] for k in
                                         ("ofe_gamma", "ofe_conservation_error", "ofe_final_alignment")},
                req.needs_ofe, kernel_models=True, where_applicable=True,
                assumptions="model.kind ofe or ofe_fit, MSE loss, full-batch GD; the limit t → ∞ (a finite run's "
                            "final alignment is still approaching it); NaN for other kinds"),
    Measurement("component_theory", "final",
                "ŷᵀK_Vŷ, tr K_V/P and ŷᵀK_Wŷ of a two-layer ReLU net from Eq. 16 (App. D.2) integrated with the "
                "measured outputs, and the relative error of the predicted ŷᵀK_Vŷ growth",
                (series("kv_projection_theory", "ŷᵀK_Vŷ theory (Eq. 16)", theory_of="kv_projection",
                        theory_at=_SCALAR_OUTPUT,
                        description="ŷᵀK_Vŷ from its initial value and the rate of kernel-alignment Eq. 16 (Eqs. 76–82) "
                                    "integrated with the measured outputs f(t)"),
                 series("kv_trace_theory", "tr K_V / P theory (Eq. 16)", theory_of="kv_trace",
                        theory_at=_SCALAR_OUTPUT[:1],
                        description="tr K_V/P from its initial value and the rate of kernel-alignment Eq. 16 "
                                    "integrated with the measured outputs f(t)"),
                 series("kw_projection_theory", "ŷᵀK_Wŷ theory (Eq. 16)", theory_of="kw_projection",
                        theory_at=_SCALAR_OUTPUT,
                        description="ŷᵀK_Wŷ from its initial value and the rate of kernel-alignment Eq. 86 "
                                    "integrated with the measured outputs f(t)"),
                 Variable("kv_growth_theory_relerr", "|Δ theory − Δ measured| / |Δ measured| of ŷᵀK_Vŷ",
                          description="|Δ theory − Δ measured| / |Δ measured| of the growth of ŷᵀK_Vŷ at the end")),
                _component_theory, req.relu_two_layer_theory, depends_on=("kernel_components",),
                architectures=MLP_ONLY, where_applicable=True,
                assumptions="scalar bias-free two-layer ReLU net (standard parameterization, output_scale 1, "
                            "model.kind network), MSE loss, full-batch GD without momentum at a constant rate, "
                            "components on all training points; unit-norm, nearly orthogonal inputs (App. D.2, "
                            "not checked); NaN otherwise"),
]
