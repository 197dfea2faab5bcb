"""Benchmark scripts: the FLOP counts they report, the suite's job seconds, the neural-tangents runner's
argument handling and kernel comparison, and the CIFAR-sized inputs of the CNN benchmark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.models import MLP

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from cnn_ntk import cifar_sized_images  # noqa: E402 (benchmarks/ is not a package)
from gram_vs_gemm import layer_gemm_flops  # noqa: E402 (benchmarks/ is not a package)
from main_job import job_phases, table  # noqa: E402 (benchmarks/ is not a package)
from nt_reference import relative_error, sample_rows  # noqa: E402 (benchmarks/ is not a package)
from scale import TINY  # noqa: E402 (benchmarks/ is not a package)
from suite_time import compile_seconds, job_seconds  # noqa: E402 (benchmarks/ is not a package)
from train_throughput import step_flops  # noqa: E402 (benchmarks/ is not a package)


def test_step_flops_match_xla_cost_analysis_of_a_gd_step():
    points, sizes = 128, [200, 150, 150, 4]
    model = MLP(sizes[0], 150, 3, sizes[-1], activation="relu", key=jax.random.key(0))
    x, y = jnp.ones((points, sizes[0]), jnp.float32), jnp.ones((points, sizes[-1]), jnp.float32)

    arrays, rest = eqx.partition(model, eqx.is_array)

    def loss(a):
        return jnp.mean((jax.vmap(eqx.combine(a, rest))(x) - y) ** 2)

    xla = jax.jit(jax.grad(loss)).lower(arrays).cost_analysis()["flops"]
    # XLA also counts the elementwise work (ReLU, its mask, the loss): a few per cent here
    assert step_flops(points, sizes) <= xla <= 1.05 * step_flops(points, sizes)


def test_layer_gemm_flops_sum_the_g_and_h_grams_of_every_layer():
    # P = 3, C = 2, sizes D = 4 -> 5 -> 2: g Grams (6×5)(5×6), (6×2)(2×6); h Grams (3×4)(4×3), (3×5)(5×3)
    assert layer_gemm_flops(3, 2, [4, 5, 2]) == 2 * (36 * 5 + 36 * 2 + 9 * 4 + 9 * 5)


def test_neural_tangents_runner_asks_to_build_its_environment_first(tmp_path):
    missing = tmp_path / "no-env"
    out = subprocess.run(["bash", str(ROOT / "benchmarks" / "neural_tangents_env.sh"), "--points", "10"],
                         env={"PATH": "/usr/bin:/bin", "NT_ENV": str(missing)}, check=False, capture_output=True, text=True)
    assert out.returncode == 2
    assert f"no neural-tangents environment at {missing}" in out.stderr
    assert "bash benchmarks/neural_tangents_env.sh --build" in out.stderr


@pytest.mark.parametrize("argv, message", [
    (["--points", "10"], "--nt-python is required; run `bash benchmarks/neural_tangents_env.sh`"),
    (["--nt-python", "python", "--implementations", "4"], "argument --implementations: invalid choice: 4"),
    (["--nt-python", "python", "--points", "0"], "must be positive"),
])
def test_nt_reference_rejects_bad_arguments(argv, message):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nt_reference.py"), *argv],
                         check=False, capture_output=True, text=True)
    assert out.returncode == 2
    assert message in out.stderr


def test_job_seconds_sums_the_finished_jobs_of_each_rule(tmp_path):
    logs = {"train/a.log": "t0 train_run -> a: started\ntrain_run -> a: done in 2.5 s\n",
            "train/b/c.log": "t0 train_run -> c: started\ntrain_run -> c: done in 1.25 s\n",
            "train/d.log": "t0 train_run -> d: started\nTraceback ...\ntrain_run -> d: failed after 9.0 s\n",
            "plot/e.log": "t0 plot -> e: started\nplot -> e: done in 0.5 s\n",
            "plot/f.log": "t0 plot -> f: started\n"}
    for name, text in logs.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert job_seconds(tmp_path) == {"plot": (1, 0.5), "train": (2, 3.75)}


def test_compile_seconds_sums_each_compile_event(tmp_path):
    events = tmp_path / "events.txt"
    events.write_text("/jax/core/compile/backend_compile_duration 0.5\n/jax/core/compile/jaxpr_trace_duration 0.25\n"
                      "/jax/core/compile/backend_compile_duration 1.25\n")
    assert compile_seconds(events) == {"XLA compilation": (2, 1.75), "tracing": (1, 0.25), "lowering to MLIR": (0, 0.0)}


def test_nt_reference_compares_the_traced_mean_of_neural_tangents_with_ntkpipes_trace():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 3, 7))  # K_ijcd = <a_ic, a_jd>, C = 3
    full = np.einsum("icp,jdp->ijcd", a, a)
    trace_sum = np.einsum("icp,jcp->ij", a, a)
    nt_traced_mean = np.trace(full, axis1=-2, axis2=-1) / 3
    assert relative_error(nt_traced_mean, trace_sum, "trace", 3) < 1e-15
    assert relative_error(full, full, "full", 3) == 0.0
    assert relative_error(1.5 * full, full, "full", 3) == pytest.approx(0.5)


def test_nt_reference_samples_rows_spread_over_every_block():
    assert sample_rows(1000) == [0, 143, 285, 428, 571, 714, 856, 999]
    assert sample_rows(3) == [0, 1, 2]
    assert sample_rows(1) == [0]


def test_cifar_sized_images_are_standardized_per_pixel():
    x = cifar_sized_images(50)
    assert x.shape == (50, 32, 32, 3)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-12)
    assert np.sqrt(np.mean(x**2)) == pytest.approx(1.0, abs=1e-12)


def test_main_job_splits_a_training_job_into_its_phases(tmp_path):
    """A run job of 10 s whose store records 4 s of training, 3 s of measurement and 8 s of job
    (so 2 s of writing), with 5 s of compile events: rest = 10 − 7 − 2 = 1 s; a plot job is all rest."""
    import xarray as xr

    results = tmp_path / "results"
    xr.Dataset({"seconds_train": 4.0, "seconds_measure": 3.0, "seconds_job": 8.0}).to_zarr(
        results / "runs" / "0123456789abcdef.zarr", zarr_format=2)
    run = {"log": str(results / "logs" / "train" / "0123456789abcdef.log"), "programs": 3, "start": 100.0,
           "end": 110.0, "trace": 0.5, "lower": 0.5, "xla": 4.0}
    rule, name, phases = job_phases(run, results, index=None)
    assert (rule, name) == ("train", "0123456789abcdef")
    assert phases == pytest.approx({"compile": 5.0, "trace": 0.5, "lower": 0.5, "xla": 4.0, "train": 4.0,
                                    "measure": 3.0, "write": 2.0, "rest": 1.0, "wall": 10.0})
    plot = {"log": str(results / "logs" / "plot" / "study" / "fig.log"), "programs": 0, "start": 0.0, "end": 2.5}
    rule, _, phases = job_phases(plot, results, index=None)
    assert rule == "plot" and phases["rest"] == phases["wall"] == 2.5
    rows = {"study": {"jobs": 2, "programs": 3, **{k: v + (2.5 if k in ("rest", "wall") else 0.0)
                                                    for k, v in job_phases(run, results, None)[2].items()}}}
    assert table("study", rows)[-1] == "| **total** | 2 | 12.5 | 5.0 (0.5, 0.5, 4.0) | 3 | 4.0 | 3.0 | 2.0 | 3.5 |"


def test_the_scale_benchmarks_study_is_valid_and_has_as_many_runs_as_asked(tmp_path):
    from ntkpipe.study.load import load_study

    path = tmp_path / "tiny_sweep.yaml"
    path.write_text(TINY.format(seeds=12))
    assert len(load_study(path).runs) == 12
