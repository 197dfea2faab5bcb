"""Entry point for empirical NTKs: choose the implementation, cast to float64 (or float32), compute."""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ntkpipe.ntk.cost import generic_costs
from ntkpipe.ntk.jacobian import jacobian_ntk
from ntkpipe.ntk.mlp_layers import mlp_layers_ntk, structured_mlp
from ntkpipe.ntk.outputs import Outputs, check_outputs
from ntkpipe.ntk.precision import cast_floats, with_x64
from ntkpipe.ntk.vector_products import vector_products_ntk


class NtkImplementation(enum.Enum):
    """Implementation of :func:`empirical_ntk`.

    Attributes:
        JACOBIAN: generic, for any equinox model. Per-example Jacobians of each trainable leaf are
            materialized for a block of x1 rows and a block of x2 rows and contracted,
            Θ = J(X₁) J(X₂)ᵀ. Time O(n1·n2·C²·P), memory O(block_size·C·P) for P parameters.
        NTK_VECTOR_PRODUCTS: generic, for any equinox model. Each basis cotangent e_ic of an x1
            block is pulled back (vjp) and pushed forward (jvp) through the x2 block,
            K[i, :, c, :] = J(X₂) J(X₁)ᵀ e_ic, so J(X₂) is never formed. Time O(n1·n2·C·[FP]) for
            [FP] the FLOPs of one forward pass on one example; memory O(block_size·C·P) for the
            pullbacks plus O(block_size²·C) activations of one example (the vmapped tangents).
        MLP_LAYERS: structured, for an :class:`~ntkpipe.models.MLP` or a
            :class:`~ntkpipe.models.Linearized` MLP (whose NTK is its origin's). Uses the layer
            factorization K_ℓ = ⟨g_ℓ, g_ℓ'⟩ (c_ℓ²⟨h_{ℓ-1}, h_{ℓ-1}'⟩ + [bias]) with g_ℓ = ∂f/∂z_ℓ,
            so no Jacobian (n_ℓ × n_{ℓ-1} per output) is ever formed: time O(n1·n2·C²·Σ n_ℓ) and
            memory O(n·C·Σ n_ℓ) besides the output — a width-N layer costs N, not N², per example.
            The readout layer, whose g_L = κ·I is the same for every example, costs no product over
            the outputs: K_L = κ²·δ_cd·s_L. For P = 1000, C = 10, two width-500 hidden layers, the
            full float64 Gram takes about one (P·C × N)·(N × P·C) GEMM (``benchmarks/gram_vs_gemm.py``).
        AUTO: ``MLP_LAYERS`` when the model is (a linearization of) an MLP, since it is exact and
            far cheaper in time and memory there. Otherwise the generic implementation with the
            smaller modelled time (Novak et al. 2022, Sec. 3; :mod:`ntkpipe.ntk.cost`):
            Jacobian contraction N·C·[FP] + N²·C²·P against NTK-vector products N²·C·[FP], so
            ``NTK_VECTOR_PRODUCTS`` roughly when [FP] < C·P. The reason: contraction pays C² per
            parameter, vector products pay C per forward FLOP. A dense network has [FP] ≈ 2P, so
            vector products win from about C = 2 outputs on; a conv network reuses each weight at
            every position, [FP] ≫ P, so contraction wins unless C exceeds about [FP]/P. The rule
            is that of the full kernel also for ``per_layer``, where vector products take up to L
            times longer (one push-forward per component).
    """

    JACOBIAN = "jacobian"
    NTK_VECTOR_PRODUCTS = "ntk_vector_products"
    MLP_LAYERS = "mlp_layers"
    AUTO = "auto"


def choose_implementation(
    model: eqx.Module, x1: Float[Array | np.ndarray, "n1 ..."], x2: Float[Array | np.ndarray, "n2 ..."] | None = None
) -> NtkImplementation:
    """The implementation ``AUTO`` resolves to for the NTK of ``model`` on ``x1`` × ``x2`` (enum docstring).

    Only the shapes of ``x1`` and ``x2`` are used (and ``x1[0]`` to count [FP]).
    """
    if structured_mlp(model) is not None:
        return NtkImplementation.MLP_LAYERS
    costs = generic_costs(model, jnp.asarray(x1[0]), len(x1), None if x2 is None else len(x2))
    if costs.vector_products < costs.jacobian:
        return NtkImplementation.NTK_VECTOR_PRODUCTS
    return NtkImplementation.JACOBIAN


def _array(x: ArrayLike) -> Array | np.ndarray:
    """``x`` as it is if it is an array (JAX, traced or NumPy), else as a NumPy array."""
    return x if isinstance(x, jax.Array | np.ndarray) else np.asarray(x)


@with_x64
def empirical_ntk(
    model: eqx.Module,
    x1: Float[ArrayLike, "n1 D"],
    x2: Float[ArrayLike, "n2 D"] | None = None,
    *,
    per_layer: bool = False,
    implementation: NtkImplementation | str = NtkImplementation.AUTO,
    block_size: int = 256,
    outputs: Outputs = "full",
    dtype=jnp.float64,
) -> Float[Array, "..."]:
    r"""Empirical neural tangent kernel of ``model`` over its trainable parameters, in float64 (or float32).

    .. math::
        K_{ijcd} = \sum_θ \frac{∂f_c(x^1_i)}{∂θ} \frac{∂f_d(x^2_j)}{∂θ}
        \qquad \text{(linearized-networks Eq. 2; } Θ = J(X_1) J(X_2)^⊤\text{)}

    θ runs over ``ntkpipe.models.trainable(model)`` (for a ``Linearized`` model: ``params``, whose
    NTK is the constant NTK of ``origin``). Parameters and inputs are cast to float64 (``dtype``).

    With ``per_layer=True`` the sum over θ is split by weight layer: component ℓ sums W_ℓ and b_ℓ,
    and the components add up to the full kernel. The readout/hidden split of the kernel-alignment
    paper is ``K[-1]`` (K_V) vs ``K[:-1].sum(0)`` (K_W). On a non-MLP model (``JACOBIAN``,
    ``NTK_VECTOR_PRODUCTS``; e.g. a :class:`~ntkpipe.models.CNN`: conv layers, dense layers, readout) the
    components follow :func:`ntkpipe.models.layer_components`: the first sequence index in a
    leaf's pytree path (``layers[ℓ].weight`` → ℓ).

    Works inside ``jax.jit`` and ``jax.vmap`` (model and inputs traced): the blocks are traced into
    one program and nothing is awaited, so the caller blocks on the result.

    Args:
        model: equinox module mapping one example ``(D,)`` (or any per-example shape) to ``(C,)``.
        x1: ``(n1, D)`` inputs.
        x2: ``(n2, D)`` inputs, or ``None`` for ``x1``.
        per_layer: return the per-layer components instead of their sum.
        implementation: a :class:`NtkImplementation` (or its value string).
        block_size: rows of ``x1`` and of ``x2`` per compiled block, which is computed once per
            shape; memory grows with it (``JACOBIAN``: ∝ block_size·C·#params;
            ``NTK_VECTOR_PRODUCTS``: also ∝ block_size²·C·activations). ``MLP_LAYERS`` takes
            blocks of at most ``block_size`` and about 640 example-output rows (64 examples at
            C = 10 for the full kernel), which keeps a block in cache. Any value gives the same
            kernel. With ``x2=None`` only blocks on and above the diagonal are computed.
        outputs: which output pairs (:mod:`ntkpipe.ntk.outputs`): ``"full"`` K_ijcd;
            ``"diagonal"`` K_ijcc, shape ``(n1, n2, C)`` (neural-tangents ``diagonal_axes=(-1,)``);
            ``"trace"`` Σ_c K_ijcc, shape ``(n1, n2)`` (neural-tangents ``trace_axes=(-1,)``).
            Neither builds the C × C blocks; ``MLP_LAYERS`` and ``JACOBIAN`` also do C (diagonal)
            or 1 (trace) instead of C² products per example pair.
        dtype: ``jnp.float64`` or ``jnp.float32``, the dtype of the parameters, inputs, GEMMs and
            result. In float32 the per-leaf terms (``JACOBIAN``) are summed in float64 before
            rounding, the L per-layer terms (``MLP_LAYERS``) in float32 (at most L − 1 roundings more,
            and a float32 Gram in 0.8–0.9× the time); XLA's float32 × float32 → float64 dot is an
            upcast on CPU (slower than float64), so the GEMMs themselves accumulate in float32.
            Measured max |K32 − K64| / max |K64|: 2–5e-7 for full, diagonal and traced kernels of
            width-256 MLPs (depth 2–4, ReLU/tanh, biases, C = 1–10, n = 64) by all three
            implementations, 4e-7 (``mlp_layers``, width 500, n = 400) and 2e-7 (``jacobian``) in
            ``benchmarks/ntk_options.py``; ``tests/test_ntk_options.py`` bounds it by 1e-5.

    Returns:
        ``(n1, n2, C, C)`` (``(n1, n2, C)``, ``(n1, n2)`` for ``outputs`` ``"diagonal"``,
        ``"trace"``), with a leading ``L`` axis with ``per_layer=True``; use :func:`flatten_gram`
        for the ``(n1·C, n2·C)`` matrix of the full kernel.

    Raises:
        ValueError: ``block_size < 1``, an unknown ``outputs``, or a ``dtype`` other than
            float32 / float64.
        TypeError: ``MLP_LAYERS`` was asked for a model that is not (a linearization of) an MLP.

    Example:
        >>> model = MLP(in_size=8, width=256, depth=3, out_size=10, key=jax.random.key(0))
        >>> K = empirical_ntk(model, x)                          # (n, n, 10, 10)
        >>> components = empirical_ntk(model, x, per_layer=True)   # (3, n, n, 10, 10)
        >>> K_V, K_W = components[-1], components[:-1].sum(0)
    """
    implementation = NtkImplementation(implementation)
    if block_size < 1:
        raise ValueError(f"block_size must be a positive number of examples, got {block_size}")
    check_outputs(outputs)
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.dtype(jnp.float64), jnp.dtype(jnp.float32)):
        raise ValueError(f"dtype must be float64 or float32, got {dtype}")
    options = {"per_layer": per_layer, "block_size": block_size, "outputs": outputs}
    mlp = structured_mlp(model)
    if implementation is NtkImplementation.MLP_LAYERS or (implementation is NtkImplementation.AUTO and mlp is not None):
        if mlp is None:
            raise TypeError(
                f"NtkImplementation.MLP_LAYERS needs an ntkpipe MLP or a Linearized MLP, got "
                f"{type(model).__name__}; use NtkImplementation.JACOBIAN (or AUTO) for other models"
            )
        return mlp_layers_ntk(mlp, _array(x1), None if x2 is None else _array(x2), dtype=dtype,
                              **options)  # casts inside its program
    model = cast_floats(model, dtype)
    x1 = jnp.asarray(x1, dtype)
    x2 = None if x2 is None else jnp.asarray(x2, dtype)
    if implementation is NtkImplementation.AUTO:
        implementation = choose_implementation(model, x1, x2)
    if implementation is NtkImplementation.JACOBIAN:
        return jacobian_ntk(model, x1, x2, **options)
    return vector_products_ntk(model, x1, x2, **options)
