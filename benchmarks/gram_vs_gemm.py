"""The structured MLP Gram against the matrix products it is made of, timed in one process.

    python benchmarks/gram_vs_gemm.py                 # P = 1000, D = 64, C = 10, 2 × 500 ReLU
    python benchmarks/gram_vs_gemm.py --points 300    # smaller

ntkpipe's full Gram (``empirical_ntk``, ``mlp_layers``, x2 = x1: an (P, P, C, C) array), in float64
and in float32, is timed against, in the same dtype and the same process, alternating runs:

* one GEMM (P·C × N)·(N × P·C) with N the width: the product one hidden layer's g_ℓ Gram needs
  (the Gram is also given per hidden layer: Gram / (hidden layers × GEMM));
* the GEMMs the structured Gram is made of, summed over the layers ℓ = 1 … L:
  ⟨g_ℓ, g_ℓ'⟩ = (P·C × n_ℓ)·(n_ℓ × P·C) and ⟨h_{ℓ-1}, h_{ℓ-1}'⟩ = (P × n_{ℓ-1})·(n_{ℓ-1} × P),
  2·Σ_ℓ ((P·C)² n_ℓ + P² n_{ℓ-1}) FLOPs (full products; with x2 = x1 the Gram needs only the blocks on
  and above the diagonal).

and the traced kernel Σ_c K_ijcc (jitted, ``outputs="trace"``) against its GEMM (P × C·N)·(C·N × P), in
both dtypes; each Gram's ratios to its GEMM's median are given as min / median / max over the runs.

Peak memory of the float64 Gram is measured in a fresh process, compiled ahead of time as one jitted
program: its peak RSS above its RSS before the call on CPU, the device's ``peak_bytes_in_use`` on a
GPU (traced and diagonal kernels: ``ntk_options.py``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import pairwise
from multiprocessing import get_context
from pathlib import Path

import jax
import jax.numpy as jnp

from ntkpipe.models import MLP
from ntkpipe.ntk import empirical_ntk

jax.config.update("jax_enable_x64", True)  # the float64 Gram and GEMM (ntkpipe sets nothing on import)


def make_model(dim: int, width: int, hidden: int, outputs: int, seed: int = 0) -> MLP:
    """The benchmark network: float64, standard parameterization, σ = √2, no biases."""
    return MLP(dim, width, hidden + 1, outputs, activation="relu", sigma=2**0.5,
               dtype=jnp.float64, key=jax.random.key(seed))


def inputs(points: int, dim: int, seed: int = 0) -> jax.Array:
    """Standard normal float64 inputs."""
    return jax.random.normal(jax.random.key(seed + 1), (points, dim), jnp.float64)


def layer_gemm_flops(points: int, outputs: int, sizes: list[int]) -> int:
    """2·Σ_ℓ ((P·C)² n_ℓ + P² n_{ℓ-1}): the products of the structured Gram, as full GEMMs."""
    return 2 * sum((points * outputs) ** 2 * n_out + points**2 * n_in for n_in, n_out in pairwise(sizes))


def gram_peak_bytes(dim: int, width: int, hidden: int, outputs: int, points: int, block_size: int) -> int | None:
    """Memory one Gram adds at its peak, measured in a fresh process (an allocator that already holds
    freed buffers would hide it): device ``peak_bytes_in_use`` on a GPU, else the peak RSS
    (``VmHWM``) above the RSS before the call. The Gram (features and blocks) is compiled ahead of
    time as one ``jax.jit`` program, so compilation is not counted. ``None`` where unreadable."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(_fresh_gram_peak, dim, width, hidden, outputs, points, block_size).result()


def _fresh_gram_peak(dim, width, hidden, outputs, points, block_size) -> int | None:
    model, x = make_model(dim, width, hidden, outputs), inputs(points, dim)
    gram = jax.jit(lambda model, x: empirical_ntk(model, x, implementation="mlp_layers", block_size=block_size))
    compiled = gram.lower(model, x).compile()
    device = jax.devices()[0]
    if device.platform != "cpu":
        before = (device.memory_stats() or {}).get("bytes_in_use")
        jax.block_until_ready(compiled(model, x))
        peak = (device.memory_stats() or {}).get("peak_bytes_in_use")
        return None if before is None or peak is None else peak - before
    before = status_bytes("VmRSS")
    jax.block_until_ready(compiled(model, x))
    peak = status_bytes("VmHWM")
    return None if before is None or peak is None else peak - before


def status_bytes(field: str) -> int | None:
    """``VmRSS`` (resident set now) or ``VmHWM`` (its peak) from Linux ``/proc/self/status``, or ``None``.
    (``ru_maxrss`` would not do: it keeps the parent's resident set across fork and exec.)"""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith(field + ":")), None)


def timed(call) -> float:
    start = time.perf_counter()
    jax.block_until_ready(call())
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000, help="P, inputs (x2 = x1)")
    parser.add_argument("--dim", type=int, default=64, help="D, input dimension")
    parser.add_argument("--width", type=int, default=500, help="N, hidden width")
    parser.add_argument("--hidden", type=int, default=2, help="hidden layers")
    parser.add_argument("--outputs", type=int, default=10, help="C, outputs")
    parser.add_argument("--repeats", type=int, default=10, help="alternating timed runs of each")
    parser.add_argument("--block-size", type=int, default=256, help="empirical_ntk block_size")
    args = parser.parse_args(argv)

    P, C, N = args.points, args.outputs, args.width
    model = make_model(args.dim, N, args.hidden, C)
    x = inputs(P, args.dim)
    sizes = [args.dim] + [N] * args.hidden + [C]
    keys = jax.random.split(jax.random.key(2), 2 * len(sizes))
    a = jax.random.normal(keys[0], (P * C, N), jnp.float64)
    b = jax.random.normal(keys[1], (P * C, N), jnp.float64)
    a32, b32 = a.astype(jnp.float32), b.astype(jnp.float32)
    g = [jax.random.normal(k, (P * C, n), jnp.float64) for k, n in zip(keys[2:], sizes[1:])]
    h = [jax.random.normal(k, (P, n), jnp.float64) for k, n in zip(keys[len(sizes):], sizes[:-1])]
    gemm = jax.jit(lambda a, b: a @ b.T)
    layer_gemms = jax.jit(lambda g, h: ([u @ u.T for u in g], [v @ v.T for v in h]))
    # the traced kernel Σ_c K_ijcc: one GEMM over the flattened C·N output gradients per layer, so its
    # reference is (P × C·N)·(C·N × P)
    traced = jax.jit(lambda model, x, dtype: empirical_ntk(model, x, implementation="mlp_layers", outputs="trace",
                                                           block_size=args.block_size, dtype=dtype),
                     static_argnums=2)
    tgemm = jax.jit(lambda a, b: a.reshape(P, C * N) @ b.reshape(P, C * N).T)
    cases = {
        "gram": lambda: empirical_ntk(model, x, implementation="mlp_layers", block_size=args.block_size),
        "gemm": lambda: gemm(a, b),
        "layer_gemms": lambda: layer_gemms(g, h),
        "gram32": lambda: empirical_ntk(model, x, implementation="mlp_layers", block_size=args.block_size,
                                        dtype=jnp.float32),
        "gemm32": lambda: gemm(a32, b32),
        "traced": lambda: traced(model, x, jnp.float64),
        "traced32": lambda: traced(model, x, jnp.float32),
        "tgemm": lambda: tgemm(a, b),
        "tgemm32": lambda: tgemm(a32, b32),
    }
    for call in cases.values():  # compile
        jax.block_until_ready(call())
    times = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, call in cases.items():
            times[name].append(timed(call))
    best = {name: min(t) for name, t in times.items()}
    median = {name: statistics.median(t) for name, t in times.items()}
    gram_peak = gram_peak_bytes(args.dim, N, args.hidden, C, P, args.block_size)
    output_bytes = P * P * C * C * 8
    gemm_flops = 2 * (P * C) ** 2 * N
    layers_flops = layer_gemm_flops(P, C, sizes)

    print(f"MLP Gram vs GEMM: P={P}, D={args.dim}, C={C}, {args.hidden} × {N} ReLU, "
          f"{jax.devices()[0].platform}, {args.repeats} alternating runs (best / median s)")
    print(f"  gram          {best['gram']:7.3f} / {median['gram']:7.3f}   empirical_ntk, full C×C blocks, float64")
    print(f"  gemm          {best['gemm']:7.3f} / {median['gemm']:7.3f}   ({P * C} × {N})·({N} × {P * C}), "
          f"float64, {gemm_flops / best['gemm'] / 1e9:.1f} GFLOP/s")
    print(f"  layer_gemms   {best['layer_gemms']:7.3f} / {median['layer_gemms']:7.3f}   every layer's g and h "
          f"Gram, {layers_flops / gemm_flops:.2f}× the GEMM's FLOPs, float64")
    print(f"  gram32        {best['gram32']:7.3f} / {median['gram32']:7.3f}   the Gram in float32")
    print(f"  gemm32        {best['gemm32']:7.3f} / {median['gemm32']:7.3f}   the GEMM in float32, "
          f"{gemm_flops / best['gemm32'] / 1e9:.1f} GFLOP/s")
    for gram, ref, what in (("gram", "gemm", "full, float64"), ("gram32", "gemm32", "full, float32"),
                            ("traced", "tgemm", "traced (jitted), float64"), ("traced32", "tgemm32", "traced (jitted), float32")):
        ratios = [t / median[ref] for t in times[gram]]
        print(f"  {gram} / median {ref} ({what}): min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
              f"max {max(ratios):.2f} over {args.repeats} runs  (target ≤ 1.2)")
    print(f"  gram / gemm (best / best)      {best['gram'] / best['gemm']:.2f}  (target ≤ 1.2)")
    print(f"  gram / ({args.hidden} hidden layers × gemm)  {best['gram'] / (args.hidden * best['gemm']):.2f}")
    print(f"  gram / layer_gemms             {best['gram'] / best['layer_gemms']:.2f}")
    print(f"  gram32 / gemm32                {best['gram32'] / best['gemm32']:.2f}  (target ≤ 1.2)")
    if gram_peak is None:
        print("  peak memory: not measurable here")
    else:
        print(f"  peak memory of the gram {gram_peak / 2**30:.2f} GiB, output {output_bytes / 2**30:.2f} GiB: "
              f"{gram_peak / output_bytes:.2f}× the output (target ≤ 1.25)")


if __name__ == "__main__":
    main()
