"""ntkpipe's MLP Gram against neural-tangents 0.6.5 on the same weights; run it through
``benchmarks/neural_tangents_env.sh``, which builds neural-tangents' own environment.

The ntkpipe side (this environment) builds the network of ``gram_vs_gemm.py`` (2 × 500 ReLU, σ = √2,
no biases), writes its weights in (in, out) layout and its inputs to an ``.npz`` and times
``empirical_ntk`` (float64, full C×C blocks). The neural-tangents side (``--nt-side``, run by the
``.nt-env`` python, no ntkpipe import) applies the same network as ``h @ W`` — the layout whose
structured derivatives neural-tangents exploits; ``W h`` is about 200× slower there — and times
``nt.empirical_ntk_fn`` for each implementation (1 = Jacobian contraction, 2 = NTK-vector products,
3 = structured derivatives), full (``trace_axes=()``) and traced (``trace_axes=(-1,)``), in float32
and float64 (its traced kernel is the mean of K_cc over the outputs c). Times are the best of ``--repeats`` runs after one compiling run. Each neural-tangents
kernel is checked against ntkpipe's on a corner block (float64: 1e-8 relative, float32: 1e-3).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

IMPLEMENTATIONS = {1: "jacobian_contraction", 2: "ntk_vector_products", 3: "structured_derivatives"}
CORNER = 8  # examples of the corner block compared between the two kernels
TOLERANCE = {"float64": 1e-8, "float32": 1e-3}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000, help="P, inputs (x2 = x1)")
    parser.add_argument("--dim", type=int, default=64, help="D, input dimension")
    parser.add_argument("--width", type=int, default=500, help="N, hidden width")
    parser.add_argument("--hidden", type=int, default=2, help="hidden layers")
    parser.add_argument("--outputs", type=int, default=10, help="C, outputs")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs after the compiling one")
    parser.add_argument("--implementations", type=int, nargs="+", choices=sorted(IMPLEMENTATIONS), default=[3],
                        help="neural-tangents implementations; 1 and 2 need about 41 GB and 120 GB at P = 1000")
    parser.add_argument("--dtypes", nargs="+", choices=sorted(TOLERANCE), default=["float32", "float64"])
    parser.add_argument("--nt-python", help="python of the neural-tangents environment (set by the .sh)")
    parser.add_argument("--nt-side", metavar="NPZ", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nt_side is None and args.nt_python is None:
        parser.error("--nt-python is required; run `bash benchmarks/neural_tangents_env.sh` (it sets it)")
    if min(args.points, args.dim, args.width, args.hidden, args.outputs, args.repeats) < 1:
        parser.error("--points, --dim, --width, --hidden, --outputs and --repeats must be positive")
    return args


def best_time(call, repeats: int) -> tuple[float, object]:
    """``call()`` once to compile, then the best wall time of ``repeats`` runs, and the last result."""
    result = call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


def run_kernel(kernel_fn, x, params):
    return kernel_fn(x, None, params).block_until_ready()


def nt_side(args: argparse.Namespace) -> None:
    """In the neural-tangents environment: time each implementation, print one JSON object."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import neural_tangents as nt
    import numpy as np

    data = np.load(args.nt_side)
    weights = [data[f"w{i}"] for i in range(len(data.files) - 2)]

    def apply(params, x):
        h = x
        for w in params[:-1]:
            h = jax.nn.relu(h @ w)
        return h @ params[-1]

    results = []
    for dtype in args.dtypes:
        params = [jnp.asarray(w, dtype) for w in weights]
        x = jnp.asarray(data["x"], dtype)
        for implementation in args.implementations:
            for traced in (False, True):
                kernel_fn = jax.jit(nt.empirical_ntk_fn(apply, trace_axes=(-1,) if traced else (), vmap_axes=0,
                                                        implementation=implementation))
                seconds, kernel = best_time(partial(run_kernel, kernel_fn, x, params), args.repeats)
                corner = np.asarray(kernel[:CORNER, :CORNER], np.float64)
                reference = data["corner"]
                if traced:  # neural-tangents' traced kernel is the mean over the output pair's diagonal
                    reference = np.trace(reference, axis1=-2, axis2=-1) / reference.shape[-1]
                error = float(np.max(np.abs(corner - reference)) / np.max(np.abs(reference)))
                results.append({"implementation": IMPLEMENTATIONS[implementation], "dtype": dtype,
                                "traced": traced, "seconds": seconds, "relative_error": error,
                                "agrees": error < TOLERANCE[dtype]})
    print(json.dumps({"jax": jax.__version__, "neural_tangents": nt.__version__, "results": results}))


def ntkpipe_side(args: argparse.Namespace) -> None:
    """Here: export the weights, time ntkpipe, run the neural-tangents side, print the ratios."""
    import jax
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gram_vs_gemm import inputs, make_model

    from ntkpipe.ntk import empirical_ntk

    model = make_model(args.dim, args.width, args.hidden, args.outputs)
    x = inputs(args.points, args.dim)
    seconds, kernel = best_time(
        lambda: empirical_ntk(model, x, implementation="mlp_layers").block_until_ready(), args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "weights.npz"
        np.savez(npz, x=np.asarray(x), corner=np.asarray(kernel[:CORNER, :CORNER]),
                 **{f"w{i}": np.asarray(w).T for i, w in enumerate(model.weights)})  # (in, out) layout
        del kernel
        forwarded = [f"--{name}={getattr(args, name)}" for name in ("points", "dim", "width", "hidden",
                                                                     "outputs", "repeats")]
        out = subprocess.run([args.nt_python, __file__, "--nt-side", str(npz), *forwarded,
                              "--implementations", *map(str, args.implementations), "--dtypes", *args.dtypes],
                             check=False, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"error: the neural-tangents side failed ({args.nt_python}):\n{out.stderr[-3000:]}")
    report = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"MLP Gram: P={args.points}, D={args.dim}, C={args.outputs}, {args.hidden} × {args.width} ReLU, "
          f"{jax.devices()[0].platform}, best of {args.repeats}")
    print(f"ntkpipe (jax {jax.__version__}), float64, full: {seconds:.3f} s")
    print(f"neural-tangents {report['neural_tangents']} (jax {report['jax']}):")
    print(f"  {'implementation':<24} {'dtype':<8} {'kernel':<7} {'s':>8} {'nt / ntkpipe':>12}  same kernel")
    for r in report["results"]:
        print(f"  {r['implementation']:<24} {r['dtype']:<8} {'traced' if r['traced'] else 'full':<7} "
              f"{r['seconds']:>8.3f} {r['seconds'] / seconds:>12.2f}  "
              f"{'yes' if r['agrees'] else 'NO'} ({r['relative_error']:.1e})")
    print("ratios > 1: ntkpipe's full float64 Gram is faster; neural-tangents' traced and float32 kernels are set against it too")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.nt_side is not None:
        nt_side(args)
    else:
        ntkpipe_side(args)


if __name__ == "__main__":
    main()
