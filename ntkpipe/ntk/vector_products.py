r"""Generic NTK of any equinox model by NTK-vector products, never forming the Jacobian of x2.

For a block of x1 rows and a block of x2 rows, each basis cotangent e_{ic} (example i, output c) of
the x1 block is pulled back to parameter space and pushed forward through the x2 block,

    K[i, :, c, :] = J(X₂) J(X₁)ᵀ e_{ic} = jvp(f(X₂), vjp(f(X₁), e_{ic}))

(Novak et al. 2022, "Fast Finite Width Neural Tangent Kernel", Sec. 3: NTK-vector products),
vmapped over the a·C cotangents. The vjp with e_{ic} only involves example i, so it is taken
example by example. Time ≈ n1·n2·C·[FP] (a jvp of the x2 block per x1 row and output) against
n1·C·[FP] + n1·n2·C²·P for Jacobian contraction, with [FP] the FLOPs of one forward pass on one
example and P the number of parameters (:mod:`ntkpipe.ntk.cost`). The pullbacks (rows of the x1
Jacobian, a·C·P per block) are materialized; the x2 Jacobian never is.

The per-layer component ℓ pushes forward only the leaves of that component (the others are closed
over as constants, so the tangent starts at layer ℓ), one jvp per component: up to L times the time
of the full kernel. The components are :func:`~ntkpipe.models.layer_components`.

The diagonal keeps, for the cotangent e_{ic}, only output c of its push-forward,
K[i, :, c, c] = (J(X₂) J(X₁)ᵀ e_{ic})_c, and the trace sums those over c, so no C × C block is
stored; the time is that of the full kernel (a jvp yields all C outputs at once).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from ntkpipe.compile_options import measurement_jit
from ntkpipe.models import layer_components, trainable
from ntkpipe.ntk.blocking import assemble_gram
from ntkpipe.ntk.outputs import OUTPUT_AXES, output_shape


def _pullbacks(arrays, rest, x: Float[Array, "a ..."], num_outputs: int) -> list[Float[Array, "a C ..."]]:
    """vjp of each example's output with each basis cotangent e_c: the leaves of J(x), ``(a, C, *leaf)``."""

    def example_pullbacks(example):
        _, pullback = jax.vjp(lambda leaves: eqx.combine(leaves, rest)(example), arrays)
        (rows,) = jax.vmap(pullback)(jnp.eye(num_outputs, dtype=x.dtype))
        return jax.tree.leaves(rows)

    return jax.vmap(example_pullbacks)(x)


def _pushforward(arrays, rest, x: Float[Array, "b ..."], chosen: tuple[int, ...], tangents: list[Array]) -> Array:
    """``J(x) t`` of shape ``(b, C)`` for a tangent ``t`` on the leaves numbered ``chosen`` (others fixed)."""
    leaves, treedef = jax.tree.flatten(arrays)

    def outputs(chosen_leaves):
        moved = list(leaves)
        for index, leaf in zip(chosen, chosen_leaves):
            moved[index] = leaf
        return jax.vmap(eqx.combine(jax.tree.unflatten(treedef, moved), rest))(x)

    _, pushed = jax.jvp(outputs, ([leaves[i] for i in chosen],), (tangents,))
    return pushed


@measurement_jit
def _gram_block(
    arrays,
    rest,
    x1: Float[Array, "n1 ..."],
    x2: Float[Array, "n2 ..."],
    row: Int[Array, ""],
    col: Int[Array, ""],
    sizes: tuple[int, int],
    groups: tuple[tuple[int, ...], ...],
    num_outputs: int,
    per_layer: bool,
    outputs: str,
) -> Float[Array, "..."]:
    pullbacks = _pullbacks(arrays, rest, lax.dynamic_slice_in_dim(x1, row, sizes[0]), num_outputs)
    x2 = lax.dynamic_slice_in_dim(x2, col, sizes[1])
    grams = []
    for chosen in groups:

        def row_of_kernel(*tangents, chosen=chosen):  # K[i, :, c, :] for the cotangent e_ic
            return _pushforward(arrays, rest, x2, chosen, list(tangents))

        def diagonal_row(c, *tangents, chosen=chosen):  # K[i, :, c, c]
            return _pushforward(arrays, rest, x2, chosen, list(tangents))[:, c]

        tangents = [pullbacks[i] for i in chosen]
        if outputs == "full":
            block = jax.vmap(jax.vmap(row_of_kernel))(*tangents)  # (a, C, b, C)
            grams.append(block.transpose(0, 2, 1, 3))
            continue
        block = jax.vmap(jax.vmap(diagonal_row), in_axes=(None, *[0] * len(tangents)))(
            jnp.arange(num_outputs), *tangents).swapaxes(1, 2)  # (a, b, C)
        grams.append(block if outputs == "diagonal" else block.astype(jnp.float64).sum(-1))
    return jnp.stack(grams) if per_layer else grams[0]


def vector_products_ntk(
    model: eqx.Module,
    x1: Float[Array, "n1 ..."],
    x2: Float[Array, "n2 ..."] | None,
    *,
    per_layer: bool,
    block_size: int,
    outputs: str = "full",
) -> Float[Array, "..."]:
    """NTK of ``model`` (``x2=None``: x1) by NTK-vector products, in block_size × block_size blocks,
    in the dtype of ``x1``, with the output pairs ``outputs`` keeps.

    Memory: the x1 block's pullbacks, block_size·C·#params floats, the tangents of the x2 block's
    activations for all block_size·C cotangents at once, block_size²·C·(activations of one
    example), the output, and one block.
    """
    arrays, rest = trainable(model)
    if per_layer:
        components, count = layer_components(arrays)
        groups = tuple(tuple(i for i, c in enumerate(components) if c == ell) for ell in range(count))
    else:
        groups = (tuple(range(len(jax.tree.leaves(arrays)))),)
    (num_outputs,) = jax.eval_shape(model, x1[0]).shape  # pyright: ignore[reportArgumentType]  # eqx.Module: no __call__
    symmetric, x2 = x2 is None, x1 if x2 is None else x2
    sizes = (min(block_size, len(x1)), min(block_size, len(x2)))
    leading = (len(groups),) if per_layer else ()
    return assemble_gram(
        lambda row, col: _gram_block(arrays, rest, x1, x2, row, col, sizes, groups, num_outputs, per_layer, outputs),
        (*leading, len(x1), len(x2), *output_shape(outputs, num_outputs)),
        sizes,
        symmetric,
        output_axes=OUTPUT_AXES[outputs],
        dtype=x1.dtype,
    )
