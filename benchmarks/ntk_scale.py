"""Wall time and peak memory of `empirical_ntk` on a 3-layer (2 hidden) width-500 ReLU MLP, 10 outputs.

    python benchmarks/ntk_scale.py

Each case runs in a fresh process, so its peak RSS (``resource.getrusage``) is its own. The first call
(compile + run) is reported separately from a second, timed call with the same shapes.
"""

from __future__ import annotations

import resource
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import NamedTuple

IN_SIZE, WIDTH, DEPTH, OUT_SIZE = 100, 500, 3, 10


class Case(NamedTuple):
    implementation: str
    num_points: int
    block_size: int


CASES = (
    Case("mlp_layers", 1000, 256),
    Case("mlp_layers", 200, 256),
    Case("jacobian", 200, 50),
)


def run_case(case: Case) -> dict:
    import jax

    from ntkpipe.jobs.log import start_job

    start_job()  # a job's settings: float64 on (ntkpipe sets nothing on import)
    from ntkpipe.models import MLP
    from ntkpipe.ntk import empirical_ntk

    model = MLP(IN_SIZE, WIDTH, DEPTH, OUT_SIZE, activation="relu", key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (case.num_points, IN_SIZE))

    def gram():
        kernel = empirical_ntk(model, x, implementation=case.implementation, block_size=case.block_size)
        return kernel.block_until_ready()

    start = time.perf_counter()
    gram()
    first = time.perf_counter() - start
    start = time.perf_counter()
    kernel = gram()
    second = time.perf_counter() - start
    return {
        "first_s": first,
        "run_s": second,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "output_gb": kernel.nbytes / 2**30,
        "num_params": sum(w.size for w in model.weights),
    }


def main() -> None:
    header = (
        f"{'implementation':<14} {'n':>5} {'block':>5} {'params':>7} {'compile+run s':>13} {'run s':>6} "
        f"{'peak RSS GB':>11} {'output GB':>9}"
    )
    print(f"empirical_ntk: {DEPTH}-layer width-{WIDTH} ReLU MLP, D={IN_SIZE}, C={OUT_SIZE}, x1 = x2, float64")
    print(header)
    print("-" * len(header))
    for case in CASES:
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            r = pool.submit(run_case, case).result()
        print(
            f"{case.implementation:<14} {case.num_points:>5} {case.block_size:>5} {r['num_params']:>7} "
            f"{r['first_s']:>13.2f} {r['run_s']:>6.2f} {r['peak_rss_gb']:>11.2f} {r['output_gb']:>9.2f}"
        )


if __name__ == "__main__":
    main()
