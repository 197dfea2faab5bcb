"""What each measurement needs of a run; each check returns why a run cannot have it, or None."""

from __future__ import annotations

from typing import cast

from ntkpipe.data.dataset import output_count
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import MlpSpec, RunSpec


def needs_test(run: RunSpec) -> str | None:
    if not MODEL_KINDS[run.model.kind].test_outputs:
        return f"needs test predictions; model.kind {run.model.kind!r} (Eq. 6) evolves the training outputs only"
    return None if run.data.n_test > 0 else "needs test points: set data.n_test > 0"


def needs_ofe(run: RunSpec) -> str | None:
    ofe = [name for name, kind in MODEL_KINDS.items() if "ofe_gamma" in kind.finals]
    return None if run.model.kind in ofe else f"applies only with model.kind {' or '.join(map(repr, ofe))}"


def needs_trained_weights(run: RunSpec) -> str | None:
    return None if not MODEL_KINDS[run.model.kind].kernel else (
        f"reads the trained network; model.kind {run.model.kind!r} evolves a kernel")


def needs_classes(run: RunSpec) -> str | None:
    if run.data.source == "linear_teacher" and run.data.labels.kind == "default":
        return "needs class labels; data.source 'linear_teacher' is a regression task"
    return None


def needs_scalar_output(run: RunSpec) -> str | None:
    if output_count(run.data) != 1:
        return "needs one network output (a teacher direction β); this task has several"
    return None


def needs_several_outputs(run: RunSpec) -> str | None:
    if output_count(run.data) < 2:
        return ("needs several network outputs C >= 2 (one per class: data.classes with 3 or more); "
                "this task has one")
    return None


def needs_eigen_labels(run: RunSpec) -> str | None:
    if run.data.labels.kind != "eigenvector_sign":
        return "needs data.labels.kind 'eigenvector_sign' (it measures the label eigenvector)"
    return None


def _mlp(run: RunSpec) -> MlpSpec:
    """The model of ``run`` for the checks of measurements on MLP weights: :meth:`Measurement.unmet
    <ntkpipe.measure.record.Measurement.unmet>` checks ``architectures=MLP_ONLY`` before them."""
    return cast(MlpSpec, run.model)


def _missing(checks: list[tuple[bool, str]]) -> str | None:
    missing = [what for ok, what in checks if not ok]
    return f"applies only with {', '.join(missing)}" if missing else None


def _gradient_flow_checks(run: RunSpec) -> list[tuple[bool, str]]:
    return [
        (run.data.gamma == 0.0, "whitened data (data.gamma: 0)"),
        (not run.model.bias, "model.bias false"),
        (run.model.parameterization == "standard", "model.parameterization 'standard'"),
        (run.model.kind == "network", "model.kind 'network'"),
        (run.model.gamma == 1.0, "model.gamma 1"),
        (run.train.loss == "mse", "train.loss 'mse'"),
        (run.train.optimizer.name == "gd" and run.train.optimizer.schedule == "constant",
         "train.optimizer 'gd' with a constant schedule (gradient flow)"),
    ]


def deep_linear_theory(run: RunSpec) -> str | None:
    """The deep-linear gradient-flow theory (silent-alignment Sec. 3–4) needs its assumptions."""
    return _missing(_gradient_flow_checks(run) + [
        (run.model.activation == "linear", "model.activation 'linear'"),
        (_mlp(run).depth >= 2, "model.depth >= 2"),
    ]) or needs_scalar_output(run)


def deep_linear_modes_theory(run: RunSpec) -> str | None:
    """Per-mode deep-linear theory for several outputs (Saxe et al.; silent-alignment App. H)."""
    return _missing(_gradient_flow_checks(run) + [
        (run.model.activation == "linear", "model.activation 'linear'"),
        (_mlp(run).depth >= 2, "model.depth >= 2"),
    ])


def final_ntk_theory(run: RunSpec) -> str | None:
    """K∞ of a deep linear net needs only balance and convergence from small init (App. E.2)."""
    return _missing([(run.model.parameterization == "standard", "model.parameterization 'standard'"),
                     (_mlp(run).depth >= 2, "model.depth >= 2")]) or linear_network(run)


def two_layer_linear_theory(run: RunSpec) -> str | None:
    """Closed forms of the two-layer linear net (silent-alignment App. C)."""
    return deep_linear_theory(run) or _missing([(_mlp(run).depth == 2, "model.depth 2")])


def linear_network(run: RunSpec) -> str | None:
    return _missing([(run.model.activation == "linear", "model.activation 'linear'"),
                     (not run.model.bias, "model.bias false"),
                     (run.model.kind == "network", "model.kind 'network'")]) or needs_scalar_output(run)


def hidden_layer(run: RunSpec) -> str | None:
    """The hidden NTK component K_W needs a layer below the readout."""
    return None if run.model.weight_layers >= 2 else "needs a hidden layer (model.depth >= 2 for an mlp)"


def two_layers(run: RunSpec) -> str | None:
    return (_missing([(_mlp(run).depth == 2, "model.depth 2"), (not run.model.bias, "model.bias false")])
            or needs_scalar_output(run))


def needs_nad_data(run: RunSpec) -> str | None:
    return None if run.data.source == "nad" else "needs data.source 'nad' (it reads the data's NAD stage)"


def needs_image_nad_data(run: RunSpec) -> str | None:
    if run.data.source != "nad" or len(run.data.shape) != 3:
        return "needs data.source 'nad' with an image shape [rows, columns, channels]"
    return None


def relu_two_layer_theory(run: RunSpec) -> str | None:
    """Eq. 16 of kernel-alignment Sec. 6.1: a scalar bias-free two-layer ReLU net under full-batch
    gradient flow on the MSE, its components measured on all training points. The theory also takes
    unit-norm, nearly orthogonal inputs (App. D.2), which the spec does not say."""
    item = next((m for m in run.measure if m.name == "kernel_components"), None)
    subset = item.options.get("subset", 0) if item is not None else 0
    return _missing([
        (_mlp(run).depth == 2, "model.depth 2"),
        (run.model.activation == "relu", "model.activation 'relu'"),
        (not run.model.bias, "model.bias false"),
        (run.model.parameterization == "standard", "model.parameterization 'standard'"),
        (run.model.output_scale == 1.0, "model.output_scale 1"),
        (run.model.kind == "network", "model.kind 'network'"),
        (run.train.loss == "mse", "train.loss 'mse'"),
        (run.train.optimizer.name == "gd" and run.train.optimizer.schedule == "constant"
         and run.train.optimizer.momentum == 0.0, "train.optimizer 'gd' without momentum, constant schedule"),
        (run.train.batch_size is None, "full batch (train.batch_size null)"),
        (subset == 0 or subset >= run.data.n_train, "kernel_components subset 0 (all training points)"),
    ]) or needs_scalar_output(run)


def relu_linear_teacher_theory(run: RunSpec) -> str | None:
    """The final NTK of a two-layer ReLU net from small init on a linear teacher (docs/papers.md §3.8):
    bias-free, standard parameterization, gradient flow on whitened inputs with one linear teacher."""
    return _missing(_gradient_flow_checks(run) + [
        (_mlp(run).depth == 2, "model.depth 2"),
        (run.model.activation == "relu", "model.activation 'relu'"),
        (run.data.source == "linear_teacher" and run.data.inputs == "gaussian",
         "a linear teacher on Gaussian inputs (data.source 'linear_teacher', inputs 'gaussian')"),
    ]) or needs_scalar_output(run)


def solvable_model(run: RunSpec) -> str | None:
    """The solvable two-layer linear model f = κuᵀWx on data on a line (solvable-model Sec. 2)."""
    return _missing([
        (run.model.activation == "linear", "model.activation 'linear'"),
        (_mlp(run).depth == 2, "model.depth 2"),
        (not run.model.bias, "model.bias false"),
        (run.model.parameterization == "standard", "model.parameterization 'standard'"),
        (run.model.kind == "network", "model.kind 'network'"),
        (run.model.gamma == 1.0, "model.gamma 1"),
        (run.train.loss == "mse", "train.loss 'mse'"),
        (run.data.source == "linear_teacher" and run.data.inputs == "line",
         "data on a line (data.source 'linear_teacher', inputs 'line')"),
    ]) or needs_scalar_output(run)
