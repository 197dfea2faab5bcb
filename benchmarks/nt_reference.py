"""ntkpipe's MLP Gram against neural-tangents 0.6.5 on the same weights, kernel for kernel; run it
through ``benchmarks/neural_tangents_env.sh``, which builds neural-tangents' own environment.

The ntkpipe side (this environment) builds the network of ``gram_vs_gemm.py`` (2 × 500 ReLU, σ = √2,
no biases), writes its weights in (in, out) layout and its inputs to an ``.npz`` and starts the
neural-tangents side (``--nt-side``, the ``.nt-env`` python, no ntkpipe import) as a server that
applies the same network as ``h @ W`` — the layout whose structured derivatives neural-tangents
exploits; ``W h`` is about 200× slower there — and runs ``nt.empirical_ntk_fn`` (``vmap_axes=0``,
jitted) on request. Each pair is the same kernel in the same dtype, for every
{float32, float64} × {full, traced}:

    full:    ntkpipe ``outputs="full"``   K_ijcd        nt ``trace_axes=()``     K_ijcd
    traced:  ntkpipe ``outputs="trace"``  Σ_c K_ijcc    nt ``trace_axes=(-1,)``  (1/C) Σ_c K_ijcc

(neural-tangents' traced kernel is the mean over the outputs, ntkpipe's the sum: C·nt is compared).
Each kernel is computed once to compile, then the timed calls alternate — ntkpipe, then each
neural-tangents implementation (1 = Jacobian contraction, 2 = NTK-vector products, 3 = structured
derivatives) — and each time is the best of ``--repeats``, measured in its own process around the
call only. Agreement: max |K_nt − K_ntkpipe| / max |K_ntkpipe| over 8 rows spread over the P inputs,
against all P columns (every block row and column of ntkpipe's blocked Gram, mirrored blocks too).
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
KINDS = {"full": (), "trace": (-1,)}
"""ntkpipe ``outputs`` → neural-tangents ``trace_axes``."""
TOLERANCE = {"float64": 1e-14, "float32": 1e-6}
"""max |K_nt − K_ntkpipe| / max |K_ntkpipe| for the kernels to agree: float64 at a few ulps of the
largest entry; float32 at the spread of two float32 kernels, each 2–5e-7 from the float64 one."""
SAMPLE_ROWS = 8
REPLY = "NT-REPLY "  # prefix of the neural-tangents server's answers on its stdout


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # The network options repeat gram_vs_gemm's: this parser also runs on the neural-tangents side,
    # whose environment cannot import gram_vs_gemm (it imports ntkpipe, on current JAX).
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000, help="P, inputs (x2 = x1)")
    parser.add_argument("--dim", type=int, default=64, help="D, input dimension")
    parser.add_argument("--width", type=int, default=500, help="N, hidden width")
    parser.add_argument("--hidden", type=int, default=2, help="hidden layers")
    parser.add_argument("--outputs", type=int, default=10, help="C, outputs")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each kernel after the compiling one")
    parser.add_argument("--implementations", type=int, nargs="+", choices=sorted(IMPLEMENTATIONS), default=[3],
                        help="neural-tangents implementations; 1 and 2 need about 41 GB and 120 GB at P = 1000")
    parser.add_argument("--dtypes", nargs="+", choices=sorted(TOLERANCE), default=["float32", "float64"])
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=["full", "trace"])
    parser.add_argument("--nt-python", help="python of the neural-tangents environment (set by the .sh)")
    parser.add_argument("--nt-side", metavar="NPZ", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nt_side is None and args.nt_python is None:
        parser.error("--nt-python is required; run `bash benchmarks/neural_tangents_env.sh` (it sets it)")
    if min(args.points, args.dim, args.width, args.hidden, args.outputs, args.repeats) < 1:
        parser.error("--points, --dim, --width, --hidden, --outputs and --repeats must be positive")
    return args


def sample_rows(points: int) -> list[int]:
    """``SAMPLE_ROWS`` row indices spread evenly over ``range(points)``."""
    count = min(SAMPLE_ROWS, points)
    return sorted({round(i * (points - 1) / max(count - 1, 1)) for i in range(count)})


def timed(call) -> tuple[float, object]:
    """Wall seconds of ``call()`` and its result."""
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def run_kernel(kernel_fn, x, params):
    """neural-tangents' kernel of ``x`` with itself, awaited."""
    return kernel_fn(x, None, params).block_until_ready()


def nt_side(args: argparse.Namespace) -> None:
    """In the neural-tangents environment: a server. Each stdin line ``{"implementation", "dtype",
    "kind", "save"}`` computes that kernel once and answers ``REPLY {"seconds": s}`` on stdout; with
    ``save`` (a path) it also writes the kernel's sample rows there as float64."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import neural_tangents as nt
    import numpy as np

    data = np.load(args.nt_side)
    weights = [data[f"w{i}"] for i in range(args.hidden + 1)]
    rows = np.asarray(sample_rows(args.points))

    def apply(params, x):
        h = x
        for w in params[:-1]:
            h = jax.nn.relu(h @ w)
        return h @ params[-1]

    kernel_fns, inputs = {}, {}
    print(REPLY + json.dumps({"jax": jax.__version__, "neural_tangents": nt.__version__}), flush=True)
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        dtype, kind, implementation = request["dtype"], request["kind"], request["implementation"]
        if dtype not in inputs:
            inputs[dtype] = ([jnp.asarray(w, dtype) for w in weights], jnp.asarray(data["x"], dtype))
        key = (dtype, kind, implementation)
        if key not in kernel_fns:
            kernel_fns[key] = jax.jit(nt.empirical_ntk_fn(apply, trace_axes=KINDS[kind], vmap_axes=0,
                                                          implementation=implementation))
        params, x = inputs[dtype]
        seconds, kernel = timed(partial(run_kernel, kernel_fns[key], x, params))
        if request["save"]:
            np.save(request["save"], np.asarray(kernel[rows], np.float64))
        del kernel
        print(REPLY + json.dumps({"seconds": seconds}), flush=True)


class NeuralTangentsServer:
    """The neural-tangents side as a child process, asked for one kernel at a time."""

    def __init__(self, nt_python: str, npz: Path, args: argparse.Namespace):
        forwarded = [f"--{name}={getattr(args, name)}" for name in ("points", "dim", "width", "hidden", "outputs")]
        self.process = subprocess.Popen([nt_python, __file__, "--nt-side", str(npz), *forwarded],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.versions = self._reply()

    def _reply(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY):])
        sys.exit(f"error: the neural-tangents side ended (exit {self.process.wait()}); its stderr is above")

    def kernel_seconds(self, implementation: int, dtype: str, kind: str, save: Path | None = None) -> float:
        request = {"implementation": implementation, "dtype": dtype, "kind": kind, "save": save and str(save)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._reply()["seconds"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def relative_error(nt_rows, ntkpipe_rows, kind: str, num_outputs: int) -> float:
    """max |K_nt − K_ntkpipe| / max |K_ntkpipe|, neural-tangents' traced mean made a sum."""
    import numpy as np

    scale = num_outputs if kind == "trace" else 1
    reference = np.asarray(ntkpipe_rows, np.float64)
    return float(np.max(np.abs(scale * nt_rows - reference)) / np.max(np.abs(reference)))


def ntkpipe_side(args: argparse.Namespace) -> None:
    """Here: export the weights, time each kernel pair alternately, print the ratios and agreement."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gram_vs_gemm import inputs, make_model

    from ntkpipe.ntk import empirical_ntk

    model = make_model(args.dim, args.width, args.hidden, args.outputs)
    x = inputs(args.points, args.dim)
    rows = np.asarray(sample_rows(args.points))

    def ntkpipe_kernel(dtype: str, kind: str):
        return empirical_ntk(model, x, implementation="mlp_layers", outputs=kind,
                             dtype=jnp.dtype(dtype)).block_until_ready()

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "weights.npz"
        np.savez(npz, x=np.asarray(x), **{f"w{i}": np.asarray(w).T for i, w in enumerate(model.weights)})
        server = NeuralTangentsServer(args.nt_python, npz, args)
        print(f"MLP Gram: P={args.points}, D={args.dim}, C={args.outputs}, {args.hidden} × {args.width} ReLU, "
              f"x2 = x1, {jax.devices()[0].platform}; ntkpipe (jax {jax.__version__}, mlp_layers) against "
              f"neural-tangents {server.versions['neural_tangents']} (jax {server.versions['jax']})")
        print(f"best of {args.repeats} alternating runs after a compiling one; nt / ntkpipe > 1: ntkpipe faster; "
              f"error: max |K_nt - K_ntkpipe| / max |K_ntkpipe| on {len(rows)} rows x {args.points} columns")
        header = (f"{'dtype':<8} {'kernel':<6} {'ntkpipe s':>9}  {'neural-tangents':<24} {'s':>8} "
                  f"{'nt / ntkpipe':>12} {'error':>8}  agrees")
        print(header)
        print("-" * len(header))
        for dtype in args.dtypes:
            for kind in args.kinds:
                _, kernel = timed(partial(ntkpipe_kernel, dtype, kind))  # compiles
                reference = np.asarray(kernel[rows])
                del kernel
                errors = {}
                for implementation in args.implementations:
                    save = Path(tmp) / f"nt{implementation}.npy"
                    server.kernel_seconds(implementation, dtype, kind, save)  # compiles
                    errors[implementation] = relative_error(np.load(save), reference, kind, args.outputs)
                ntkpipe_times, nt_times = [], {i: [] for i in args.implementations}
                for _ in range(args.repeats):
                    seconds, kernel = timed(partial(ntkpipe_kernel, dtype, kind))
                    del kernel
                    ntkpipe_times.append(seconds)
                    for implementation in args.implementations:
                        nt_times[implementation].append(server.kernel_seconds(implementation, dtype, kind))
                best = min(ntkpipe_times)
                for implementation in args.implementations:
                    nt_best = min(nt_times[implementation])
                    agrees = errors[implementation] < TOLERANCE[dtype]
                    results.append(agrees)
                    print(f"{dtype:<8} {kind:<6} {best:>9.3f}  {IMPLEMENTATIONS[implementation]:<24} "
                          f"{nt_best:>8.3f} {nt_best / best:>12.2f} {errors[implementation]:>8.1e}  "
                          f"{'yes' if agrees else 'NO'} (< {TOLERANCE[dtype]:.0e})", flush=True)
        server.close()
    if not all(results):
        sys.exit("error: some neural-tangents kernel differs from ntkpipe's beyond its tolerance")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.nt_side is not None:
        nt_side(args)
    else:
        ntkpipe_side(args)


if __name__ == "__main__":
    main()
