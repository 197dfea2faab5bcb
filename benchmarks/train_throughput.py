"""Training throughput: GD of a ReLU MLP as achieved FLOP/s against a GEMM's, in one process.

    python benchmarks/train_throughput.py                  # P = 1000, D = 784, 2 × 500 ReLU, C = 10
    python benchmarks/train_throughput.py --steps 50
    python benchmarks/train_throughput.py --batch-size 128 --points 5000   # SGD on minibatches of B

Trains with ntkpipe's compiled loop (``ntkpipe.train``: ``lax.fori_loop`` over GD steps, MSE, float32,
one checkpoint at the end) and counts the matrix-product FLOPs of one step, layer sizes n_0 = D, …, n_L = C:

    forward              F = 2 P Σ_ℓ n_{ℓ-1} n_ℓ
    weight gradients         2 P Σ_ℓ n_{ℓ-1} n_ℓ        (= F)
    input gradients          2 P Σ_{ℓ≥2} n_{ℓ-1} n_ℓ    (none for the inputs themselves)
    per step             3 F − 2 P D n_1               (≈ 3× the forward GEMMs)

with B in place of P for SGD on minibatches of B (``--batch-size``), whose order is drawn once per epoch.

Elementwise work (ReLU, its mask, the loss, the update) is left out. The reference rate is a chain of
(P × N)·(N × N) GEMMs of the training dtype inside one compiled loop, timed in the same run.
"""

from __future__ import annotations

import argparse
import time
from itertools import pairwise

import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.jobs.log import start_job
from ntkpipe.lang.schema import TrainSpec
from ntkpipe.models import MLP
from ntkpipe.train import train

start_job()  # a job's settings: float64 on (ntkpipe sets nothing on import); training stays float32


def step_flops(points: int, sizes: list[int]) -> int:
    """Matrix-product FLOPs of one full-batch GD step: 3 F − 2 P D n_1 (module docstring)."""
    forward = 2 * points * sum(a * b for a, b in pairwise(sizes))
    return 3 * forward - 2 * points * sizes[0] * sizes[1]


def train_seconds(model: MLP, x: np.ndarray, y: np.ndarray, steps: int, batch_size: int | None = None) -> float:
    """Seconds of ``steps`` GD steps (SGD on minibatches of ``batch_size``) in ntkpipe's compiled loop
    (compiled beforehand by a 1-step run)."""
    def run(n: int) -> float:
        spec = TrainSpec.model_validate({"optimizer": {"name": "gd" if batch_size is None else "sgd", "lr": 1e-3},
                                         "steps": n, "batch_size": batch_size,
                                         "checkpoints": {"spacing": "linear", "count": 1}})
        return train(model, x, y, spec, key=jax.random.key(0), measure=lambda m, i, last: {}).seconds["train"]

    run(1)
    return run(steps)


def gemm_rate(points: int, width: int, dtype, repeats: int) -> float:
    """FLOP/s of ``repeats`` chained (P × N)·(N × N) GEMMs in one compiled loop (best of three)."""
    h = jax.random.normal(jax.random.key(1), (points, width), dtype)
    w = (jax.random.normal(jax.random.key(2), (width, width)) / np.sqrt(width)).astype(dtype)
    chain = jax.jit(lambda h, w: jax.lax.fori_loop(0, repeats, lambda i, a: a @ w, h))
    chain(h, w).block_until_ready()
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        chain(h, w).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return repeats * 2 * points * width * width / best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000, help="P, training points")
    parser.add_argument("--batch-size", type=int, help="B, minibatch size (default: full batch)")
    parser.add_argument("--dim", type=int, default=784, help="D, input dimension")
    parser.add_argument("--width", type=int, default=500, help="N, hidden width")
    parser.add_argument("--hidden", type=int, default=2, help="hidden layers")
    parser.add_argument("--outputs", type=int, default=10, help="C, outputs")
    parser.add_argument("--steps", type=int, default=200, help="timed GD steps")
    args = parser.parse_args(argv)

    P, N = args.points, args.width
    sizes = [args.dim] + [N] * args.hidden + [args.outputs]
    model = MLP(args.dim, N, args.hidden + 1, args.outputs, activation="relu", sigma=2**0.5, key=jax.random.key(0))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((P, args.dim)).astype(np.float32)
    y = rng.standard_normal((P, args.outputs)).astype(np.float32)
    B = P if args.batch_size is None else args.batch_size
    seconds = train_seconds(model, x, y, args.steps, args.batch_size)
    flops = step_flops(B, sizes)
    achieved = flops * args.steps / seconds
    reference = gemm_rate(B, N, jnp.float32, repeats=args.steps)
    what = "full-batch GD" if args.batch_size is None else f"SGD, minibatches of B={B}"
    print(f"{what}: P={P}, D={args.dim}, {args.hidden} × {N} ReLU, C={args.outputs}, float32, "
          f"{jax.devices()[0].platform}, {args.steps} steps")
    print(f"  train            {seconds:.3f} s, {seconds / args.steps * 1e3:.3f} ms/step, "
          f"{flops / 1e9:.3f} GFLOP/step (3F − 2BDn₁)")
    print(f"  achieved         {achieved / 1e9:.1f} GFLOP/s")
    print(f"  GEMM ({B}×{N})·({N}×{N}) {reference / 1e9:.1f} GFLOP/s")
    print(f"  achieved / GEMM  {achieved / reference:.2f}")


if __name__ == "__main__":
    main()
