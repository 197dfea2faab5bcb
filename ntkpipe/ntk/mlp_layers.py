r"""Structured NTK of an :class:`~ntkpipe.models.MLP` from per-layer features, no Jacobians.

With z_ℓ = c_ℓ W_ℓ h_{ℓ-1} + b_ℓ and g_ℓ(x) = ∂f/∂z_ℓ ∈ R^{C×n_ℓ}, the chain rule gives
∂f_c/∂W_ℓ = c_ℓ g_ℓ^c h_{ℓ-1}ᵀ and ∂f_c/∂b_ℓ = g_ℓ^c, hence the layer-ℓ kernel

    K_ℓ^{cd}(x, x') = ⟨g_ℓ^c(x), g_ℓ^d(x')⟩ · (c_ℓ² ⟨h_{ℓ-1}(x), h_{ℓ-1}(x')⟩ + [bias])

and Θ = Σ_ℓ K_ℓ. Features cost O(n·C·Σ n_ℓ) memory; the Gram is built block by block.

Traced and diagonal kernels contract the output side before the GEMM. The layer factor
s_ℓ(x, x') = c_ℓ² ⟨h_{ℓ-1}(x), h_{ℓ-1}(x')⟩ + [bias] does not depend on c, so

    K_ℓ^{cc}(x, x') = ⟨g_ℓ^c(x), g_ℓ^c(x')⟩ · s_ℓ(x, x')
    Σ_c K_ℓ^{cc}(x, x') = (Σ_c ⟨g_ℓ^c(x), g_ℓ^c(x')⟩) · s_ℓ(x, x') = ⟨vec g_ℓ(x), vec g_ℓ(x')⟩ · s_ℓ(x, x'):

the trace needs one GEMM over the flattened (C·n_ℓ) gradients, n1·n2·C·n_ℓ multiply-adds instead
of the n1·n2·C²·n_ℓ of the full kernel (:mod:`ntkpipe.ntk.outputs`), and no C × C block exists.
With float32 features each layer's block is computed and the L layers are summed in float32: the sum adds
at most (L − 1) roundings to a kernel whose products already carry float32 rounding over n_ℓ terms, and a
float64 sum made the fused pass over each block the larger part of the float32 Gram's time.

The readout layer L has f = κ z_L, so g_L = κ·I for every example and K_L^{cd} = δ_cd κ² s_L(x, x'):
no product over n_L per pair, only s_L times the constant (C, C) matrix g_L g_Lᵀ = κ²·I, fused into
the block's sum (for the trace C κ² s_L). That g_L is one matrix for all inputs is read from the
traced program (:func:`has_constant_readout_gradient`), not assumed from the parameterization.

The Gram is one compiled loop over blocks of about :func:`tile_rows` example-output rows (b·C), written
in place (:func:`ntkpipe.ntk.blocking.fill_gram`): per block, the two products of each layer
(b·C × n_ℓ)·(n_ℓ × b·C) and (b × n_{ℓ-1})·(n_{ℓ-1} × b), then one fused pass that sums the layers and
writes the block (and, for x2 = x1, its mirror). Small blocks keep that pass in cache and, for
x2 = x1, bring the blocks computed on and above the diagonal close to half of them.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, Int

from ntkpipe.compile_options import measurement_jit
from ntkpipe.models import MLP, Linearized
from ntkpipe.models.fixed import fixed_mask
from ntkpipe.ntk.blocking import fill_gram
from ntkpipe.ntk.outputs import (
    OUTPUT_AXES,
    factor_products,
    output_shape,
    times_pair_scale,
)
from ntkpipe.ntk.precision import cast_floats

TILE_ROWS = 640
"""Example-output rows b·C of a block on CPU (full kernel; b for traced and diagonal ones), at most block_size
examples: small enough that the fused pass over a block stays in cache (``benchmarks/README.md``)."""

ACCELERATOR_TILE_ROWS = 2560
"""The same on a GPU or TPU, where each step of the block loop is a kernel launch: on an H200 the full
Gram of ``benchmarks/gram_vs_gemm.py`` takes 3.3 GEMMs with these tiles against 5.0 with the CPU's."""


def tile_rows() -> int:
    """:data:`TILE_ROWS` on CPU, :data:`ACCELERATOR_TILE_ROWS` on JAX's default backend otherwise."""
    return TILE_ROWS if jax.default_backend() == "cpu" else ACCELERATOR_TILE_ROWS

# Per example (batched: a leading example axis): layer inputs h_{ℓ-1} of shape (n_{ℓ-1},) and
# output gradients g_ℓ = ∂f/∂z_ℓ of shape (C, n_ℓ), for ℓ = 1 … L.
LayerFeatures = tuple[tuple[Array, "..."], tuple[Array, "..."]]


def structured_mlp(model: eqx.Module) -> MLP | None:
    """The MLP whose layer structure gives ``model``'s NTK, or ``None`` if there is none.

    An :class:`MLP` is its own; a :class:`Linearized` MLP has the (constant) NTK of its origin θ₀.
    """
    if type(model) is MLP:
        return model
    if isinstance(model, Linearized) and type(model.origin) is MLP:
        return model.origin
    return None


def layer_features(mlp: MLP, x: Float[Array, " D"]) -> LayerFeatures:
    """``(h_0 … h_{L-1}), (g_1 … g_L)`` for one example; g_ℓ by ``jacrev`` w.r.t. z_ℓ offsets at 0."""
    offsets = tuple(jnp.zeros(w.shape[0], w.dtype) for w in mlp.weights)

    def output_with_inputs(o):
        inputs, output = mlp.layer_inputs_and_output(x, o)
        return output, inputs

    grads, inputs = jax.jacrev(output_with_inputs, has_aux=True)(offsets)
    return inputs, grads


batched_layer_features = measurement_jit(jax.vmap(layer_features, in_axes=(None, 0)))


def has_constant_readout_gradient(mlp: MLP) -> bool:
    """Whether the last layer's output gradient g_L(x) = ∂f/∂z_L is one matrix for every input and all
    weights (f is linear in z_L, as f = κ z_L): then K_L = s_L ⊗ g_L g_Lᵀ (module docstring).

    Decided from the traced program, not from the parameterization: g_L is traced (shapes only, no
    computation) under ``jax.vmap`` over the weights and the input with an unmapped output, which fails
    when it depends on either. ``mlp`` may be traced (inside ``jax.jit`` or ``jax.vmap``). Decided once
    per structure and shapes: the key is the flattened network (a checkpoint's Gram pays ~10 µs for it).
    """
    leaves, treedef = jax.tree.flatten(mlp)
    return _traced_readout_gradient_is_constant(treedef, tuple(map(_shape_of, leaves)))


def _shape_of(leaf):
    """An array's (or tracer's) shape, dtype and weak type; other leaves as they are. NumPy weights (a
    pack's host copy) are never weak."""
    if not eqx.is_array(leaf):
        return leaf
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, weak_type=getattr(leaf, "weak_type", False))


def _is_shape(leaf) -> bool:
    return isinstance(leaf, jax.ShapeDtypeStruct)


@functools.lru_cache(maxsize=64)
def _traced_readout_gradient_is_constant(treedef, leaves: tuple) -> bool:
    """Whether g_L stays unbatched when the weights and the input are batched (the fixed scalars,
    c_ℓ and κ, are not: they are the same for every example); ``leaves`` are the network's, arrays as
    their shapes."""
    shapes = jax.tree.unflatten(treedef, leaves)
    fixed, rest = eqx.partition(shapes, fixed_mask(shapes, _is_shape))
    arrays, static = eqx.partition(rest, _is_shape)
    batched = jax.tree.map(lambda a: jax.ShapeDtypeStruct((1, *a.shape), a.dtype), arrays)
    x = jax.ShapeDtypeStruct((1, arrays.weights[0].shape[1]), arrays.weights[0].dtype)

    def readout_gradient(arrays, fixed, x):
        return layer_features(eqx.combine(arrays, fixed, static), x)[1][-1]

    try:
        jax.eval_shape(jax.vmap(readout_gradient, in_axes=(0, None, 0), out_axes=None), batched, fixed, x)
    except ValueError:  # the output is batched: g_L depends on the input or the weights
        return False
    return True


def _layer_grams(
    mlp: MLP,
    features1: LayerFeatures,
    features2: LayerFeatures,
    constant_readout: bool,
    outputs: str,
) -> list[Float[Array, "a b *O"]]:
    """K_ℓ for each layer, in the features' dtype, with the output pairs ``outputs`` keeps; with
    ``constant_readout`` the readout's as s_L ⊗ g_L g_Lᵀ from the first example's g_L."""
    bias = 0.0 if mlp.biases is None else 1.0
    (inputs1, grads1), (inputs2, grads2) = features1, features2
    grams = []
    for layer, (c, h1, g1, h2, g2) in enumerate(zip(mlp.multipliers, inputs1, grads1, inputs2, grads2)):
        scale = jnp.asarray(c.value**2).astype(h1.dtype) * (h1 @ h2.T) + bias  # c² in float64, rounded once
        if layer == mlp.depth - 1 and constant_readout:
            products = factor_products(g1[:1], g1[:1], outputs)  # (1, 1, *O), the same for every pair
            grams.append(times_pair_scale(jnp.broadcast_to(products, (*scale.shape, *products.shape[2:])), scale))
        else:
            grams.append(times_pair_scale(factor_products(g1, g2, outputs), scale))
    return grams


def _traced_last_hidden(mlp: MLP, features: LayerFeatures) -> LayerFeatures:
    r"""``features`` with the last hidden layer's gradients g_{L-1} (n, C, n_{L-1}) replaced by one row
    v (n, 1, n_{L-1}) that has the same traced products, ⟨v(x), v(x')⟩ = Σ_c ⟨g_{L-1}^c(x), g_{L-1}^c(x')⟩.

    With a constant readout gradient g_L, g_{L-1}^c(x) = φ'(z_{L-1}(x)) ⊙ R_c with R = g_L c_L W_L (C × n_{L-1}),
    so Σ_c g^c_k(x) g^c_k(x') = φ'_k(x) φ'_k(x') |R_{·k}|², and v_k = Σ_c g^c_k R_{ck} / |R_{·k}| = φ'_k |R_{·k}|
    (0 where |R_{·k}| = 0, as every g^c_k is then): the layer's trace product is n_{L-1} per pair instead of
    C·n_{L-1}."""
    inputs, grads = features
    readout = mlp.multipliers[-1].like(mlp.weights[-1]) * mlp.weights[-1]
    r = grads[-1][0] @ readout  # (C, n_{L-1}): the same for every example
    norm = jnp.sqrt(jnp.sum(r * r, axis=0))
    v = jnp.einsum("ack,ck->ak", grads[-2], r) / jnp.where(norm > 0, norm, 1)
    return inputs, (*grads[:-2], v[:, None, :], grads[-1])


def _rows(features: LayerFeatures, start: Int[Array, ""], size: int) -> LayerFeatures:
    return jax.tree.map(lambda a: lax.dynamic_slice_in_dim(a, start, size), features)


def _gram(
    mlp: MLP,
    features1: LayerFeatures,
    features2: LayerFeatures | None,
    constant_readout: bool,
    sizes: tuple[int, int],
    per_layer: bool,
    outputs: str,
) -> Float[Array, "..."]:
    """The Gram (``features2=None``: x2 = x1) by :func:`fill_gram`, layers summed per block in the features' dtype."""
    if outputs == "trace" and constant_readout and mlp.depth > 1 and mlp.weights[-1].shape[0] > 1:
        features1 = _traced_last_hidden(mlp, features1)
        features2 = None if features2 is None else _traced_last_hidden(mlp, features2)
    second = features1 if features2 is None else features2

    def block(row, col):
        grams = _layer_grams(
            mlp, _rows(features1, row, sizes[0]), _rows(second, col, sizes[1]), constant_readout, outputs
        )
        return jnp.stack(grams) if per_layer else sum(grams[1:], grams[0])

    n1, n2 = len(features1[0][0]), len(second[0][0])
    num_outputs = features1[1][-1].shape[1]
    leading = (mlp.depth,) if per_layer else ()
    return fill_gram(
        block,
        (*leading, n1, n2, *output_shape(outputs, num_outputs)),
        sizes,
        symmetric=features2 is None,
        output_axes=OUTPUT_AXES[outputs],
        dtype=features1[0][0].dtype,
    )


def block_rows(n: int, num_outputs: int, block_size: int, outputs: str) -> int:
    """Examples per block: at most :func:`tile_rows` example-output rows (b·C for the full kernel, b
    otherwise), ``block_size`` and ``n``, and then as few as still need the same number of blocks
    k = ⌈n / b_max⌉, b = ⌈n / k⌉, so that the last block barely overlaps its neighbour (n = 100 at
    b_max = 64: two blocks of 50, not 64 and 64 recomputing 28 rows)."""
    per_example = num_outputs if outputs == "full" else 1
    largest = max(1, min(block_size, n, tile_rows() // per_example))
    return -(-n // -(-n // largest))


def mlp_layers_ntk(
    mlp: MLP,
    x1: Float[Array | np.ndarray, "n1 D"],
    x2: Float[Array | np.ndarray, "n2 D"] | None,
    *,
    per_layer: bool,
    block_size: int,
    outputs: str = "full",
    dtype=jnp.float64,
) -> Float[Array, "..."]:
    """NTK of ``mlp`` (``x2=None``: x1) by layer factorization, in blocks of at most ``block_size``
    examples (:func:`block_rows`), in ``dtype`` (float64 or float32: the weights and inputs are cast
    to it), with the output pairs ``outputs`` keeps. One compiled program: the casts, the features
    and the Gram.

    Memory: the features, O((n1 + n2)·C·Σ n_ℓ), the output, and one block.
    """
    num_outputs = mlp.weights[-1].shape[0]
    n2 = len(x1) if x2 is None else len(x2)
    sizes = (block_rows(len(x1), num_outputs, block_size, outputs), block_rows(n2, num_outputs, block_size, outputs))
    return _cast_ntk(mlp, x1, x2, sizes, per_layer, outputs, jnp.dtype(dtype))


@measurement_jit
def _cast_ntk(mlp, x1, x2, sizes, per_layer, outputs, dtype):
    """:func:`_gram` of the features of ``mlp`` and the inputs, each cast to ``dtype`` first; whether the
    readout gradient is constant is decided once, when the program is traced."""
    constant_readout = has_constant_readout_gradient(mlp)
    mlp = cast_floats(mlp, dtype)
    features1 = batched_layer_features(mlp, jnp.asarray(x1, dtype))
    features2 = None if x2 is None else batched_layer_features(mlp, jnp.asarray(x2, dtype))
    return _gram(mlp, features1, features2, constant_readout, sizes, per_layer, outputs)
