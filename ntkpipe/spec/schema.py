"""The study language: what a ``specs/*.yaml`` file may say, as pydantic models.

Every leaf that a sweep may vary has an *axis name* (its field name unless the field says otherwise,
e.g. ``data.seed`` is the axis ``data_seed`` and ``model.kind`` is ``model_kind``). Axis names are
unique across the schema, so a sweep writes ``sigma: [...]`` instead of ``model.sigma``, and the
study dataset uses the same names as its dimensions.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    """Unknown keys are errors; instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def axis(name: str, **kwargs) -> Any:
    """A field whose sweep axis is called ``name`` instead of the field name."""
    return Field(json_schema_extra={"axis": name}, **kwargs)


class LabelsSpec(Strict):
    """Targets. ``default``: the teacher y = s βᵀx for ``linear_teacher``, classes otherwise
    (two classes → ±1, more → one-hot). ``eigenvector_sign``: y = sign φ_j(x) with φ_j the j-th
    eigenvector (descending) of the init-NTK Gram that stage ``stage`` decomposes
    (linearized-networks Sec. 3.1)."""

    kind: Literal["default", "eigenvector_sign"] = axis("label_kind", default="default")
    eigen_index: int | None = Field(None, ge=1)
    stage: str | None = None

    @model_validator(mode="after")
    def _eigen_fields(self):
        if self.kind == "eigenvector_sign" and (self.eigen_index is None or self.stage is None):
            raise ValueError("labels.kind 'eigenvector_sign' needs 'eigen_index' (j >= 1) and 'stage' "
                             "(the name of an 'eigendecomposition' stage)")
        if self.kind == "default" and (self.eigen_index is not None or self.stage is not None):
            raise ValueError("'eigen_index' and 'stage' only apply to labels.kind 'eigenvector_sign'")
        return self


class DataSpec(Strict):
    """Inputs and targets.

    ``gamma`` applies partial whitening X_γ = U S^γ Vᵀ with the SVD of the training inputs
    (silent-alignment Sec. 5): 0 = whitened (XᵀX/P = I on the span), 1 = only rescaled, null = raw.
    """

    source: Literal["linear_teacher", "digits", "mnist", "cifar10"]
    n_train: int = Field(ge=1)
    n_test: int = Field(0, ge=0)
    dim: int | None = Field(None, ge=1, description="input dimension D (linear_teacher only)")
    teacher_scale: float = Field(1.0, gt=0, description="s in y = s βᵀx")
    classes: list[int] | None = Field(None, description="class labels to keep; null = all")
    gamma: float | None = Field(None, ge=0.0, le=1.0)
    path: str | None = Field(None, description="directory of local MNIST/CIFAR-10 files")
    seed: int = axis("data_seed", default=0, ge=0)
    labels: LabelsSpec = LabelsSpec()

    @model_validator(mode="after")
    def _source_fields(self):
        if self.source == "linear_teacher":
            if self.dim is None:
                raise ValueError("source 'linear_teacher' needs 'dim' (the input dimension D)")
            if self.classes is not None:
                raise ValueError("'classes' does not apply to source 'linear_teacher'")
        else:
            if self.dim is not None:
                raise ValueError(f"'dim' only applies to source 'linear_teacher'; {self.source} fixes D")
            if self.classes is not None and len(set(self.classes)) < 2:
                raise ValueError("'classes' needs at least two distinct classes")
        if self.path is not None and self.source not in ("mnist", "cifar10"):
            raise ValueError("'path' only applies to sources 'mnist' and 'cifar10'")
        return self


class ModelSpec(Strict):
    """A fully connected network (see :class:`ntkpipe.models.MLP`). ``depth`` counts weight layers:
    "2 × 100" (two hidden layers of 100) is depth 3, width 100. ``kind: linearized`` trains
    f(θ₀) + ∇f(θ₀)·(θ − θ₀) instead of the network."""

    architecture: Literal["mlp"] = "mlp"
    kind: Literal["network", "linearized"] = axis("model_kind", default="network")
    depth: int = Field(ge=1)
    width: int = Field(ge=1)
    activation: Literal["linear", "relu", "tanh", "gelu"] = "relu"
    parameterization: Literal["standard", "ntk"] = "standard"
    sigma: float = Field(1.0, gt=0)
    output_scale: float = Field(1.0, gt=0)
    bias: bool = False


class OptimizerSpec(Strict):
    """Update θ ← θ − η_t u_t with u_t from ``name``: gd/sgd (u = g, or heavy-ball momentum),
    adam. η_t = lr for ``constant``; η_t = lr (1 − t/T) for ``linear_decay``."""

    name: Literal["gd", "sgd", "adam"] = axis("optimizer")
    lr: float = Field(gt=0)
    momentum: float = Field(0.0, ge=0.0, lt=1.0)
    schedule: Literal["constant", "linear_decay"] = "constant"
    b1: float = Field(0.9, ge=0.0, lt=1.0)
    b2: float = Field(0.999, ge=0.0, lt=1.0)
    eps: float = Field(1e-8, gt=0)

    @model_validator(mode="after")
    def _momentum_only_for_sgd(self):
        if self.name != "sgd" and self.momentum != 0.0:
            raise ValueError(f"'momentum' only applies to optimizer 'sgd', not {self.name!r}")
        return self


class CheckpointSpec(Strict):
    """When measurements are taken. ``log``: step 0 and steps round(10^(k/per_decade)) — a grid
    shared by runs of any length, so their time axes line up; ``linear``: ``count`` evenly spaced
    steps. The last step is always included."""

    spacing: Literal["log", "linear"] = "log"
    per_decade: int = Field(20, ge=1, le=200)
    count: int = Field(50, ge=1)


class TrainSpec(Strict):
    """Training. Exactly one of ``steps``, ``epochs`` or ``max_time`` (gradient-flow time t = lr·step)."""

    optimizer: OptimizerSpec
    loss: Literal["mse", "bce"] = axis("loss_function", default="mse")
    batch_size: int | None = Field(None, ge=1, description="null = full batch")
    steps: int | None = Field(None, ge=1)
    epochs: int | None = Field(None, ge=1)
    max_time: float | None = Field(None, gt=0)
    checkpoints: CheckpointSpec = CheckpointSpec()
    dtype: Literal["float32", "float64"] = "float32"

    @model_validator(mode="after")
    def _one_duration(self):
        given = [k for k in ("steps", "epochs", "max_time") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'steps', 'epochs', 'max_time' (got {given or 'none'})")
        return self


class StageSpec(Strict):
    """A computation whose output other parts of the study read (a DAG node of its own).

    ``ntk_gram``: the NTK Gram of each run's model at init over train ∪ test (shared by runs whose
    data, model and seed agree). ``eigendecomposition``: eigenpairs of the Gram of stage ``input``."""

    compute: Literal["ntk_gram", "eigendecomposition"]
    input: str | None = None
    top_k: int | None = Field(None, ge=1, description="eigenpairs kept; null = all")

    @model_validator(mode="after")
    def _inputs(self):
        if self.compute == "eigendecomposition" and self.input is None:
            raise ValueError("an 'eigendecomposition' stage needs 'input': the name of an 'ntk_gram' stage")
        if self.compute == "ntk_gram" and (self.input is not None or self.top_k is not None):
            raise ValueError("an 'ntk_gram' stage takes no 'input' or 'top_k'")
        return self


class MeasureItem(Strict):
    """One measurement with its options (each applies to one measurement, see
    ``ntkpipe.measure.REGISTRY``): ``threshold`` of t_align; ``ridge`` (relative to the mean kernel
    diagonal) and ``rcond`` (eigenvalue cutoff relative to λ_max) of kernel_predictors."""

    name: str
    threshold: float | None = None
    ridge: float | None = Field(None, ge=0.0)
    rcond: float | None = Field(None, gt=0.0, lt=1.0)


class SummarySpec(Strict):
    """A study-level fit stored in the study dataset: ``power_law`` fits log y = a + b log x,
    ``log_law`` fits y = a + b ln x, separately for each value of ``by`` (seeds pooled)."""

    name: str
    kind: Literal["power_law", "log_law"]
    x: str
    y: str
    by: str | None = None


class SweepFigure(Strict):
    """y against x — a sweep axis or a dimension of y (e.g. ``spectrum_index``) — one colour per
    value of ``hue`` (mean ± sd over the remaining dimensions, dots for single runs); several y
    variables share the colours and differ in line style; ``theory`` is drawn dashed; ``fit`` puts
    the fitted exponent of each line in the legend. Series are taken at their last time."""

    name: str
    kind: Literal["sweep"]
    x: str
    y: str | list[str]
    hue: str | None = None
    theory: str | None = None
    fit: Literal["power_law", "log_law"] | None = None
    logx: bool = False
    logy: bool = False
    where: dict[str, Any] = {}
    title: str | None = None
    ylabel: str | None = None


class TimeSeriesFigure(Strict):
    """Variables against time: one panel per variable (or all in one with ``overlay``), columns
    per value of ``col``, one line per value of ``hue`` (a sweep axis or a dimension such as
    ``mode``), averaged over the remaining dimensions. ``normalize`` divides a variable by its
    ``initial`` or ``final`` value; ``theory`` maps a variable to its theory (series or scalar),
    drawn dashed."""

    name: str
    kind: Literal["time_series"]
    variables: list[str] = Field(min_length=1)
    hue: str | None = None
    col: str | None = None
    overlay: bool = False
    normalize: dict[str, Literal["initial", "final"]] = {}
    theory: dict[str, str] = {}
    logx: bool = True
    logy: list[str] = []
    where: dict[str, Any] = {}
    title: str | None = None


class ScatterFigure(Strict):
    """Each y variable against x over their common dimensions (e.g. test points), pooled over
    the runs left after ``where``; one panel per value of ``col``; the diagonal dashed and the
    Pearson correlation in the legend (silent-alignment Fig. 1b–c)."""

    name: str
    kind: Literal["scatter"]
    x: str
    y: list[str] = Field(min_length=1)
    col: str | None = None
    where: dict[str, Any] = {}
    title: str | None = None
    xlabel: str | None = None


FigureSpec = Annotated[SweepFigure | TimeSeriesFigure | ScatterFigure, Field(discriminator="kind")]


class StudySpec(Strict):
    """A study before sweep expansion (after merging the chosen variant); its name is the file stem."""

    description: str = ""
    seed: int = Field(0, ge=0)
    data: DataSpec
    model: ModelSpec
    train: TrainSpec
    measure: list[str | MeasureItem] = Field(min_length=1)
    stages: dict[str, StageSpec] = {}
    sweep: dict[str, Any] = {}
    summaries: list[SummarySpec] = []
    figures: list[FigureSpec] = []
    variants: dict[str, dict[str, Any]] = {}


class RunSpec(Strict):
    """One resolved run: the study's sections with one sweep point substituted (its identity)."""

    seed: int = Field(ge=0)
    data: DataSpec
    model: ModelSpec
    train: TrainSpec
    measure: list[MeasureItem]
