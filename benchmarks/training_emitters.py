"""A run's training program under XLA:CPU's fusion emitters (its default) and its loop emitters: XLA
compile seconds and milliseconds per optimizer step, in one process, the two alternating; the data
behind ``ntkpipe.compile_options.SHORT_TRAINING_FLOPS``.

Each argument names a run of a shipped study's default variant, ``study:index`` (the index into its
planned runs; runs whose data come from a stage, such as eigenvector-sign labels, are not supported).
For each: its training FLOPs (``ntkpipe.train.flops.training_flops``), the XLA seconds of compiling its
step program under each emitter (``jax.monitoring``' backend-compile events), the median over
``--repeats`` alternating calls of ``--steps`` steps, the ratio loop / fusion, the run's whole training
at each rate, and which emitters ntkpipe picks for it (``ntkpipe.train.loop.training_compile_options``).

    python benchmarks/training_emitters.py                       # the runs below (≈ 1 minute)
    python benchmarks/training_emitters.py sample_size:17 multiclass_alignment:2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.monitoring
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RUNS = ["sample_size:16", "sample_size:17", "sample_size:18", "sample_size:19", "partial_whitening:0",
        "partial_whitening:1", "depth_scaling:0", "kernel_specialization:0", "kernel_specialization:1",
        "two_layer_dynamics:1", "multiclass_alignment:2", "kernel_rotation:0", "deep_linear_final:0",
        "learning_rate_ratio:2"]
EMITTERS = {"fusion": {"xla_cpu_use_fusion_emitters": True}, "loop": {"xla_cpu_use_fusion_emitters": False}}


def main() -> None:
    from ntkpipe.jobs.log import start_job
    from ntkpipe.stages.inputs import run_context
    from ntkpipe.train.driver import total_steps
    from ntkpipe.train.flops import training_flops
    from ntkpipe.train.loop import NetworkStepper, training_compile_options
    from ntkpipe.workflow import build_index

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", default=RUNS, help="study:index (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=50, help="steps per timed call")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    start_job()  # JAX configured as in a workflow job (float64 available)
    compiles: list[float] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: compiles.append(seconds)
        if event == "/jax/core/compile/backend_compile_duration" else None)
    print("| run | kind | activation | steps | training FLOPs | XLA s fusion / loop | ms per step fusion / loop "
          "| loop / fusion | training s fusion / loop | ntkpipe picks |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as results:
        for name in args.runs:
            study, index = name.split(":")
            job = build_index(REPO / "specs", Path(results), studies=[study]).plans[study].runs[int(index)]
            run, spec = run_context(job.spec, {}), job.spec
            steppers, compile_s = {}, {}
            for emitters, options in EMITTERS.items():
                stepper = NetworkStepper(run.model0, run.data.x_train, run.data.y_train, spec.train,
                                         key=jax.random.PRNGKey(0), compile_options=options)
                state = stepper.init(np.array([0, 10**7]))
                list(stepper.data.pieces(0, 1))  # the minibatch orders: their program is not the step's
                compiles.clear()
                jax.block_until_ready(stepper.advance(state, 0, 1)[0].diff)
                steppers[emitters], compile_s[emitters] = (stepper, state), sum(compiles)
            per_step: dict[str, list[float]] = {emitters: [] for emitters in EMITTERS}
            for _ in range(args.repeats):
                for emitters, (stepper, state) in steppers.items():
                    tic = time.perf_counter()
                    jax.block_until_ready(stepper.advance(state, 0, args.steps)[0].diff)
                    per_step[emitters].append((time.perf_counter() - tic) / args.steps)
            fusion, loop = (statistics.median(per_step[e]) for e in EMITTERS)
            steps, flops = total_steps(spec.train, spec.data.n_train), training_flops(run)
            picks = "loop" if training_compile_options(run) else "fusion"
            activation = getattr(spec.model, "activation", "")
            print(f"| `{name}` | {spec.model.kind} {spec.model.architecture} | {activation} | {steps} | {flops:.2e} | "
                  f"{compile_s['fusion']:.2f} / {compile_s['loop']:.2f} | {fusion * 1e3:.3f} / {loop * 1e3:.3f} | "
                  f"{loop / fusion:.2f} | {steps * fusion:.2f} / {steps * loop:.2f} | {picks} |", flush=True)


if __name__ == "__main__":
    main()
