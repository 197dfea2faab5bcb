"""The measurements a study may ask for, what each needs, and how figures label it.

``series`` measurements are taken at every checkpoint (a ``time`` dimension); ``scalar`` ones once per
run. ``requires`` returns why a run cannot have the measurement (or None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from ntkpipe.spec.schema import RunSpec


@dataclass(frozen=True)
class Measurement:
    name: str
    kind: Literal["series", "scalar"]
    label: str
    doc: str
    requires: Callable[[RunSpec], str | None] = lambda run: None
    depends_on: tuple[str, ...] = ()


def _needs_test(run: RunSpec) -> str | None:
    return None if run.data.n_test > 0 else "needs test points: set data.n_test > 0"


def _needs_classes(run: RunSpec) -> str | None:
    if run.data.source == "linear_teacher" and run.data.labels.kind == "default":
        return "needs class labels; data.source 'linear_teacher' is a regression task"
    return None


def _needs_teacher(run: RunSpec) -> str | None:
    if run.data.source != "linear_teacher":
        return "needs a teacher direction β: set data.source to 'linear_teacher'"
    return None


def _needs_eigen_labels(run: RunSpec) -> str | None:
    if run.data.labels.kind != "eigenvector_sign":
        return "needs data.labels.kind 'eigenvector_sign' (it measures the label eigenvector)"
    return None


def _deep_linear_theory(run: RunSpec) -> str | None:
    checks = [
        (run.data.source == "linear_teacher", "data.source 'linear_teacher'"),
        (run.data.gamma == 0.0, "whitened data (data.gamma: 0)"),
        (run.model.activation == "linear", "model.activation 'linear'"),
        (not run.model.bias, "model.bias false"),
        (run.model.parameterization == "standard", "model.parameterization 'standard'"),
        (run.model.kind == "network", "model.kind 'network'"),
        (run.model.depth >= 2, "model.depth >= 2"),
        (run.train.loss == "mse", "train.loss 'mse'"),
        (run.train.optimizer.name == "gd" and run.train.optimizer.schedule == "constant",
         "train.optimizer 'gd' with a constant schedule (gradient flow)"),
    ]
    missing = [what for ok, what in checks if not ok]
    return f"the deep-linear ODE applies only with {', '.join(missing)}" if missing else None


REGISTRY: dict[str, Measurement] = {
    m.name: m
    for m in [
        Measurement("loss", "series", "training loss", "training loss on the full training set"),
        Measurement("test_loss", "series", "test loss", "loss on the test set", _needs_test),
        Measurement("train_accuracy", "series", "train accuracy", "accuracy on the training set", _needs_classes),
        Measurement("test_accuracy", "series", "test accuracy", "accuracy on the test set",
                    lambda r: _needs_test(r) or _needs_classes(r)),
        Measurement("kernel_norm", "series", "‖K‖_F", "Frobenius norm of the train NTK Gram"),
        Measurement("alignment", "series", "kernel alignment A(t)", "yᵀKy / (‖K‖_F ‖y‖²) on the train set"),
        Measurement("first_layer_alignment", "series", "cos(W₁ᵀW₁, ββᵀ)",
                    "alignment of the first layer with the teacher direction", _needs_teacher),
        Measurement("t_half", "scalar", "t½", "first time the loss reaches half its initial value",
                    depends_on=("loss",)),
        Measurement("t_align", "scalar", "t_align",
                    "first time cos(W₁ᵀW₁, ββᵀ) reaches the threshold (default ½)",
                    depends_on=("first_layer_alignment",)),
        Measurement("t_half_theory", "scalar", "t½ (theory)",
                    "t½ from the deep-linear ODE ċ = L c^{2-2/L}(s − c), c₀ = |a₀|^L",
                    _deep_linear_theory),
        Measurement("eigenvalue", "scalar", "λ_j", "eigenvalue of the label eigenvector", _needs_eigen_labels),
        Measurement("alignment_init", "scalar", "α(φ_j)",
                    "‖Σ_x φ_j(x) ∇θ f(x)‖² at init, from the Jacobian", _needs_eigen_labels),
    ]
}
