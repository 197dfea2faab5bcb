r"""Generic NTK of any equinox model by blocked contraction of per-leaf Jacobians.

    Θ^{cd}(x, x') = Σ_leaves Σ_p ∂f_c(x)/∂θ_p · ∂f_d(x')/∂θ_p = J(x) J(x')ᵀ

over the trainable leaves (:func:`ntkpipe.models.trainable`). Each block of (x1 rows) × (x2 rows)
materializes the two Jacobians, so memory is ∝ block_size × C × #params. For x2 = x1 only the
blocks on and above the diagonal are computed. The diagonal Σ_p ∂f_c ∂f_c' and the trace
Σ_c Σ_p ∂f_c ∂f_c' contract the output axis with the parameters (:mod:`ntkpipe.ntk.outputs`), C
and 1 instead of C² products per example pair. Leaves are summed in float64 whatever the dtype.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from ntkpipe.models import layer_components, trainable
from ntkpipe.ntk.blocking import assemble_gram
from ntkpipe.ntk.outputs import OUTPUT_AXES, factor_products, output_shape


def _per_example_jacobians(arrays, rest, x: Float[Array, "n ..."]) -> list[Float[Array, "n C P"]]:
    def output(leaves, example):
        return eqx.combine(leaves, rest)(example)

    jacobians = jax.vmap(jax.jacrev(output), in_axes=(None, 0))(arrays, x)
    return [j.reshape(*j.shape[:2], -1) for j in jax.tree.leaves(jacobians)]


@eqx.filter_jit
def _gram_block(
    arrays,
    rest,
    x1: Float[Array, "n1 ..."],
    x2: Float[Array, "n2 ..."],
    row: Int[Array, ""],
    col: Int[Array, ""],
    sizes: tuple[int, int],
    components: tuple[int, ...] | None,
    outputs: str,
) -> Float[Array, "..."]:
    jacobians1 = _per_example_jacobians(arrays, rest, lax.dynamic_slice_in_dim(x1, row, sizes[0]))
    jacobians2 = _per_example_jacobians(arrays, rest, lax.dynamic_slice_in_dim(x2, col, sizes[1]))
    terms = [factor_products(j1, j2, outputs).astype(jnp.float64) for j1, j2 in zip(jacobians1, jacobians2)]
    if components is None:
        return sum(terms[1:], terms[0])
    grams = [
        sum(term for term, c in zip(terms, components) if c == component)
        for component in range(max(components) + 1)
    ]
    return jnp.stack(grams)


def jacobian_ntk(
    model: eqx.Module,
    x1: Float[Array, "n1 ..."],
    x2: Float[Array, "n2 ..."] | None,
    *,
    per_layer: bool,
    block_size: int,
    outputs: str = "full",
) -> Float[Array, "..."]:
    """NTK of ``model`` (``x2=None``: x1) over its trainable leaves, in block_size × block_size blocks,
    in the dtype of ``x1``, with the output pairs ``outputs`` keeps.

    Memory: two blocks of Jacobians, 2·block_size·C·#params floats, the output, and one block.
    """
    arrays, rest = trainable(model)
    components, count = layer_components(arrays) if per_layer else (None, 0)
    (num_outputs,) = jax.eval_shape(model, x1[0]).shape
    symmetric, x2 = x2 is None, x1 if x2 is None else x2
    sizes = (min(block_size, len(x1)), min(block_size, len(x2)))
    leading = (count,) if per_layer else ()
    return assemble_gram(
        lambda row, col: _gram_block(arrays, rest, x1, x2, row, col, sizes, components, outputs),
        (*leading, len(x1), len(x2), *output_shape(outputs, num_outputs)),
        sizes,
        symmetric,
        output_axes=OUTPUT_AXES[outputs],
        dtype=x1.dtype,
    )
