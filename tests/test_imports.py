"""No side effects on import: ``import ntkpipe`` leaves JAX's 64-bit types off, imports neither
matplotlib nor diffrax, nor SciPy's ODE solvers and image resampling (imported with the study plan
that every job process reads: ≈ 0.4 s of each job's start on a cluster), and selects no device; the
float64 library (kernels, eigendecompositions, kernel regression, theory) still returns float64 in such a session (ntkpipe.ntk.precision.with_x64).
No import cycles between ntkpipe's subpackages, ``TYPE_CHECKING`` imports included.

Each check runs in a fresh interpreter: this test process enabled x64 in conftest, as a job does."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

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
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"matplotlib", "diffrax"}
                       | set(sys.modules) & {"scipy.integrate", "scipy.ndimage"})
        print(jax.config.jax_enable_x64, heavy, "CUDA_VISIBLE_DEVICES" in os.environ)
    """)
    assert out.split("\n")[-2] == "False [] False"


def test_what_the_snakefile_imports_before_planning_leaves_jax_and_pydantic_alone():
    """A no-op dry run with the plan cache warm (``benchmarks/noop_dry_run.py``) pays only for what the
    Snakefile and rule files import themselves: neither JAX nor the language's pydantic models."""
    out = run_python("""
        import sys
        import ntkpipe.compilation_cache, ntkpipe.errors, ntkpipe.jobs, ntkpipe.resources, ntkpipe.scheduler_wakeups, ntkpipe.study.packs, ntkpipe.train.stop, ntkpipe.workflow
        print(sorted({m.split(".")[0] for m in sys.modules} & {"jax", "pydantic", "xarray", "zarr", "optax"}))
    """)
    assert out.split("\n")[-2] == "[]"


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


def subpackage_imports(package: Path) -> dict[str, dict[str, str]]:
    """The import graph of ``package``'s parts (its subpackages and top-level modules; the package's
    ``__init__`` is the part ``""``), read from the source: ``graph[a][b]`` is the first ``file:line``
    where part ``a`` imports part ``b``. Every import statement counts (``TYPE_CHECKING`` and function-level ones too)."""
    name = package.name
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        part = "" if parts == ("__init__",) else parts[0]
        here = [name, *parts[:-1]]  # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join([*here[:len(here) - node.level + 1], *[node.module or ""]]).strip(".") \
                    if node.level else node.module or ""
                modules = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for module in modules:
                pieces = module.split(".")
                if pieces[0] == name and len(pieces) > 1 and pieces[1] != part and (
                        (package / pieces[1]).is_dir() or (package / f"{pieces[1]}.py").is_file()):
                    graph[part].setdefault(pieces[1], f"{path.relative_to(package.parent)}:{node.lineno}")
    return graph


def import_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle of ``graph`` as the list of its parts (the first repeated at the end), or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(a: str) -> list[str] | None:
        state[a] = "open"
        path.append(a)
        for b in graph.get(a, {}):
            if state.get(b) == "open":
                return [*path[path.index(b):], b]
            if b not in state and (cycle := visit(b)):
                return cycle
        state[a] = "done"
        path.pop()
        return None

    return next((cycle for a in sorted(graph) if a not in state and (cycle := visit(a))), None)


def test_subpackages_import_a_dag():
    """ntkpipe's subpackages (and top-level modules) import each other without a cycle: each imports only
    those below it (README, Layout). A cycle fails naming its parts and the import of each edge."""
    graph = subpackage_imports(REPO / "ntkpipe")
    assert {"data", "lang", "measure", "train"} <= set(graph)  # the graph is read at all
    cycle = import_cycle(graph)
    assert cycle is None, "import cycle " + " -> ".join(cycle) + ":\n" + "\n".join(
        f"  {a} -> {b}: {graph[a][b]}" for a, b in zip(cycle, cycle[1:]))


def test_a_cycle_is_found_and_named(tmp_path):
    """The check itself: a TYPE_CHECKING import that closes a loop a → b → a is reported as that cycle."""
    package = tmp_path / "pkg"
    for file, text in {"__init__.py": "", "a/__init__.py": "from pkg.b.x import f\n",
                       "b/__init__.py": "", "b/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from ..a import g\n", "c.py": "import pkg.a\n"}.items():
        (package / file).parent.mkdir(parents=True, exist_ok=True)
        (package / file).write_text(text)
    graph = subpackage_imports(package)
    assert graph == {"a": {"b": "pkg/a/__init__.py:1"}, "b": {"a": "pkg/b/x.py:3"}, "c": {"a": "pkg/c.py:1"}}
    assert import_cycle(graph) == ["a", "b", "a"]
    del graph["b"]
    assert import_cycle(graph) is None


def test_lazy_package_names_are_not_submodule_names():
    """A name a package exports lazily (its module ``__getattr__``) must not be one of its submodules:
    importing the submodule binds the package attribute to the module, so a rule calling
    ``ntkpipe.jobs.<name>`` would get a module instead of the job."""
    import ntkpipe.jobs

    submodules = {p.stem for p in Path(ntkpipe.jobs.__file__).parent.glob("*.py")}
    assert not submodules & set(ntkpipe.jobs.__all__)
    for name in ntkpipe.jobs.__all__:
        importlib.import_module(ntkpipe.jobs._HOME[name])
        assert callable(getattr(ntkpipe.jobs, name)), name
