"""The study language: what a ``specs/*.yaml`` file may say, as pydantic models.

Every leaf that a sweep may vary has an *axis name* (its field name unless the field says otherwise,
e.g. ``data.seed`` is the axis ``data_seed`` and ``model.kind`` is ``model_kind``). Axis names are
unique across the schema, so a sweep writes ``sigma: [...]`` instead of ``model.sigma``, and the
study dataset uses the same names as its dimensions.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Protocol, get_args

import pydantic
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, field_validator, model_validator
from pydantic.fields import FieldInfo

from ntkpipe.activations import Activation
from ntkpipe.claims.record import QuantitySpec, ToleranceSpec
from ntkpipe.claims.relations import RelationSpec
from ntkpipe.data.sources import SOURCES
from ntkpipe.lang.model_kinds import MODEL_KINDS, kinds_with
from ntkpipe.strict import CrossKeyError, Ints, Strict, axis, units


class LabelsSpec(Strict):
    """Targets. ``default``: the teachers y_c = s β_cᵀx for ``linear_teacher``, ±1 for ``nad`` and
    ``random_labels`` data, one-hot for ``gaussian_mixture``, classes otherwise (two classes → ±1,
    more → one-hot). ``eigenvector_sign``: y = sign φ_j(x) with φ_j the j-th eigenvector
    (descending) of the init-NTK Gram that stage ``stage`` decomposes (linearized-networks
    Sec. 3.1). ``two_groups``: y = +1 for the classes of ``groups[0]``, −1 for ``groups[1]``
    (default 0–4 vs 5–9: "CIFAR2", linearized-networks Sec. 4.1; MNIST odd vs even is
    ``groups: [[1, 3, 5, 7, 9], [0, 2, 4, 6, 8]]``)."""

    kind: Literal["default", "eigenvector_sign", "two_groups"] = axis("label_kind", default="default")
    """default: the source's own targets; eigenvector_sign: y = sign φ_j(x); two_groups: y = ±1 by class group (linearized-networks Sec. 3.1, 4.1; sweep axis label_kind)"""
    eigen_index: int | None = Field(default=None, ge=1)
    """j ≥ 1: the eigenvector φ_j (by descending eigenvalue) whose sign is the label (eigenvector_sign only)"""
    stage: str | None = None
    """the name of the eigendecomposition stage that gives φ_j (eigenvector_sign only)"""
    groups: Annotated[tuple[Ints, Ints], pydantic.Strict(False)] | None = None
    """[+1 classes, −1 classes]: two disjoint, non-empty lists of class labels (two_groups only; default [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], "CIFAR2" of linearized-networks Sec. 4.1)"""

    @model_validator(mode="after")
    def _kind_fields(self):
        if self.kind == "eigenvector_sign" and (self.eigen_index is None or self.stage is None):
            raise ValueError("labels.kind 'eigenvector_sign' needs 'eigen_index' (j >= 1) and 'stage' "
                             "(the name of an 'eigendecomposition' stage)")
        if self.kind != "eigenvector_sign" and (self.eigen_index is not None or self.stage is not None):
            raise ValueError("'eigen_index' and 'stage' only apply to labels.kind 'eigenvector_sign'")
        if self.groups is not None:
            if self.kind != "two_groups":
                raise ValueError("'groups' only applies to labels.kind 'two_groups'")
            if set(self.groups[0]) & set(self.groups[1]) or not all(self.groups):
                raise ValueError("'groups' needs two non-empty, disjoint lists of classes")
        return self

    @property
    def class_groups(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The (+1 classes, −1 classes) of ``two_groups`` labels."""
        return self.groups or ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))


def _source_options() -> dict[str, tuple[Any, FieldInfo]]:
    """The union of the sources' options (a key that several sources take is declared alike by each)."""
    fields: dict[str, tuple[Any, FieldInfo]] = {}
    owners: dict[str, str] = {}
    for source in SOURCES.values():
        for key, info in source.options.model_fields.items():
            if key in DataBase.model_fields:
                raise TypeError(f"source {source.name!r} declares {key!r}, which every source takes")
            if key in fields:
                first = fields[key][1]
                if (first.annotation, first.default, first.metadata, first.description) != \
                        (info.annotation, info.default, info.metadata, info.description):
                    raise TypeError(f"sources {owners[key]!r} and {source.name!r} declare the data key {key!r} "
                                    "differently; declare it once (ntkpipe.data.sources.base) and use it in both")
                continue
            fields[key], owners[key] = (info.annotation, info), source.name
    return fields


if TYPE_CHECKING:  # names of registries filled at import: a str to the type checker
    SourceName = str
    ModelKindName = str
else:
    SourceName = Literal[tuple(SOURCES)]
    ModelKindName = Literal[tuple(MODEL_KINDS)]


class DataBase(Strict):
    """Inputs and targets: the keys every source takes; the others are the options of the sources
    (:data:`ntkpipe.data.sources.SOURCES`), and :class:`DataSpec` has them all.

    ``gamma`` (where a source takes it) applies partial whitening X_γ = U S^γ Vᵀ with the SVD of the
    training inputs (silent-alignment Sec. 5): 0 = whitened (XᵀX/P = I on the span), 1 = only
    rescaled, null = raw. Image sources keep their shape (n, H, W, channels); ``image_size`` resizes
    them to S×S (bilinear). Synthetic sources have D = ``dim``.
    """

    source: SourceName
    """where inputs and targets come from; every source takes its own further keys (ntkpipe explain data.source.NAME)"""
    n_train: int = Field(ge=1)
    """P: the number of training points"""
    n_test: int = Field(0, ge=0)
    """the number of test points (0: none; test measurements then have nothing to read)"""
    seed: int = axis("data_seed", default=0, ge=0)
    """seed of the data draw: which examples, synthetic inputs, teachers and labels (sweep axis data_seed; the network's init uses the study seed)"""
    labels: LabelsSpec = LabelsSpec()
    """the targets: the source's default, eigenvector signs of an init-NTK Gram, or ±1 by class groups"""

    if TYPE_CHECKING:
        def __getattr__(self, key: str) -> Any:
            """The sources' options, the fields :class:`DataSpec` adds."""

    @model_validator(mode="after")
    def _source_fields(self):
        """Keys the source does not take stay at their defaults; the source's rules; chosen classes exist."""
        source = SOURCES[self.source]
        for key in SOURCE_FIELDS:
            if key not in source.keys and getattr(self, key) != type(self).model_fields[key].default:
                raise CrossKeyError(f"'{key}' does not apply to source {self.source!r}; remove it", (key,))
        classes = getattr(self, "classes", None)
        if classes is not None:
            if len(set(classes)) != len(classes):
                raise CrossKeyError(f"{classes} lists a class twice; list each class once", ("classes",))
            if not all(0 <= c < source.class_count for c in classes):
                raise CrossKeyError(f"{classes}: source {self.source!r} has the classes 0 … {source.class_count - 1}",
                                    ("classes",))
        source.rules(self)
        if classes is not None and len(classes) < 2:
            raise CrossKeyError("'classes' needs at least two distinct classes", ("classes",))
        if self.labels.kind == "two_groups" and not source.class_count:
            labelled = ", ".join(name for name, s in SOURCES.items() if s.class_count)
            raise ValueError(f"labels.kind 'two_groups' needs a source with class labels ({labelled})")
        return self


SOURCE_OPTIONS = _source_options()
SOURCE_FIELDS = {key: tuple(name for name, s in SOURCES.items() if key in s.keys) for key in SOURCE_OPTIONS}
"""The data keys that only some sources take, and those sources; every other key (n_train, n_test, seed,
labels) applies to all of them."""

if TYPE_CHECKING:
    DataSpec = DataBase
else:
    DataSpec = pydantic.create_model(
        "DataSpec", __base__=DataBase, __module__=__name__, **SOURCE_OPTIONS,
        __doc__="\n\n".join(inspect.cleandoc(doc) for doc in [DataBase.__doc__, "Sources:", *(
            s.options.__doc__ for s in SOURCES.values())]))


class OriginSpec(Strict):
    """Linearize around a pretrained network: θ_k, the network of stage ``stage`` after ``epochs``
    epochs of its training (linearized-networks Sec. 4.3, Figs. 8–9). ``epochs: 0`` is θ₀."""

    stage: str
    """the name of the pretrain stage whose network, after `epochs` epochs, is the origin θ_k"""
    epochs: int = axis("pretrain_epochs", ge=0)
    """k: epochs of pretraining of the origin θ_k; 0 is θ₀ (sweep axis pretrain_epochs)"""


class ModelBase(Strict):
    """Fields every architecture has. ``kind`` says what is trained: a record of
    :data:`ntkpipe.lang.model_kinds.MODEL_KINDS` (``network`` by default; each record's ``doc`` states its math).

    ``gamma`` is the feature-learning rate γ: a network trains g = f/γ with learning rate η₀γ²
    (Sec. 4.2, App. C; time stays t = η₀·step), the ``ofe`` uses it in Eq. 6 (its K₀ is the NTK of the
    unscaled network, since η₀γ²·K_g = η₀K_f), and ``ofe_fit`` is fitted to the network rescaled by it.
    """

    kind: ModelKindName = axis("model_kind", default="network")
    """what is trained: the network, its linearization, or a kernel evolved by kgd, akgd, ofe or ofe_fit (sweep axis model_kind)"""
    activation: Activation = "relu"
    """φ, the nonlinearity of every hidden layer (linear: none)"""
    parameterization: Literal["standard", "ntk"] = "standard"
    """standard: W_ℓ ~ N(0, σ²/n_{ℓ−1}); ntk: W_ℓ ~ N(0, 1) multiplied by σ/√n_{ℓ−1} in the forward pass (same function at init, different dynamics)"""
    sigma: float = Field(1.0, gt=0)
    """σ: the init scale of the weights (variance σ²/fan_in; CNNs and ResNets alike)"""
    output_scale: float = Field(1.0, gt=0)
    """κ: the output is f(x) = κ z_L, the readout's pre-activation times κ (solvable-model f = κuᵀWx)"""
    gamma: float = Field(1.0, ge=0, exclude_if=lambda v: v == 1.0, description="feature-learning rate γ: a network trains g = f/γ at η₀γ² (kernel-alignment Sec. 4.2)")
    bias: bool = False
    """add a bias b_ℓ to every layer, initialized at zero"""
    origin: OriginSpec | None = None
    """linearize around a pretrained network θ_k instead of θ₀ (model.kind linearized; linearized-networks Sec. 4.3)"""

    @model_validator(mode="after")
    def _origin_only_linearized(self):
        if self.origin is not None and not MODEL_KINDS[self.kind].linearized:
            raise ValueError(f"'origin' only applies to model.kind {kinds_with('linearized')}")
        if self.gamma == 0 and not MODEL_KINDS[self.kind].frozen_gamma:
            raise ValueError(f"gamma 0 (a frozen kernel) applies only to model.kind {kinds_with('frozen_gamma')}; a "
                             "network divides its output by γ (use kind 'kgd' for the frozen initial kernel)")
        return self

    @property
    def layer_names(self) -> tuple[str, ...]:
        """The weight layers in forward order, the readout last: the per-layer NTK components, ``layer_lr``
        and ``layer_variance`` index them (each architecture names its own)."""
        raise NotImplementedError

    @property
    def weight_layers(self) -> int:
        return len(self.layer_names)


class MlpSpec(ModelBase):
    """A fully connected network (see :class:`ntkpipe.models.MLP`). ``depth`` counts weight layers:
    "2 × 100" (two hidden layers of 100) is depth 3, width 100. Image inputs are flattened.
    ``layer_variance`` draws W_ℓ ~ N(0, v_ℓ) instead of σ²/fan_in; ``init: near_parallel`` (depth 2)
    sets the readout u ∥ W n for the top direction n of the training inputs, plus a Gaussian
    perturbation of relative size ``disturbance`` (solvable-model Fig. 1b, d), keeping |u|;
    ``init: mirrored`` (depth ≥ 2, even width) copies the first half of the last hidden layer's
    units into the second half with the readout negated, so the initial output is zero up to the
    rounding of the readout sum (the lazy-training init of Chizat et al., solvable-model Sec. 3.2)."""

    architecture: Literal["mlp"] = "mlp"
    """mlp: a fully connected network (the default when architecture is not given)"""
    depth: int = Field(ge=1)
    """L: weight layers, the readout included (two hidden layers of 100 is depth 3)"""
    width: int = Field(ge=1)
    """N: units of every hidden layer"""
    layer_variance: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, exclude_if=lambda v: v is None, description="per-layer variance v_ℓ of the weight entries (solvable-model Sec. 3)")
    init: Literal["gaussian", "near_parallel", "mirrored"] = Field("gaussian", exclude_if=lambda v: v == "gaussian")
    """gaussian: i.i.d. weights; near_parallel: readout u ∥ W n plus a perturbation (depth 2); mirrored: zero output at init (depth ≥ 2, even width; solvable-model Fig. 1b, Sec. 3.2)"""
    disturbance: float = Field(0.0, ge=0, exclude_if=lambda v: v == 0.0,
                               description="ε: relative size of the perturbation of a near-parallel readout (solvable-model Fig. 1b)")

    @model_validator(mode="after")
    def _init_fields(self):
        if self.layer_variance is not None and (len(self.layer_variance) != self.depth
                                                or self.parameterization != "standard"):
            raise ValueError(f"'layer_variance' needs one variance per weight layer ({self.depth}) and the "
                             "standard parameterization")
        if self.init == "near_parallel" and self.depth != 2:
            raise ValueError("init 'near_parallel' (readout u ∥ W n) applies to depth-2 networks")
        if self.init == "mirrored" and (self.depth < 2 or self.width % 2):
            raise ValueError(f"init 'mirrored' needs depth >= 2 and an even width (got depth {self.depth}, "
                             f"width {self.width})")
        if self.disturbance and self.init != "near_parallel":
            raise ValueError("'disturbance' applies to init 'near_parallel'")
        return self

    @property
    def layer_names(self) -> tuple[str, ...]:
        return (*(f"hidden{ell}" for ell in range(1, self.depth)), "readout")


class ConvLayerSpec(Strict):
    """conv (``channels`` filters of ``kernel_size``², ``stride``, ``padding``) → activation →
    optional ``pool`` (avg | max, window = stride = ``pool_size``)."""

    channels: int = Field(ge=1)
    """output channels (filters) of the convolution"""
    kernel_size: int = Field(ge=1, json_schema_extra=units("pixels"))
    """k: the filters are k × k"""
    stride: int = Field(1, ge=1)
    """the convolution's stride"""
    padding: Literal["SAME", "VALID"] = "SAME"
    """SAME: zero-pad to keep the spatial size at stride 1; VALID: no padding"""
    pool: Literal["avg", "max"] | None = None
    """pooling after the activation: avg, max, or null for none"""
    pool_size: int = Field(2, ge=1, json_schema_extra=units("pixels"))
    """p: the pooling window is p × p with stride p"""


class CnnSpec(ModelBase):
    """A convolutional network (see :class:`ntkpipe.models.CNN`): ``conv`` layers, then ``dense``
    hidden widths, then the readout. ``preset: lenet5`` is LeNet-5 as the linearized-networks
    authors define it (conv 6@5×5 SAME, avg-pool 2, conv 16@5×5 SAME, avg-pool 2, dense 120, 84)."""

    architecture: Literal["cnn"]
    """cnn: convolutional layers, then dense layers, then the readout"""
    preset: Literal["lenet5"] | None = None
    """lenet5: LeNet-5 as the linearized-networks authors define it (linearized-networks Sec. 3.1; instead of conv and dense)"""
    conv: list[ConvLayerSpec] | None = None
    """the convolutional layers, input side first (instead of preset)"""
    dense: list[int] | None = None
    """widths of the dense hidden layers between the convolutions and the readout (with conv)"""

    @property
    def layer_names(self) -> tuple[str, ...]:
        """conv layers, dense layers and the readout (LeNet-5: 2 + 2 + 1)."""
        conv, dense = (2, 2) if self.preset == "lenet5" else (len(self.conv or []), len(self.dense or []))
        return (*(f"conv{i}" for i in range(1, conv + 1)), *(f"dense{i}" for i in range(1, dense + 1)), "readout")

    @model_validator(mode="after")
    def _preset_or_layers(self):
        if (self.preset is None) == (self.conv is None):
            raise ValueError("give either 'preset' (lenet5) or 'conv' (a list of conv layers), not both")
        if self.preset is not None and self.dense is not None:
            raise ValueError("'dense' is fixed by the preset; give 'conv' and 'dense' for a custom net")
        return self


def _channels(name: str, base: int, factor: float) -> int:
    """``base``·``factor`` channels, which must be a whole number (the error names the key and a fix)."""
    channels = base * factor
    if channels != round(channels) or channels < 1:
        raise ValueError(f"{base}·{name} = {channels:g} channels; choose {name} so that {base}·{name} is a whole "
                         f"number >= 1 (e.g. {1 / base:g}, {4 / base:g}, 1)")
    return round(channels)


class ResnetSpec(ModelBase):
    """A ResNet-18-shaped network (see :class:`ntkpipe.models.resnet.ResNet`, post-activation basic
    blocks): a 3×3 stem with 64k channels, then stage s = 0, 1, … of ``blocks[s]`` basic blocks with
    64k·2^s channels, stride 2 from the second stage on (1×1 projection shortcuts), a global average
    pool and the readout. ``width_multiplier`` is k (1: ResNet-18's 64, 128, 256, 512 channels;
    1/16: 4, 8, 16, 32). ``norm: batch`` puts a BatchNorm after every conv; training updates its
    batch statistics, and kernels and measurements use inference mode (its running statistics)."""

    architecture: Literal["resnet"]
    """resnet: a ResNet-18-shaped network of basic blocks"""
    width_multiplier: float = Field(1.0, gt=0)
    """k: the stem has 64k channels and stage s 64k·2^s (1: ResNet-18; 64k must be a whole number)"""
    blocks: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [2, 2, 2, 2], min_length=1)
    """basic blocks per stage; stride 2 from the second stage on (ResNet-18: [2, 2, 2, 2])"""
    norm: Literal["none", "batch"] = "none"
    """batch: a BatchNorm after every convolution (kernels and measurements use its running statistics); none"""

    @field_validator("width_multiplier")
    @classmethod
    def _whole_channels(cls, k: float) -> float:
        _channels("width_multiplier", 64, k)
        return k

    @property
    def stages(self) -> tuple[tuple[int, int, int], ...]:
        """(channels, blocks, stride) of every stage."""
        base = _channels("width_multiplier", 64, self.width_multiplier)
        return tuple((base * 2**s, n, 1 if s == 0 else 2) for s, n in enumerate(self.blocks))

    @property
    def layer_names(self) -> tuple[str, ...]:
        names, channels = ["stem"], self.stages[0][0]
        for s, (width, n, stride) in enumerate(self.stages, 1):
            for b in range(1, n + 1):
                names += [f"stage{s}.block{b}.conv1", f"stage{s}.block{b}.conv2"]
                if b == 1 and (stride != 1 or channels != width):
                    names.append(f"stage{s}.block{b}.shortcut")
                channels = width
        return (*names, "readout")


class WideResnetSpec(ModelBase):
    """A Wide ResNet WRN-d-k (Zagoruyko & Komodakis 2016) as neural-tangents' ``stax`` example builds it
    (see :class:`ntkpipe.models.resnet.ResNet`, pre-activation blocks): a 3×3 stem with 16 channels,
    three groups of n = (d − 4)/6 blocks (the *block size*) with 16k, 32k, 64k channels and strides
    1, 2, 2, a 3×3 conv shortcut in each group's first block, a global average pool and the readout.
    ``depth`` is d (6n + 4: 10, 16, 22, 28, …), ``widen_factor`` is k (the kernel-alignment paper's
    Fig. 2: WRN-16-3, block size 2). ``norm: batch`` puts a BatchNorm before every activation."""

    architecture: Literal["wide_resnet"]
    """wide_resnet: a Wide ResNet WRN-d-k of pre-activation blocks"""
    depth: int = Field(16, ge=10)
    """d = 6n + 4 (10, 16, 22, …): three groups of n blocks"""
    widen_factor: float = Field(1.0, gt=0)
    """k: the groups have 16k, 32k and 64k channels (16k a whole number)"""
    norm: Literal["none", "batch"] = "none"
    """batch: a BatchNorm before every activation; none"""

    @field_validator("depth")
    @classmethod
    def _six_n_plus_four(cls, depth: int) -> int:
        if (depth - 4) % 6:
            raise ValueError(f"depth {depth} is not 6n + 4 for a block size n; use {depth - (depth - 4) % 6} "
                             f"or {depth - (depth - 4) % 6 + 6}")
        return depth

    @field_validator("widen_factor")
    @classmethod
    def _whole_channels(cls, k: float) -> float:
        _channels("widen_factor", 16, k)
        return k

    @property
    def block_size(self) -> int:
        """n = (d − 4)/6 blocks per group."""
        return (self.depth - 4) // 6

    @property
    def stages(self) -> tuple[tuple[int, int, int], ...]:
        """(channels, blocks, stride) of every group."""
        base = _channels("widen_factor", 16, self.widen_factor)
        return tuple((base * 2**g, self.block_size, 1 if g == 0 else 2) for g in range(3))

    @property
    def layer_names(self) -> tuple[str, ...]:
        names = ["stem"]
        for g in range(1, 4):
            for b in range(1, self.block_size + 1):
                names += [f"group{g}.block{b}.conv1", f"group{g}.block{b}.conv2"]
                names += [f"group{g}.block{b}.shortcut"] if b == 1 else []
        return (*names, "readout")


def _architecture(value) -> str:
    """The union tag of a model section; ``mlp`` when ``architecture`` is not given."""
    return value.get("architecture", "mlp") if isinstance(value, dict) else getattr(value, "architecture", "mlp")


ModelSpec = Annotated[
    Annotated[MlpSpec, Tag("mlp")] | Annotated[CnnSpec, Tag("cnn")] | Annotated[ResnetSpec, Tag("resnet")]
    | Annotated[WideResnetSpec, Tag("wide_resnet")],
    Discriminator(_architecture),
]
ARCHITECTURE_SPECS: dict[str, type[ModelBase]] = {get_args(m)[1].tag: get_args(m)[0]
                                                  for m in get_args(get_args(ModelSpec)[0])}
"""The options model of every architecture a study may name (its tag in ``ModelSpec``); its record
(builder, capabilities) is :data:`ntkpipe.models.ARCHITECTURES`."""
MODEL_SPEC = TypeAdapter(ModelSpec)
"""Validates a model section: ``MODEL_SPEC.validate_python({"architecture": "cnn", ...})``."""


class OptimizerSpec(Strict):
    """Update θ ← θ − η_t m_ℓ u_t with u_t from ``name``: gd/sgd (u = g, or heavy-ball momentum),
    adam. η_t = lr for ``constant``; η_t = lr (1 − t/T) for ``linear_decay``. The multiplier m_ℓ of
    weight layer ℓ (its weights and bias) is ``layer_lr[ℓ]`` (default 1), times ``lr_ratio`` for the
    readout: a two-layer f = κuᵀWx trains with η_W = lr and η_u = lr·lr_ratio (solvable-model Sec. 2)."""

    name: Literal["gd", "sgd", "adam"] = axis("optimizer")
    """the update u_t: gd and sgd use the gradient (sgd may add momentum), adam its moment estimates (sweep axis optimizer)"""
    lr: float = Field(gt=0, json_schema_extra=units("gradient-flow time per step"))
    """η₀: the base learning rate; time is measured as gradient-flow time t = η₀·step"""
    momentum: float = Field(0.0, ge=0.0, lt=1.0)
    """β of sgd's heavy-ball momentum, m ← βm + g (0: none; sgd only)"""
    schedule: Literal["constant", "linear_decay"] = "constant"
    """constant: η_t = lr; linear_decay: η_t = lr·(1 − t/T) over the T steps"""
    b1: float = Field(0.9, ge=0.0, lt=1.0)
    """Adam's β₁, the decay rate of the first-moment estimate"""
    b2: float = Field(0.999, ge=0.0, lt=1.0)
    """Adam's β₂, the decay rate of the second-moment estimate"""
    eps: float = Field(1e-8, gt=0)
    """Adam's ε, added to √v̂ in the denominator"""
    layer_lr: list[float] | None = Field(None, exclude_if=lambda v: v is None,
                                         description="learning-rate multiplier per weight layer, input side first")
    lr_ratio: float = Field(1.0, gt=0, exclude_if=lambda v: v == 1.0,
                            description="η_readout / η_hidden: the readout layer's multiplier (solvable-model Sec. 2.2)")

    @model_validator(mode="after")
    def _momentum_only_for_sgd(self):
        if self.name != "sgd" and self.momentum != 0.0:
            raise CrossKeyError(f"'momentum' only applies to optimizer 'sgd', not {self.name!r}",
                                ("momentum",), ("name",))
        return self


class CheckpointSpec(Strict):
    """When measurements are taken. ``log``: step 0 and steps round(10^(k/per_decade)) — a grid
    shared by runs of any length, so their time axes line up; ``linear``: ``count`` evenly spaced
    steps. The last step is always included."""

    spacing: Literal["log", "linear"] = "log"
    """log: step 0 and steps round(10^(k/per_decade)); linear: count evenly spaced steps (the last step always)"""
    per_decade: int = Field(default=20, ge=1, le=200)
    """checkpoints per decade of steps (log spacing)"""
    count: int = Field(default=50, ge=1)
    """the number of evenly spaced checkpoints (linear spacing)"""


class TrainSpec(Strict):
    """Training. Exactly one of ``steps``, ``epochs`` or ``max_time`` (gradient-flow time t = lr·step).
    ``divergence_factor`` (> 1, default 10⁶): a run whose loss at a checkpoint is non-finite or above
    this multiple of its initial loss diverged and stops there (:mod:`ntkpipe.train.loop`), however
    finite it would look later (e.g. a network dead after a blow-up)."""

    optimizer: OptimizerSpec
    """the update rule and its learning rates"""
    loss: Literal["mse", "bce"] = axis("loss_function", default="mse")
    """mse: L = (1/2P) Σ_μ |f(x_μ) − y_μ|²; bce: mean of log(1 + e^{−y f}) on ±1 labels (linearized-networks App. B; sweep axis loss_function)"""
    batch_size: int | None = Field(None, ge=1, description="null = full batch")
    steps: int | None = Field(None, ge=1, json_schema_extra=units("optimizer steps"))
    """T: the number of optimizer steps (give one of steps, epochs, max_time)"""
    epochs: int | None = Field(None, ge=1, json_schema_extra=units("epochs (passes over the training set)"))
    """passes over the training set, a last partial batch included (give one of steps, epochs, max_time)"""
    max_time: float | None = Field(None, gt=0, json_schema_extra=units("gradient-flow time t = η₀·step"))
    """train until gradient-flow time t = η₀·step reaches this (give one of steps, epochs, max_time)"""
    checkpoints: CheckpointSpec = CheckpointSpec()
    """the steps at which series are measured"""
    dtype: Literal["float32", "float64"] = "float32"
    """floating type of the parameters and of training (theory, kernels and eigendecompositions are float64)"""
    divergence_factor: float = Field(
        1e6, gt=1, exclude_if=lambda v: v == 1e6,
        description="a run whose loss at a checkpoint exceeds this multiple of its initial loss diverged (it stops there)")

    @model_validator(mode="after")
    def _one_duration(self):
        given = [k for k in ("steps", "epochs", "max_time") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'steps', 'epochs', 'max_time' (got {given or 'none'})")
        return self


class NtkGramStage(Strict):
    """The NTK Gram of each run's model at init over train ∪ test (shared by runs whose data,
    model and seed agree)."""

    compute: Literal["ntk_gram"]
    """ntk_gram: the init-NTK Gram over train ∪ test"""


class EigendecompositionStage(Strict):
    """Top eigenpairs of the Gram of stage ``input``; provides eigenvector-sign labels."""

    compute: Literal["eigendecomposition"]
    """eigendecomposition: the top eigenpairs (λ_j, φ_j) of a Gram (eigenvector-sign tasks, linearized-networks Sec. 3.1)"""
    input: str
    """the name of the ntk_gram stage whose Gram is decomposed"""
    top_k: int | None = Field(None, ge=1, description="eigenpairs kept; null = all")


class NadStage(Strict):
    """Neural anisotropy directions of each run's network at init: right singular vectors of the
    mixed derivative ∇²ₓθ f(x) at x = 0 (``at: origin``, the authors' code) or averaged over
    x ~ N(0, I) with ``samples`` draws (Theorem 1); provides directions to ``nad`` data. The
    Stein check of Theorem 1 uses ``stein_samples`` Monte-Carlo draws on the top ``stein_vectors``
    NADs and one random direction."""

    compute: Literal["nad"]
    """nad: neural anisotropy directions of the network at init"""
    at: Literal["origin", "gaussian"] = "origin"
    """origin: the mixed derivative ∇²ₓθ f at x = 0 (the authors' code); gaussian: averaged over x ~ N(0, I) (linearized-networks Sec. 3.2, Theorem 1)"""
    samples: int = Field(256, ge=1)
    """draws of x ~ N(0, I) in the average (at: gaussian)"""
    stein_samples: int = Field(4096, ge=16)
    """Monte-Carlo draws of the Stein check of Theorem 1"""
    stein_vectors: int = Field(3, ge=1)
    """how many of the top NADs the Stein check tests (plus one random direction)"""


class PretrainStage(Strict):
    """The run's network trained as the run itself would be (same data, labels and training),
    stored at every epoch a run asks for as its linearization ``origin``."""

    compute: Literal["pretrain"]
    """pretrain: the run's network trained as the run would be, kept at every epoch an origin asks for"""


StageSpec = Annotated[NtkGramStage | EigendecompositionStage | NadStage | PretrainStage,
                      Field(discriminator="compute")]


class MeasureItem(BaseModel):
    """One measurement with its options: ``{name: t_align, threshold: 0.3}``. Each measurement
    declares its options (name, type, default, range) in ``ntkpipe.measure.REGISTRY``; validation
    checks them there and fills in the defaults, so a run's config holds every option's value."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)

    name: str
    """the measurement (ntkpipe measurements lists them with their options)"""

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class SummarySpec(BaseModel):
    """A study-level summary stored in the study dataset: ``name``, ``kind`` and that kind's keys. Each
    kind is a record of :data:`ntkpipe.summaries.SUMMARY_KINDS` (power_law, log_law, endpoints,
    predicted_phase, measured_phase), which declares and documents its keys and validates them against the
    study; most read a sweep axis ``x``, a variable ``y`` and give one value per group of the axes ``by``
    (one name or a list; none: one value)."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)

    name: str
    """the variable it adds to the study dataset (with <name>_stderr for fits)"""
    kind: str
    """the summary kind (``ntkpipe explain summaries`` lists them): power_law or log_law fit of y over x, endpoints table of a series, predicted_phase or measured_phase"""
    x: str | None = None
    """the sweep axis a fit runs over (measured_phase: the scale parameter d)"""
    y: str | None = None
    """the variable fitted (a scalar; a series at its last time) or tabulated (endpoints: a series)"""
    by: str | list[str] | None = None
    """sweep axes to compute the summary per value of (one name or a list; none: one value for the study)"""


REPRODUCES = "the paper figure it reproduces, e.g. 'Silent alignment Fig. 3', shown under the title"
ANY_VARIABLE = ("scalar", "series", "array")

# A figure kind is one record: its class below (the options a spec writes), ``plotter`` (its plotting
# function, "module:function", imported when a figure is drawn), ``plotted()`` (the measured variables
# it draws: ``where`` may select their dimensions) and ``problems(check)`` (its validation against the
# study, through the ``FigureCheck`` of ntkpipe.study.checks), and its entry in ``FigureSpec``.


class SweepFigure(Strict):
    """y against x — a sweep axis or a dimension of y (e.g. ``spectrum_index``) — one colour per
    value of ``hue`` (mean ± sd over the remaining dimensions, dots for single runs); several y
    variables share the colours and differ in line style; ``theory`` is drawn dashed; ``fit`` puts
    the fitted exponent of each line in the legend. Series are taken at their last time. ``col``
    gives a panel per value of a sweep axis (``mark_col`` marks x at that value). ``reference`` selects other runs (sweep axis: value) whose mean is drawn as a dashed line."""

    name: str
    """the figure's name: it is drawn to results/<study>/figures/<name>.png"""
    kind: Literal["sweep"]
    """sweep: y against a sweep axis or a dimension of y"""
    x: str
    """the horizontal axis: a sweep axis or a dimension of y (e.g. spectrum_index)"""
    y: str | list[str]
    """the variable (or list of variables) drawn; a series is taken at its last time"""
    hue: str | None = None
    """a sweep axis or dimension: one colour per value"""
    col: str | None = None
    """a sweep axis: one panel (column) per value of it, e.g. the architecture or the task index j"""
    mark_col: bool = Field(False, exclude_if=lambda v: not v,
                           description="draw a thin vertical line at x = the panel's col value, where x and col "
                                       "count the same thing (e.g. eigenfunction index i = task index j)")
    theory: str | None = None
    """a variable drawn dashed next to y (e.g. t_half_theory)"""
    residual: bool = Field(False, exclude_if=lambda v: not v,
                           description="a small panel under the figure: the theory's relative residual "
                                       "(theory − measured) / |measured| (<theory>_residual) against x, for a "
                                       "theory that lies under the data")
    fit: Literal["power_law", "log_law"] | None = None
    """fit each line with power_law (log y over log x) or log_law (y over ln x) and put the exponent in the legend"""
    logx: bool = False
    """logarithmic x axis"""
    logy: bool = False
    """logarithmic y axis"""
    where: dict[str, Any] = {}
    """selection before drawing, {axis or dimension: value} (e.g. {depth: 3}, {output: 0})"""
    reference: dict[str, Any] = {}
    """{sweep axis: value}: the mean of those runs drawn as a dashed reference line"""
    title: str | None = None
    """the title drawn above the figure (default: the study name and the figure name)"""
    reproduces: str | None = Field(None, exclude_if=lambda v: v is None, description=REPRODUCES)
    ylabel: str | None = None
    """the y-axis label (default: the variables' long names)"""

    plotter: ClassVar[str] = "ntkpipe.plots.sweep:plot_sweep"

    def plotted(self) -> list[str]:
        return [self.y] if isinstance(self.y, str) else self.y

    def problems(self, check) -> list:
        ys = self.plotted()
        out = [p for v in ys + [self.theory] for p in check.variable(v, ANY_VARIABLE, ("y",))]
        out += check.dim(self.x, ys, ("x",), "x") + check.dim(self.hue, ys, ("hue",), "hue")
        out += check.axis(self.col, ("col",), "col")
        if self.residual and (self.theory is None or self.col is not None or len(ys) > 1):
            out += check.problem(("residual",), "residual draws the theory's residual under one panel: it needs "
                                                "theory, one y and no col")
        if self.mark_col and self.col is None:
            out += check.problem(("mark_col",), "mark_col marks x at each panel's col value: add col")
        if self.logx and (labels := check.labels(self.x)):
            out += check.problem(("logx",), f"x {self.x!r} takes labels ({', '.join(labels)}), which have no log "
                                            "scale; remove logx (or set it to false)")
        return out


class TimeSeriesFigure(Strict):
    """Variables against time: one panel per variable (or all in one with ``overlay``), columns
    per value of ``col``, one line per value of ``hue`` (a sweep axis or a dimension such as
    ``mode``), averaged over the remaining dimensions. ``normalize`` divides a variable by its
    ``initial`` or ``final`` value, or (``change``) subtracts its initial value; ``theory`` maps a variable to its theory (series or scalar),
    drawn dashed; ``reference`` selects other runs (e.g. the network a model is compared with),
    drawn dashed in black. ``where`` selects sweep axes and, in any figure, dimensions that every
    plotted variable has (e.g. ``output: 3`` of ``kv_projection``, hue ``target``)."""

    name: str
    """the figure's name: it is drawn to results/<study>/figures/<name>.png"""
    kind: Literal["time_series"]
    """time_series: series against gradient-flow time t = η₀·step"""
    variables: list[str] = Field(min_length=1)
    """the series drawn, one panel each (or one panel with overlay)"""
    hue: str | None = None
    """a sweep axis or a dimension of the variables (e.g. mode): one line per value"""
    col: str | None = None
    """a sweep axis: one panel (column) per value of it"""
    overlay: bool = False
    """draw all variables in one panel"""
    normalize: dict[str, Literal["initial", "final", "change"]] = {}
    """{variable: initial | final | change}: divide the variable by its value at init or at the end, or (change) subtract its value at init (its growth, e.g. kernel-alignment Fig. 7)"""
    theory: dict[str, str] = {}
    """{variable: theory variable}: the theory (series or scalar) drawn dashed"""
    marks: dict[str, list[str]] = Field(default_factory=dict, exclude_if=lambda v: not v, description=(
        "{variable: [time variables]}: times per run (and per hue value, e.g. mode_half_time per mode) marked "
        "on that variable's lines, a measured time as a dot on the measured line, a theory time (e.g. "
        "mode_half_time_theory) as an open diamond on the theory line"))
    logx: bool = True
    """logarithmic time axis"""
    logy: list[str] = []
    """the variables drawn on a logarithmic axis"""
    where: dict[str, Any] = {}
    """selection before drawing, {axis or dimension: value} (e.g. {depth: 3}, {output: 0})"""
    reference: dict[str, Any] = {}
    """{sweep axis: value}: those runs (e.g. the network a model is compared with) drawn dashed in black"""
    title: str | None = None
    """the title drawn above the figure (default: the study name and the figure name)"""
    reproduces: str | None = Field(None, exclude_if=lambda v: v is None, description=REPRODUCES)

    plotter: ClassVar[str] = "ntkpipe.plots.time_series:plot_time_series"

    def plotted(self) -> list[str]:
        return self.variables

    def problems(self, check) -> list:
        out = [p for j, v in enumerate(self.variables) for p in check.variable(v, ("series",), ("variables", j))]
        out += [p for v, theory in self.theory.items() for p in check.variable(theory, ANY_VARIABLE, ("theory", v))]
        out += [p for v, times in self.marks.items() for j, m in enumerate(times)
                for p in check.variable(m, ("scalar", "array"), ("marks", v, j))]
        if any(self.normalize.get(v) for v in self.marks):
            out += check.problem(("marks",), "marks are drawn on unnormalized lines: drop normalize of a marked variable")
        for key in list(self.theory) + list(self.normalize) + self.logy + list(self.marks):
            if key not in self.variables:
                out += check.problem((), f"{key!r} is given settings but is not in variables")
        return out + check.dim(self.hue, self.variables, ("hue",), "hue") + check.axis(self.col, ("col",), "col")


class ScatterFigure(Strict):
    """Each y variable against x over their common dimensions (e.g. test points), pooled over
    the runs left after ``where``; one panel per value of ``col``; the diagonal dashed and the
    Pearson correlation in the legend (silent-alignment Fig. 1b–c)."""

    name: str
    """the figure's name: it is drawn to results/<study>/figures/<name>.png"""
    kind: Literal["scatter"]
    """scatter: variables against each other over their common dimensions (e.g. test points)"""
    x: str
    """the variable on the horizontal axis"""
    y: list[str] = Field(min_length=1)
    """the variables on the vertical axis, each against x"""
    col: str | None = None
    """a sweep axis: one panel (column) per value of it"""
    where: dict[str, Any] = {}
    """selection before drawing, {axis or dimension: value} (e.g. {depth: 3}, {output: 0})"""
    title: str | None = None
    """the title drawn above the figure (default: the study name and the figure name)"""
    reproduces: str | None = Field(None, exclude_if=lambda v: v is None, description=REPRODUCES)
    xlabel: str | None = None
    """the x-axis label (default: x's long name)"""

    plotter: ClassVar[str] = "ntkpipe.plots.scatter:plot_scatter"

    def plotted(self) -> list[str]:
        return [self.x] + self.y

    def problems(self, check) -> list:
        out = [p for v in self.plotted() for p in check.variable(v, ("array", "scalar"), ("y",))]
        return out + check.axis(self.col, ("col",), "col")


class ImagesFigure(Strict):
    """Images stored in a variable with dims (item, row, column, channel), e.g. ``nad_directions``:
    the first ``count`` items in a row for each value of ``rows`` (one run per value, after
    ``where``); with ``fourier`` each is followed by the magnitude of its centred 2-D Fourier
    transform (linearized-networks Fig. 10)."""

    name: str
    """the figure's name: it is drawn to results/<study>/figures/<name>.png"""
    kind: Literal["images"]
    """images: a stack of images (item, row, column, channel) in a row"""
    variable: str
    """the variable holding the images, dims (item, row, column, channel), e.g. nad_directions"""
    rows: str | None = None
    """a sweep axis: one row of images per value"""
    count: int = Field(10, ge=1)
    """the first count items drawn"""
    fourier: bool = True
    """follow each image by the magnitude of its centred 2-D Fourier transform"""
    where: dict[str, Any] = {}
    """selection before drawing, {axis or dimension: value} (e.g. {depth: 3}, {output: 0})"""
    title: str | None = None
    """the title drawn above the figure (default: the study name and the figure name)"""
    reproduces: str | None = Field(None, exclude_if=lambda v: v is None, description=REPRODUCES)

    plotter: ClassVar[str] = "ntkpipe.plots.images:plot_images"

    def plotted(self) -> list[str]:
        return [self.variable]

    def problems(self, check) -> list:
        out = check.variable(self.variable, ("array",), ("variable",))
        if (dims := check.dims(self.variable)) is not None and len(dims) != 4:
            out += check.problem(("variable",), f"{self.variable!r} is not a stack of images "
                                                "(dims item, row, column, channel)")
        return out + check.axis(self.rows, ("rows",), "rows")


class MatrixFigure(Strict):
    """A variable with two dims of its own (e.g. the kernel specialization matrix ``ksm``, dims
    ``output``, ``target``; kernel-alignment Sec. 4.3, Figs. 3A–B, 4D) as a heatmap: the first dim
    down the rows, the second across the columns, averaged over the remaining dimensions (e.g. seeds)
    after ``where``; a series is taken at its last time. One panel per value of ``col``, with ``theory``
    a second row drawing the theory's matrix under each (e.g. the final NTK Gram and K∞ of
    silent-alignment Eq. 63, Fig. E.3b), one colour bar for all; a small matrix (at most 12 × 12) has
    each cell annotated with its value; ``scale_with`` makes the colour scale span other variables too
    (figures meant to be compared)."""

    name: str
    """the figure's name: it is drawn to results/<study>/figures/<name>.png"""
    kind: Literal["matrix"]
    """matrix: a heatmap of a variable with two dims of its own"""
    variable: str
    """the variable drawn: first dim down the rows, second across (e.g. ksm: output, target)"""
    theory: str | None = Field(None, exclude_if=lambda v: v is None,
                               description="a variable with the same dims drawn in a second row of panels, one "
                                           "under each of the variable's, on the same colour scale (e.g. "
                                           "final_ntk_gram_theory, K∞ of silent-alignment Eq. 63)")
    scale_with: list[str] = Field([], exclude_if=lambda v: not v,
                                  description="variables whose matrices (same where, col) the colour scale also "
                                              "spans, so that figures meant to be compared share one (e.g. ksm "
                                              "and ksm_init); the colour bar says so")
    col: str | None = None
    """a sweep axis: one panel (column) per value of it"""
    where: dict[str, Any] = {}
    """selection before drawing, {axis or dimension: value} (e.g. {depth: 3}, {output: 0})"""
    title: str | None = None
    """the title drawn above the figure (default: the study name and the figure name)"""
    reproduces: str | None = Field(None, exclude_if=lambda v: v is None, description=REPRODUCES)

    plotter: ClassVar[str] = "ntkpipe.plots.matrix:plot_matrix"

    def plotted(self) -> list[str]:
        return [self.variable] + ([self.theory] if self.theory else [])

    def problems(self, check) -> list:
        out = check.variable(self.variable, ("array", "series"), ("variable",))
        out += [p for j, v in enumerate(self.scale_with) for p in check.variable(v, ("array", "series"), ("scale_with", j))]
        if (dims := check.dims(self.variable)) is not None and len(own := [d for d in dims if d != "time"]) != 2:
            out += check.problem(("variable",), f"{self.variable!r} has dims ({', '.join(own)}); a matrix figure "
                                                "needs a variable with two (rows, columns), e.g. ksm (output, target)")
        if self.theory:
            out += check.variable(self.theory, ("array", "series"), ("theory",))
            theory_dims = check.dims(self.theory)
            if dims is not None and theory_dims is not None and theory_dims != dims:
                out += check.problem(("theory",), f"{self.theory!r} has dims ({', '.join(theory_dims)}), "
                                                  f"{self.variable!r} ({', '.join(dims)}): the theory's matrix is "
                                                  "drawn under the variable's, so they need the same dims")
        return out + check.axis(self.col, ("col",), "col")


class PhasesFigure(Strict):
    """The phase table of a ``measured_phase`` summary as a figure (solvable-model Table 1): one row per
    value of ``rows`` (e.g. scaling), one panel per value of ``col`` (e.g. task), stacked. Each row draws
    the fitted exponent b ± 2 s of the summary's y in d as a dot coloured by the measured phase, and the
    exponent p its scaling powers predict as a dashed mark (theory); the right axis names the predicted
    and the measured phase (✓ when they agree, ✗ in red when not), each panel's title how many agree."""

    name: str
    """the figure's name: it is drawn to results/<study>/figures/<name>.png"""
    kind: Literal["phases"]
    """phases: predicted against measured phase and exponent per group (solvable-model Table 1)"""
    measured: str
    """the measured_phase summary (its <name>_exponent, _exponent_stderr and _predicted_exponent are drawn)"""
    predicted: str
    """the predicted_phase summary, over the same groups"""
    rows: str
    """a sweep axis: one row per value (e.g. scaling)"""
    col: str | None = None
    """a sweep axis: one panel per value (e.g. task), stacked"""
    where: dict[str, Any] = {}
    """selection before drawing, {axis or dimension: value} (e.g. {depth: 3}, {output: 0})"""
    title: str | None = None
    """the title drawn above the figure (default: the study name and the figure name)"""
    reproduces: str | None = Field(None, exclude_if=lambda v: v is None, description=REPRODUCES)

    plotter: ClassVar[str] = "ntkpipe.plots.phases:plot_phases"

    def plotted(self) -> list[str]:
        return [self.measured, self.predicted]

    def problems(self, check) -> list:
        out = check.variable(self.predicted, ("scalar",), ("predicted",))
        for suffix in ("", "_exponent", "_exponent_stderr", "_predicted_exponent"):
            if check.variable(self.measured + suffix, ("scalar",), ("measured",)):
                return out + check.problem(("measured",), f"{self.measured!r} is not a measured_phase summary of "
                                                          "this study (add one under 'summaries')")
        return out + check.axis(self.rows, ("rows",), "rows") + check.axis(self.col, ("col",), "col")


FigureSpec = Annotated[SweepFigure | TimeSeriesFigure | ScatterFigure | ImagesFigure | MatrixFigure | PhasesFigure,
                       Field(discriminator="kind")]


class FigureKind(Protocol):
    """What is read of a figure kind's class besides its fields: its plotter, ``"module:function"``."""

    plotter: ClassVar[str]


FIGURE_KINDS: dict[str, type[FigureKind]] = {get_args(m.model_fields["kind"].annotation)[0]: m
                                             for m in get_args(get_args(FigureSpec)[0])}
"""Each figure kind's class by its name (``kind:``), read from ``FigureSpec``."""


class ScalingSpec(Strict):
    """Hyperparameters as powers of one scale parameter d (solvable-model Sec. 3): each parameter p
    named in ``powers`` (by its sweep-axis name: width, output_scale, lr, layer_variance, layer_lr,
    sigma, …) is p(d) = p₀ · (d / ``reference``)^power, p₀ its value in the spec (after variant and
    case overrides), so every scaling coincides at d = reference. Lists (layer_variance, layer_lr)
    take a list of powers, one per entry (or one number for all); integers (width) are rounded.
    ``d`` (values, or a generator as in a sweep) becomes the sweep axis and dataset dimension ``d``,
    crossed with the rest of the sweep; case overrides may change ``powers`` and ``reference``."""

    d: list[float] | dict[str, Any]
    """the values of the scale parameter d, a list or a generator as in a sweep; they become the sweep axis d"""
    reference: float = Field(1.0, gt=0)
    """d₀: every parameter has its spec value at d = d₀ (solvable-model Sec. 3)"""
    powers: dict[str, float | list[float]] = Field(min_length=1)
    """{parameter (its sweep-axis name): a}: p(d) = p₀·(d/d₀)^a; a list of powers for a list parameter (solvable-model Sec. 3, Table 1)"""


CLAIM_NAME = r"^[a-z][a-z0-9_]*$"


class ClaimSpec(Strict):
    """What the paper says about a number of the study, checked against the study dataset once its runs
    are merged: the ``quantity`` (a variable with a selection and reductions) stands in the ``relation``
    (approx, less, greater, before, monotone, spearman, ordering; ``ntkpipe explain claims.relation``)
    within the ``tolerance``. Its verdict is stored as claim_<name>_measured, claim_<name>_expected and
    claim_<name>_pass in the study dataset (results/<study>/<study>.zarr) and in results/<study>/<study>_claims.csv;
    a failing claim is reported, never an error. Claims enter no run id: editing one re-aggregates, never retrains."""

    name: str = Field(pattern=CLAIM_NAME)
    """the claim's name (lower case, digits, underscores): its variables are claim_<name>_*"""
    source: str = Field(min_length=1)
    """the paper and figure, equation or section, e.g. 'Silent alignment Fig. 3'"""
    statement: str = Field(min_length=1)
    """the paper's statement, quoted (or the derivation's, for a counter-claim)"""
    regime: str = Field(min_length=1)
    """where the claim applies, e.g. 'small σ', 'gradient flow', 'default size'"""
    quantity: QuantitySpec
    """the number the claim is about: {variable, where, reduce}"""
    relation: RelationSpec
    """what the quantity satisfies: {kind: approx | less | greater | before | monotone | spearman | ordering, …}"""
    tolerance: ToleranceSpec | None = None
    """how far it may miss, with the reason: {value, relative, reason} (none: exact)"""
    figures: list[str] = Field([], exclude_if=lambda v: not v)
    """the study's figures that show the quantity (names under figures:); index.md lists the claim under each"""
    variants: list[str] = Field([], exclude_if=lambda v: not v)
    """the variants whose runs the claim is judged on ('default' or names under variants:; none: every variant),
    e.g. [paper] for a claim that needs the paper's sizes; in another variant its quantity is still measured
    and listed (status '<variant> variant', no claim_<name>_pass), beside the trend the default shows"""


class StudySpec(Strict):
    """A study before sweep expansion (after merging the chosen variant); its name is the file stem."""

    description: str = ""
    """what the study reproduces (paper, figure) and how; shown in the report and by ntkpipe show"""
    seed: int = Field(0, ge=0)
    """seed of each run's initialization and minibatch order (sweep it to repeat runs; data draws use data.seed)"""
    data: DataSpec
    """inputs and targets: the source, the split sizes and the labels"""
    model: ModelSpec
    """what is trained: the architecture and its options, the parameterization and the model kind"""
    train: TrainSpec
    """how it is trained: optimizer, loss, batch size, duration and checkpoints"""
    measure: list[str | MeasureItem] = Field(min_length=1)
    """what is measured: names, or {name: …, option: value}; checkpoint measurements are series over time"""
    stages: dict[str, StageSpec] = {}
    """named jobs shared by runs (an init-NTK Gram, its eigendecomposition, NADs, a pretrained network)"""
    sweep: dict[str, Any] = {}
    """which runs the study holds: axes and their values, combined by product, zip, union and cases (empty: one run)"""
    scaling: ScalingSpec | None = None
    """hyperparameters as powers of one scale parameter d (solvable-model Sec. 3); adds the sweep axis d"""
    summaries: list[SummarySpec] = []
    """study-level variables computed from the runs: fitted exponents, endpoint tables, phases"""
    figures: list[FigureSpec] = []
    """the figures drawn from the study dataset"""
    claims: list[ClaimSpec] = Field([], exclude_if=lambda v: not v)
    """what the papers say about the study's numbers, each checked against the study dataset (ntkpipe claims)"""
    variants: dict[str, dict[str, Any]] = {}
    """named overrides of this spec (mappings merge key by key, a list or a sweep is replaced), e.g. paper; run with --config variant=NAME"""


class RunSpec(Strict):
    """One resolved run: the study's sections with one sweep point substituted (its identity)."""

    seed: int = Field(ge=0)
    data: DataSpec
    model: ModelSpec
    train: TrainSpec
    measure: list[MeasureItem]

    @model_validator(mode="after")
    def _batch_fits(self):
        if self.train.batch_size is not None and self.train.batch_size > self.data.n_train:
            raise CrossKeyError(f"train.batch_size {self.train.batch_size} exceeds data.n_train {self.data.n_train}; "
                                "lower the batch size or use more training points",
                                ("train", "batch_size"), ("data", "n_train"))
        return self

    @model_validator(mode="after")
    def _one_multiplier_per_layer(self):
        given = self.train.optimizer.layer_lr
        if given is not None and len(given) != self.model.weight_layers:
            raise CrossKeyError(f"train.optimizer.layer_lr has {len(given)} multipliers; the model has "
                                f"{self.model.weight_layers} weight layers (input side first, readout last)",
                                ("train", "optimizer", "layer_lr"), ("model", "depth"))
        return self

    @model_validator(mode="after")
    def _kernel_kinds_train_by_gradient_descent(self):
        """Kernel kinds evolve under (kernel) gradient descent on the MSE loss, full batch."""
        if not MODEL_KINDS[self.model.kind].kernel:
            return self
        opt = self.train.optimizer
        wrong = [what for ok, what in [
            (opt.name == "gd", "train.optimizer.name 'gd'"), (opt.schedule == "constant", "a constant schedule"),
            (self.train.batch_size is None, "full batch (train.batch_size null)"),
            (opt.layer_lr is None and opt.lr_ratio == 1.0, "one learning rate for all layers"),
            (self.train.loss == "mse", "train.loss 'mse'")] if not ok]
        if wrong:
            raise CrossKeyError(f"model.kind {self.model.kind!r} evolves a kernel by gradient descent on the squared "
                                f"error; it needs {', '.join(wrong)}", ("model", "kind"))
        return self
