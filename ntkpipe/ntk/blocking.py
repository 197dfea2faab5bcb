"""Assemble a Gram array block by block, writing each block in place into the output buffer:
eagerly, one compiled block at a time (:func:`assemble_gram`), or as one traced loop (:func:`fill_gram`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

import jax
import jax.core
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from ntkpipe.compile_options import LOOP_EMITTERS, loop_emitter_options

BlockKernel = Callable[[Int[Array, ""], Int[Array, ""]], Float[Array, "..."]]


def block_starts(n: int, size: int) -> list[int]:
    """Start indices of blocks of length ``size <= n`` that cover ``range(n)``.

    The last block is shifted back to end at ``n`` (it overlaps its neighbour, whose rows it recomputes
    with equal values), so every block has one shape and the block kernel compiles once.

    Example: ``block_starts(7, 3) == [0, 3, 4]``.
    """
    return sorted({min(start, n - size) for start in range(0, n, size)})


def _mirrored(block: Float[Array, "..."], output_axes: int) -> Float[Array, "..."]:
    """The block of the transposed kernel: examples swapped, and outputs too when there are two."""
    block = block.swapaxes(-2 - output_axes, -1 - output_axes)
    return block.swapaxes(-2, -1) if output_axes == 2 else block


def _place(out, block, row, col, output_axes: int):
    leading = (0,) * (out.ndim - 2 - output_axes)
    return lax.dynamic_update_slice(out, block.astype(out.dtype), (*leading, row, col) + (0,) * output_axes)


def _write(
    out: Float[Array, "..."],
    block: Float[Array, "..."],
    row: Int[Array, ""],
    col: Int[Array, ""],
    mirror: bool,
    output_axes: int,
) -> Float[Array, "..."]:
    """``out`` with ``block`` at ``(row, col)``, or with its mirror (:func:`_mirrored`) at ``(col, row)``."""
    if mirror:
        return _place(out, _mirrored(block, output_axes), col, row, output_axes)
    return _place(out, block, row, col, output_axes)


@cache
def _write_block(on_cpu: bool) -> Callable[..., Float[Array, "..."]]:
    """Eager :func:`_write`, its output buffer donated (written in place), compiled with the
    loop emitters on XLA:CPU (:func:`~ntkpipe.compile_options.loop_emitter_options`)."""
    options = LOOP_EMITTERS if on_cpu else None
    return partial(jax.jit, donate_argnums=0, static_argnames=("mirror", "output_axes"), compiler_options=options)(_write)


def assemble_gram(
    block_kernel: BlockKernel,
    shape: tuple[int, ...],
    sizes: tuple[int, int],
    symmetric: bool,
    *,
    output_axes: int = 2,
    dtype=jnp.float64,
) -> Float[Array, "..."]:
    """Fill an array of ``shape = (*L, n1, n2, *O)`` and ``dtype`` with ``block_kernel(row, col)``.

    ``O`` are the ``output_axes`` trailing output axes: ``(C, C)`` for the full kernel, ``(C,)`` for
    its diagonal, ``()`` for its trace. ``block_kernel`` returns the ``(*L, sizes[0], sizes[1], *O)``
    block whose first entry is ``(row, col)``. With ``symmetric`` (x2 is x1, equal sizes) only
    blocks with ``col >= row`` are computed and each is also written mirrored,
    K[j, i, d, c] = K[i, j, c, d]. Eagerly, the output buffer is donated to each write, which is
    awaited, so peak memory is the output plus one block. Under tracing (``jax.jit``, ``vmap``) the
    writes become one traced program and nothing is awaited: the caller blocks on the result.
    """
    out = jnp.zeros(shape, dtype)
    for row in block_starts(shape[-2 - output_axes], sizes[0]):
        for col in block_starts(shape[-1 - output_axes], sizes[1]):
            if symmetric and col < row:
                continue
            row_index, col_index = jnp.asarray(row), jnp.asarray(col)
            block = block_kernel(row_index, col_index)
            traced = isinstance(block, jax.core.Tracer)  # inside jit / vmap: no buffer to donate or await
            write = _write if traced else _write_block(bool(loop_emitter_options()))
            out = write(out, block, row_index, col_index, mirror=False, output_axes=output_axes)
            if symmetric and col > row:
                out = write(out, block, row_index, col_index, mirror=True, output_axes=output_axes)
            if not traced:
                out.block_until_ready()
    return out


def fill_gram(
    block_kernel: BlockKernel,
    shape: tuple[int, ...],
    sizes: tuple[int, int],
    symmetric: bool,
    *,
    output_axes: int = 2,
    dtype=jnp.float64,
) -> Float[Array, "..."]:
    """:func:`assemble_gram` as one ``lax.fori_loop`` over the blocks, for use inside ``jax.jit``.

    The output is the loop's carry, updated in place: memory is the output plus one block, and
    each block's elementwise work is fused into its writes (the mirrored one included). With
    ``symmetric`` the diagonal blocks are written once and the blocks above the diagonal twice.
    """
    rows = block_starts(shape[-2 - output_axes], sizes[0])
    cols = block_starts(shape[-1 - output_axes], sizes[1])
    pairs = [(row, col) for row in rows for col in cols if not symmetric or col >= row]
    out = jnp.zeros(shape, dtype)
    for mirror in (False, True) if symmetric else (False,):
        chosen = [(row, col) for row, col in pairs if not symmetric or (col > row) == mirror]
        if not chosen:
            continue
        starts = jnp.asarray(chosen)

        def write_block(index, out, starts=starts, mirror=mirror):
            row, col = starts[index, 0], starts[index, 1]
            block = block_kernel(row, col)
            if mirror:
                out = _write(out, block, row, col, mirror=True, output_axes=output_axes)
            return _write(out, block, row, col, mirror=False, output_axes=output_axes)

        out = lax.fori_loop(0, len(chosen), write_block, out)
    return out
