r"""Generic NTK of any equinox model by blocked contraction of per-leaf Jacobians.

    Θ^{cd}(x, x') = Σ_leaves Σ_p ∂f_c(x)/∂θ_p · ∂f_d(x')/∂θ_p = J(x) J(x')ᵀ

over the trainable leaves (:func:`ntkpipe.models.trainable`). Each block of (x1 rows) × (x2 rows)
contracts the two blocks' Jacobians, so memory is ∝ block_size × C × #params. The Jacobians of a
block row are computed once and reused along the row (blocks come row by row), and a diagonal
block of x2 = x1 contracts them with themselves; Jacobians and contraction are compiled apart (as
one program XLA:CPU took 2–3.5× longer for LeNet-5 on 32×32×3 inputs). For x2 = x1 only the blocks on
and above the diagonal are computed. The diagonal Σ_p ∂f_c ∂f_c' and the trace
Σ_c Σ_p ∂f_c ∂f_c' contract the output axis with the parameters (:mod:`ntkpipe.ntk.outputs`), C
and 1 instead of C² products per example pair. Leaves are summed in float64 whatever the dtype.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from ntkpipe.compile_options import measurement_jit
from ntkpipe.models import layer_components, trainable
from ntkpipe.ntk.blocking import assemble_gram
from ntkpipe.ntk.outputs import OUTPUT_AXES, factor_products, output_shape


def _per_example_jacobians(arrays, rest, x: Float[Array, "n ..."]) -> list[Float[Array, "n C P"]]:
    def output(leaves, example):
        return eqx.combine(leaves, rest)(example)

    jacobians = jax.vmap(jax.jacrev(output), in_axes=(None, 0))(arrays, x)
    return [j.reshape(*j.shape[:2], -1) for j in jax.tree.leaves(jacobians)]


@measurement_jit
def _block_jacobians(arrays, rest, x: Float[Array, "n ..."], start: Int[Array, ""], size: int) -> list[Array]:
    """Per-example Jacobians of rows ``start … start + size`` of ``x``, one (size, C, P_leaf) per leaf."""
    return _per_example_jacobians(arrays, rest, lax.dynamic_slice_in_dim(x, start, size))


@measurement_jit
def _contract(
    jacobians1: list[Array], jacobians2: list[Array], components: tuple[int, ...] | None, outputs: str
) -> Float[Array, "..."]:
    """Σ_leaves J1 J2ᵀ (per component with ``components``), leaves summed in float64."""
    terms = [factor_products(j1, j2, outputs).astype(jnp.float64) for j1, j2 in zip(jacobians1, jacobians2)]
    if components is None:
        return sum(terms[1:], terms[0])
    grams = [
        sum(term for term, c in zip(terms, components) if c == component)
        for component in range(max(components) + 1)
    ]
    return jnp.stack(grams)


def _start(index: Int[Array, ""]) -> int | None:
    """A block start as a Python int, or ``None`` when it is traced (inside ``jax.jit``)."""
    return None if isinstance(index, jax.core.Tracer) else int(index)


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
    (num_outputs,) = jax.eval_shape(model, x1[0]).shape  # pyright: ignore[reportArgumentType]  # eqx.Module: no __call__
    symmetric, x2 = x2 is None, x1 if x2 is None else x2
    sizes = (min(block_size, len(x1)), min(block_size, len(x2)))
    leading = (count,) if per_layer else ()
    row_jacobians: dict[int | None, list[Array]] = {}  # the current block row's, reused along the row

    def gram_block(row, col):
        key = _start(row)
        if key is None or key not in row_jacobians:
            row_jacobians.clear()
            row_jacobians[key] = _block_jacobians(arrays, rest, x1, row, sizes[0])
        jacobians1 = row_jacobians[key]
        same_rows = symmetric and key is not None and key == _start(col)
        jacobians2 = jacobians1 if same_rows else _block_jacobians(arrays, rest, x2, col, sizes[1])
        return _contract(jacobians1, jacobians2, components, outputs)

    return assemble_gram(
        gram_block,
        (*leading, len(x1), len(x2), *output_shape(outputs, num_outputs)),
        sizes,
        symmetric,
        output_axes=OUTPUT_AXES[outputs],
        dtype=x1.dtype,
    )
