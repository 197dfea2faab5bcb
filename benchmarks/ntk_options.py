"""Kernel options and top-k eigenpairs, as ratios measured in one process.

    python benchmarks/ntk_options.py            # ≈ 2 minutes on 2 shared cores
    python benchmarks/ntk_options.py --n 200    # smaller kernels

* traced vs full Gram: ``empirical_ntk(..., outputs="trace")`` against the full (n, n, C, C) kernel
  of a 3-layer width-500 ReLU MLP with C = 10 outputs (``mlp_layers``), and of a 2-layer width-100
  MLP by ``jacobian`` contraction;
* float32 vs float64: time of the full kernel and max |K32 − K64| / max |K64|;
* top-k vs full eigh: the top 50 eigenpairs of the 4000 × 4000 NTK Gram of a ReLU MLP (C = 1) by
  ``lanczos`` and ``randomized`` against ``eigh`` of all of it, with their largest eigenvalue error.

Each time is the best of ``--repeats`` calls after one compiling call with the same shapes.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.jobs.log import start_job
from ntkpipe.models import MLP
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.eigen import top_eigenpairs

start_job()  # a job's settings: float64 on (ntkpipe sets nothing on import); training stays float32


def best_time(function, repeats: int) -> tuple[float, object]:
    """(best wall time of ``repeats`` calls after a warm-up call, the last result)."""
    result = jax.block_until_ready(function())
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        result = jax.block_until_ready(function())
        times.append(time.perf_counter() - tic)
    return min(times), result


def kernel_options(n: int, repeats: int) -> None:
    x = jax.random.normal(jax.random.key(0), (n, 100), jnp.float64)
    cases = (("mlp_layers", MLP(100, 500, 3, 10, activation="relu", key=jax.random.key(1))),
             ("jacobian", MLP(100, 100, 2, 10, activation="relu", key=jax.random.key(1))))
    print(f"empirical_ntk on n = {n} points, C = 10 outputs, x2 = x1")
    print(f"{'implementation':<12} {'full s':>8} {'trace s':>8} {'full/trace':>10} "
          f"{'f32 s':>8} {'f64/f32':>8} {'f32 max rel err':>16}")
    for implementation, model in cases:
        def kernel(model=model, implementation=implementation, **options):
            return lambda: empirical_ntk(model, x, implementation=implementation, **options)

        full, exact = best_time(kernel(), repeats)
        traced, _ = best_time(kernel(outputs="trace"), repeats)
        single, approximate = best_time(kernel(dtype=jnp.float32), repeats)
        exact = np.asarray(exact)
        error = np.abs(np.asarray(approximate, np.float64) - exact).max() / np.abs(exact).max()
        print(f"{implementation:<12} {full:8.3f} {traced:8.3f} {full / traced:10.1f} "
              f"{single:8.3f} {full / single:8.2f} {error:16.2e}")


def eigenpairs(n: int, k: int) -> None:
    model = MLP(10, 64, 2, 1, activation="relu", bias=True, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (n, 10), jnp.float64)
    gram = np.asarray(flatten_gram(empirical_ntk(model, x)))
    print(f"\ntop {k} eigenpairs of the {n} × {n} NTK Gram of a ReLU MLP (float64)")
    tic = time.perf_counter()
    reference, _ = top_eigenpairs(gram, None, method="eigh")
    full = time.perf_counter() - tic
    print(f"{'method':<14} {'s':>8} {'full eigh / method':>18} {'max |Δλ|/λ':>12}")
    print(f"{'eigh (all)':<14} {full:8.2f} {1.0:18.1f} {0.0:12.1e}")
    for method in ("eigh", "lanczos", "randomized"):
        tic = time.perf_counter()
        values, _ = top_eigenpairs(gram, k, method=method)
        seconds = time.perf_counter() - tic
        error = np.max(np.abs(values - reference[:k]) / reference[:k])
        print(f"{method + ' (k)':<14} {seconds:8.2f} {full / seconds:18.1f} {error:12.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="points of the kernel timings")
    parser.add_argument("--eigen-n", type=int, default=4000, help="rows of the eigendecomposed Gram")
    parser.add_argument("--k", type=int, default=50, help="eigenpairs wanted")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    kernel_options(args.n, args.repeats)
    eigenpairs(args.eigen_n, args.k)


if __name__ == "__main__":
    main()
