"""Per-call cost of a compiled measurement: ``ntkpipe.filter_jit`` against ``eqx.filter_jit``, in one process.

    python benchmarks/dispatch.py                  # a depth-3 width-100 ReLU MLP on 50 points; ≈ 20 s
    python benchmarks/dispatch.py --depth 5 --points 200

The program is a checkpoint's outputs f(X) (``ntkpipe.measure.context``' ``_outputs``, float32): small,
so a call's time is mostly the Python around it, which holds the GIL that a Snakemake process's other
job threads wait for. Three wrappers of the same function: ``jax.jit`` of the module's arrays with its
static part closed over (the floor: JAX's own dispatch), ntkpipe's ``filter_jit`` and equinox's. Each is
timed over ``--calls`` calls, ``--repeats`` times, alternating; printed as µs per call and as ratios to
the floor's median, min / median / max. The three give the same outputs bit for bit (checked).
"""

from __future__ import annotations

import argparse
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ntkpipe.filter_jit import filter_jit
from ntkpipe.jobs.log import start_job
from ntkpipe.models import MLP

start_job()


def outputs(model, x):
    return jax.vmap(model)(x)


def per_call(fn, args, calls: int) -> float:
    """Seconds per call of ``fn(*args)`` over ``calls`` calls, the last result waited for."""
    out = fn(*args)
    tic = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - tic) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--points", type=int, default=50)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    model = MLP(10, args.width, 1, args.depth, activation="relu", sigma=1.4, dtype=jnp.float32,
                key=jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (args.points, 10), jnp.float32)
    arrays, static = eqx.partition(model, eqx.is_array)
    floor = jax.jit(lambda arrays, x: outputs(eqx.combine(arrays, static), x))
    wrappers = {"jax.jit (floor)": (floor, (arrays, x)), "ntkpipe filter_jit": (filter_jit(outputs), (model, x)),
                "eqx.filter_jit": (eqx.filter_jit(outputs), (model, x))}
    reference = np.asarray(floor(arrays, x))
    for fn, fn_args in wrappers.values():
        np.testing.assert_array_equal(np.asarray(fn(*fn_args)), reference)

    seconds = {name: [] for name in wrappers}
    for _ in range(args.repeats):
        for name, (fn, fn_args) in wrappers.items():
            seconds[name].append(per_call(fn, fn_args, args.calls))
    base = statistics.median(seconds["jax.jit (floor)"])
    print(f"MLP depth {args.depth}, width {args.width}, {args.points} points; {args.repeats} × {args.calls} calls")
    print("| wrapper | µs per call (median) | / floor: min / median / max |")
    print("|---|---:|---|")
    for name, times in seconds.items():
        ratios = sorted(t / base for t in times)
        print(f"| {name} | {statistics.median(times) * 1e6:.1f} | "
              f"{ratios[0]:.2f} / {statistics.median(ratios):.2f} / {ratios[-1]:.2f} |")


if __name__ == "__main__":
    main()
