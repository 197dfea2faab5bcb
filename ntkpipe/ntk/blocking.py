"""Assemble a Gram array block by block, writing each block in place into the output buffer."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

BlockKernel = Callable[[Int[Array, ""], Int[Array, ""]], Float[Array, "*L a b C C"]]


def block_starts(n: int, size: int) -> list[int]:
    """Start indices of blocks of length ``size <= n`` that cover ``range(n)``.

    The last block is shifted back to end at ``n`` (it overlaps its neighbour, whose rows it recomputes
    with equal values), so every block has one shape and the block kernel compiles once.

    Example: ``block_starts(7, 3) == [0, 3, 4]``.
    """
    return sorted({min(start, n - size) for start in range(0, n, size)})


@partial(jax.jit, donate_argnums=0, static_argnames="mirror")
def _write_block(
    out: Float[Array, "*L n1 n2 C C"],
    block: Float[Array, "*L a b C C"],
    row: Int[Array, ""],
    col: Int[Array, ""],
    mirror: bool,
) -> Float[Array, "*L n1 n2 C C"]:
    """``out`` with ``block`` at ``(row, col)``, or with its mirror ``K[j, i, d, c]`` at ``(col, row)``."""
    if mirror:
        block, row, col = block.swapaxes(-4, -3).swapaxes(-2, -1), col, row
    leading = (0,) * (out.ndim - 4)
    return lax.dynamic_update_slice(out, block, (*leading, row, col, 0, 0))


def assemble_gram(
    block_kernel: BlockKernel,
    shape: tuple[int, ...],
    sizes: tuple[int, int],
    symmetric: bool,
) -> Float[Array, "*L n1 n2 C C"]:
    """Fill a float64 array of ``shape = (*L, n1, n2, C, C)`` with ``block_kernel(row, col)``.

    ``block_kernel`` returns the ``(*L, sizes[0], sizes[1], C, C)`` block whose first entry is
    ``(row, col)``. With ``symmetric`` (x2 is x1, equal sizes) only blocks with ``col >= row`` are
    computed and each is also written mirrored, K[j, i, d, c] = K[i, j, c, d]. The output buffer is
    donated to each write, which is awaited, so peak memory is the output plus one block.
    """
    out = jnp.zeros(shape, jnp.float64)
    for row in block_starts(shape[-4], sizes[0]):
        for col in block_starts(shape[-3], sizes[1]):
            if symmetric and col < row:
                continue
            row_index, col_index = jnp.asarray(row), jnp.asarray(col)
            block = block_kernel(row_index, col_index)
            out = _write_block(out, block, row_index, col_index, mirror=False)
            if symmetric and col > row:
                out = _write_block(out, block, row_index, col_index, mirror=True)
            out.block_until_ready()
    return out
