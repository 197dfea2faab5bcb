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
With float32 features each layer's block is computed in float32 and the layers are summed in float64.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from ntkpipe.models import MLP, Linearized
from ntkpipe.ntk.blocking import assemble_gram
from ntkpipe.ntk.outputs import (
    OUTPUT_AXES,
    factor_products,
    output_shape,
    times_pair_scale,
)

# Per example (batched: a leading example axis): layer inputs h_{ℓ-1} of shape (n_{ℓ-1},) and
# output gradients g_ℓ = ∂f/∂z_ℓ of shape (C, n_ℓ), for ℓ = 1 … L.
LayerFeatures = tuple[tuple[Array, ...], tuple[Array, ...]]


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


batched_layer_features = eqx.filter_jit(jax.vmap(layer_features, in_axes=(None, 0)))


def _layer_grams(
    mlp: MLP, features1: LayerFeatures, features2: LayerFeatures, outputs: str
) -> list[Float[Array, "a b *O"]]:
    """K_ℓ for each layer, in the features' dtype, with the output pairs ``outputs`` keeps."""
    bias = 0.0 if mlp.biases is None else 1.0
    (inputs1, grads1), (inputs2, grads2) = features1, features2
    return [
        times_pair_scale(factor_products(g1, g2, outputs), c**2 * (h1 @ h2.T) + bias)
        for c, h1, g1, h2, g2 in zip(mlp.multipliers, inputs1, grads1, inputs2, grads2)
    ]


def _rows(features: LayerFeatures, start: Int[Array, ""], size: int) -> LayerFeatures:
    return jax.tree.map(lambda a: lax.dynamic_slice_in_dim(a, start, size), features)


@eqx.filter_jit
def _gram_block(
    mlp: MLP,
    features1: LayerFeatures,
    features2: LayerFeatures,
    row: Int[Array, ""],
    col: Int[Array, ""],
    sizes: tuple[int, int],
    per_layer: bool,
    outputs: str,
) -> Float[Array, "..."]:
    grams = _layer_grams(mlp, _rows(features1, row, sizes[0]), _rows(features2, col, sizes[1]), outputs)
    grams = [gram.astype(jnp.float64) for gram in grams]  # layers summed in float64
    return jnp.stack(grams) if per_layer else sum(grams[1:], grams[0])


def mlp_layers_ntk(
    mlp: MLP,
    x1: Float[Array, "n1 D"],
    x2: Float[Array, "n2 D"] | None,
    *,
    per_layer: bool,
    block_size: int,
    outputs: str = "full",
) -> Float[Array, "..."]:
    """NTK of ``mlp`` (``x2=None``: x1) by layer factorization, in blocks of ``block_size``, in the
    dtype of ``mlp`` and ``x1`` (float64 or float32), with the output pairs ``outputs`` keeps.

    Memory: the features, O((n1 + n2)·C·Σ n_ℓ), the output, and one block.
    """
    features1 = batched_layer_features(mlp, x1)
    features2 = features1 if x2 is None else batched_layer_features(mlp, x2)
    n1 = len(x1)
    n2 = n1 if x2 is None else len(x2)
    sizes = (min(block_size, n1), min(block_size, n2))
    num_outputs = mlp.weights[-1].shape[0]
    leading = (mlp.depth,) if per_layer else ()
    return assemble_gram(
        lambda row, col: _gram_block(mlp, features1, features2, row, col, sizes, per_layer, outputs),
        (*leading, n1, n2, *output_shape(outputs, num_outputs)),
        sizes,
        symmetric=x2 is None,
        output_axes=OUTPUT_AXES[outputs],
        dtype=x1.dtype,
    )
