"""No side effects on import: ``import ntkpipe`` leaves JAX's 64-bit types off, imports neither
matplotlib nor diffrax and selects no device; the float64 library (kernels, eigendecompositions,
kernel regression, theory) still returns float64 in such a session (ntkpipe.ntk.precision.with_x64).

Each check runs in a fresh interpreter: this test process enabled x64 in conftest, as a job does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (no JAX_ENABLE_X64, no CUDA_VISIBLE_DEVICES); its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_ENABLE_X64", "CUDA_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_has_no_global_side_effects():
    out = run_python("""
        import os, sys
        import jax
        import ntkpipe, ntkpipe.jobs, ntkpipe.cli, ntkpipe.workflow, ntkpipe.study.plan
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"matplotlib", "diffrax"})
        print(jax.config.jax_enable_x64, heavy, "CUDA_VISIBLE_DEVICES" in os.environ)
    """)
    assert out.split("\n")[-2] == "False [] False"


def test_float64_library_without_x64_enabled():
    """An NTK Gram, its eigendecomposition, kernel regression and the OFE ODE after a plain
    ``import ntkpipe``: float64, and equal to float64 numpy to 1e-10 (float32 would miss by ~1e-7)."""
    out = run_python("""
        import jax
        import numpy as np
        import ntkpipe
        from ntkpipe.measure.kernel_regression import kernel_predictions, kernel_regression
        from ntkpipe.ntk import empirical_ntk, flatten_gram, top_eigenpairs
        from ntkpipe.theory.feature_evolution import ofe_closed_form, ofe_solve

        # f(x) = aᵀ relu(Wx) (standard parameterization, float32 weights):
        # Θ(x, x') = relu(Wx)·relu(Wx') + Σᵢ aᵢ² 1[wᵢx > 0] 1[wᵢx' > 0] x·x'
        model = ntkpipe.MLP(3, 16, 2, 1, activation="relu", key=jax.random.key(0))
        x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
        gram = empirical_ntk(model, x)
        w, a = (np.asarray(v, np.float64) for v in model.weights)
        z = x.astype(np.float64) @ w.T
        on = (z > 0).astype(np.float64)
        expected = np.maximum(z, 0) @ np.maximum(z, 0).T + (on * a[0] ** 2) @ on.T * (x.astype(np.float64) @ x.T)
        assert gram.dtype == np.float64, gram.dtype
        np.testing.assert_allclose(np.asarray(gram)[..., 0, 0], expected, rtol=1e-10)

        flat = flatten_gram(gram)
        values, vectors = top_eigenpairs(np.asarray(flat), 3)
        assert values.dtype == vectors.dtype == np.float64
        np.testing.assert_allclose(values, np.linalg.eigvalsh(expected)[::-1][:3], rtol=1e-10)

        y = np.sin(x[:, :1]).astype(np.float64)
        fit = kernel_predictions(model, model, x, y, x[:2])
        assert fit["prediction_init_ntk"].dtype == np.float64
        np.testing.assert_allclose(fit["prediction_init_ntk"], y[:2], rtol=1e-8)  # interpolation
        np.testing.assert_allclose(kernel_regression(expected, expected[:2], y).predictions, y[:2], rtol=1e-8)

        k0, delta0, times = expected, -y[:, 0], np.linspace(0.0, 2.0, 5)
        sol = ofe_solve(k0, delta0, 0.5, 0.1, times)
        assert sol.kernel.dtype == sol.delta.dtype == np.float64
        delta, kernel = ofe_closed_form(k0, delta0, 0.5, 0.1, times[-1])
        np.testing.assert_allclose(sol.delta[-1], delta, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(sol.kernel[-1], kernel, rtol=1e-8, atol=1e-12)
        print(jax.config.jax_enable_x64)
    """)
    assert out.split("\n")[-2] == "False"  # the setting is back off after each call


def test_a_job_sets_its_process_not_the_snakefile(tmp_path):
    """Parsing the Snakefile (``configure_jax``) selects no device; a job (``logged``) enables x64 and
    takes the first device unless its scheduler chose one."""
    out = run_python(f"""
        import os
        import jax
        from ntkpipe.jobs import logged
        from ntkpipe.workflow import configure_jax
        configure_jax({str(tmp_path / "results")!r})
        print(jax.config.jax_enable_x64, os.environ.get("CUDA_VISIBLE_DEVICES"))
        dtype = logged({str(tmp_path / "job.log")!r}, lambda out: jax.numpy.zeros(1, "float64").dtype, "out")
        print(jax.config.jax_enable_x64, os.environ.get("CUDA_VISIBLE_DEVICES"), dtype)
    """)
    assert out.split("\n")[-3:-1] == ["False None", "True 0 float64"]
    assert "<lambda> -> out: done" in (tmp_path / "job.log").read_text()
