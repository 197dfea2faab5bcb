"""Wall time and peak memory of a LeNet-5 train ∪ test Gram, per generic NTK implementation.

    python benchmarks/cnn_ntk.py                          # all 1,797 digits (8×8×1)
    python benchmarks/cnn_ntk.py --n 512                  # a smaller run
    python benchmarks/cnn_ntk.py --data cifar             # 2,000 CIFAR-sized inputs (32×32×3), synthetic
    python benchmarks/cnn_ntk.py --data cifar --implementations jacobian auto
    python benchmarks/cnn_ntk.py --block-size 128

LeNet-5 (``ntkpipe.models.LENET5``: ReLU, standard parameterization, σ = √2, biases, one output; the
model of the specs' ``preset: lenet5``) on ``--data``:

* ``digits``: the (8, 8, 1) scikit-learn digits scaled to [0, 1];
* ``cifar``: CIFAR-sized (32, 32, 3) inputs, the input shape of the specs' ``source: cifar10``
  variants. The CIFAR-10 files are not needed: the images are standard normal, standardized as ntkpipe
  standardizes images (pixel mean removed, divided by the RMS of what is left). Only the shape
  matters for the time and memory of the Gram.

``empirical_ntk(model, x)`` (x2 = x1) in float64 with ``JACOBIAN``, ``NTK_VECTOR_PRODUCTS`` and
``AUTO``. Each case runs in a fresh process, so its peak RSS (``resource.getrusage``) is its own.
One call per case; the time JAX reports spending on tracing, lowering and compiling during it
(``jax.monitoring``) is shown apart and left out of the run time.

Times are given as ratios to a plain float64 GEMM J·Jᵀ with J of shape (n, P): the 2·n²·P FLOPs of
contracting explicit Jacobians (P parameters, C = 1), timed in its own process in the same run, so
the ratios travel between machines better than seconds do.
"""

from __future__ import annotations

import argparse
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

IMPLEMENTATIONS = ("jacobian", "ntk_vector_products", "auto")
NUM_DIGITS = 1797
INPUT_SHAPES = {"digits": (8, 8, 1), "cifar": (32, 32, 3)}
DEFAULT_N = {"digits": NUM_DIGITS, "cifar": 2000}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def cifar_sized_images(n: int, seed: int = 0):
    """``n`` standard normal (32, 32, 3) images, standardized: pixel mean removed, unit RMS."""
    import numpy as np

    x = np.random.default_rng(seed).standard_normal((n, *INPUT_SHAPES["cifar"]))
    x = x - x.mean(axis=0)
    return x / np.sqrt(np.mean(x**2))


def _lenet_and_inputs(data: str, n: int):
    import jax
    import jax.numpy as jnp

    from ntkpipe.jobs.log import start_job

    start_job()  # a job's settings: float64 on (ntkpipe sets nothing on import)
    from ntkpipe.data.digits import digits_pool
    from ntkpipe.models import CNN, LENET5

    conv, dense = LENET5
    model = CNN(INPUT_SHAPES[data], conv, dense, activation="relu", sigma=2**0.5, bias=True, dtype=jnp.float64,
                key=jax.random.key(0))
    x = digits_pool()[0][:n].reshape(n, 8, 8, 1) if data == "digits" else cifar_sized_images(n)
    return model, jnp.asarray(x, jnp.float64)


def reference(data: str, n: int) -> dict:
    """P, [FP], the modelled costs and AUTO's choice, and the seconds of the float64 GEMM J·Jᵀ."""
    import jax
    import jax.numpy as jnp

    from ntkpipe.ntk import choose_implementation
    from ntkpipe.ntk.cost import forward_flops, generic_costs, parameter_count

    model, x = _lenet_and_inputs(data, n)
    num_params = parameter_count(model)
    jacobian = jax.random.normal(jax.random.key(1), (n, num_params), jnp.float64)
    gram = jax.jit(lambda j: j @ j.T)
    gram(jacobian).block_until_ready()  # compile, and a first run
    start = time.perf_counter()
    gram(jacobian).block_until_ready()
    seconds = time.perf_counter() - start
    return {
        "num_params": num_params,
        "forward_flops": forward_flops(model, x[0]),
        "costs": generic_costs(model, x[0], n, None)._asdict(),
        "auto": choose_implementation(model, x).value,
        "gemm_flops": 2.0 * n * n * num_params,
        "gemm_s": seconds,
        "peak_rss_mb": _peak_rss_mb(),
    }


def run_case(implementation: str, data: str, n: int, block_size: int) -> dict:
    import jax

    from ntkpipe.ntk import empirical_ntk

    model, x = _lenet_and_inputs(data, n)
    idle_rss = _peak_rss_mb()
    compile_s = [0.0]

    def count_compilation(event: str, seconds: float, **_) -> None:
        if event.startswith("/jax/core/compile/"):
            compile_s[0] += seconds

    jax.monitoring.register_event_duration_secs_listener(count_compilation)
    start = time.perf_counter()
    kernel = empirical_ntk(model, x, implementation=implementation, block_size=block_size).block_until_ready()
    seconds = time.perf_counter() - start
    return {
        "compile_s": compile_s[0],
        "run_s": seconds - compile_s[0],
        "idle_rss_mb": idle_rss,
        "peak_rss_mb": _peak_rss_mb(),
        "gram_mb": kernel.nbytes / 2**20,
    }


def _in_fresh_process(function, *args) -> dict:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(INPUT_SHAPES), default="digits",
                        help="digits: scikit-learn's 8×8×1; cifar: synthetic CIFAR-sized 32×32×3 (module docstring)")
    parser.add_argument("--n", type=int, help="inputs (default: all 1,797 digits; 2,000 CIFAR-sized)")
    parser.add_argument("--block-size", type=int, default=256, help="empirical_ntk block_size")
    parser.add_argument("--implementations", nargs="+", choices=IMPLEMENTATIONS, default=list(IMPLEMENTATIONS))
    args = parser.parse_args()
    n = DEFAULT_N[args.data] if args.n is None else args.n
    if args.data == "digits":
        n = min(n, NUM_DIGITS)
    if n < 1 or args.block_size < 1:
        parser.error("--n and --block-size must be positive")
    block_size = args.block_size

    ref = _in_fresh_process(reference, args.data, n)
    gemm_s = ref["gemm_s"]
    costs = ref["costs"]
    shape = "×".join(map(str, INPUT_SHAPES[args.data]))
    inputs = "digits" if args.data == "digits" else "synthetic CIFAR-sized inputs"
    print(f"LeNet-5 NTK on {n} {inputs} ({shape}), x2 = x1, float64, block_size {block_size}")
    print(f"P = {ref['num_params']} parameters, [FP] = {ref['forward_flops']:.0f} FLOPs per example, C = 1")
    print(
        f"modelled FLOPs: Jacobian contraction {costs['jacobian']:.3g}, NTK-vector products "
        f"{costs['vector_products']:.3g}; AUTO chooses {ref['auto']}"
    )
    print(
        f"reference GEMM J·Jᵀ, J ({n}, {ref['num_params']}): {ref['gemm_flops']:.3g} FLOPs in {gemm_s:.2f} s "
        f"({ref['gemm_flops'] / gemm_s / 1e9:.1f} GFLOP/s), peak RSS {ref['peak_rss_mb']:.0f} MB"
    )
    header = (
        f"{'implementation':<20} {'compile s':>9} {'run s':>7} {'run / GEMM':>10} "
        f"{'idle RSS MB':>11} {'peak RSS MB':>11} {'Gram MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for implementation in args.implementations:
        r = _in_fresh_process(run_case, implementation, args.data, n, block_size)
        name = f"auto ({ref['auto']})" if implementation == "auto" else implementation
        print(
            f"{name:<20} {r['compile_s']:>9.2f} {r['run_s']:>7.2f} {r['run_s'] / gemm_s:>10.2f} "
            f"{r['idle_rss_mb']:>11.0f} {r['peak_rss_mb']:>11.0f} {r['gram_mb']:>7.1f}"
        )


if __name__ == "__main__":
    main()
