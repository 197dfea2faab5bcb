"""The malformed-spec corpus (``tests/malformed_specs/``): every file is stopped by ``ntkpipe validate``
with exit status 1, no traceback, and the problems its header expects, each naming the line and the
key, under the file's name. Plus the run-count limit (counted before expanding) and its overrides."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ntkpipe.cli import main
from ntkpipe.lang.sweep import count_points, expand
from tests.conftest import REPO

CORPUS = Path(__file__).parent / "malformed_specs"
FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".yaml", ".yml"))
EXPECT = re.compile(r"^# Expect: (line \d+: [^:\s]+( level\))?: .+)$", re.M)


def expectations(path: Path) -> list[str]:
    """The ``# Expect: line N: key: message`` lines of a corpus file's header."""
    return [m.group(1) for m in EXPECT.finditer(path.read_bytes().decode("utf-8", errors="replace"))]


def test_every_corpus_file_says_what_it_breaks_and_expects():
    assert len(FILES) >= 40
    for path in FILES:
        assert path.read_bytes().startswith(b"# Breaks: "), path.name
        assert expectations(path), f"{path.name}: no '# Expect: line N: key: message' header line"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_malformed_spec_is_stopped_with_file_line_and_key(path, capsys):
    status = main(["validate", str(path)])
    out = capsys.readouterr()
    assert status == 1
    assert "Traceback" not in out.out + out.err and out.out == ""
    assert f"{path}: " in out.err
    for expected in expectations(path):
        assert f"  - {expected}" in out.err, out.err


def test_exit_status_and_no_traceback_through_the_command_line():
    """The former tracebacks (not UTF-8, a range with step 0) and a 10⁶-run sweep, in one process."""
    files = [CORPUS / name for name in ("not_utf8.yaml", "range_zero_step.yaml", "sweep_too_large.yaml",
                                        "comments_only.yaml")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NTKPIPE_MAX_RUNS", None)
    proc = subprocess.run([sys.executable, "-m", "ntkpipe.cli", "validate", *map(str, files)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and proc.stdout == ""
    for path in files:
        assert all(f"{path}: " in proc.stderr and e in proc.stderr for e in expectations(path))


SMALL = """\
data: {source: linear_teacher, dim: 4, n_train: 8}
model: {depth: 2, width: 4}
train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
measure: [loss]
sweep:
  seed: [0, 1, 2]
  sigma: [0.5, 1.0, 2.0, 4.0]
"""


def test_run_limit_is_counted_before_expanding_and_can_be_raised(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("NTKPIPE_MAX_RUNS", raising=False)
    spec = tmp_path / "small.yaml"
    spec.write_text(SMALL)
    assert main(["validate", "--max-runs", "11", str(spec)]) == 1
    assert ("line 5: sweep: the study has 12 runs, more than the limit of 11" in capsys.readouterr().err)
    assert main(["validate", "--max-runs", "12", str(spec)]) == 0
    assert capsys.readouterr().out == f"ok {spec} (default: 12 runs)\n"
    monkeypatch.setenv("NTKPIPE_MAX_RUNS", "10")
    assert main(["validate", str(spec)]) == 1
    assert "the study has 12 runs, more than the limit of 10 (" in capsys.readouterr().err
    monkeypatch.setenv("NTKPIPE_MAX_RUNS", "many")
    assert main(["validate", str(spec)]) == 1
    assert capsys.readouterr().err == ("NTKPIPE_MAX_RUNS = 'many' is not a positive whole number of runs; set it "
                                       "like NTKPIPE_MAX_RUNS=20000 (the default is 10,000)\n")


def test_run_count_equals_the_expanded_sweep():
    """The count that guards the limit is the number of points expand makes, and of those that set d."""
    node = {"seed": [0, 1],
            "union": [{"depth": [2], "sigma": {"geomspace": [0.1, 1.0, 3]}},
                      {"zip": {"depth": [3, 4], "d": [1, 2]}, "width": {"range": [4, 20, 4]}}],
            "cases": {"opt": {"a": {}, "b": {}, "c": {}}, "data_case": {"x": {}, "y": {}}},
            "product": [{"lr": {"logspace": [-2, -1, 2]}}, {"momentum": [0.0, 0.5]}]}
    points = expand(node, extra=("d",))
    assert count_points(node, "d") == (len(points), sum("d" in p for p in points)) == (2 * (3 + 8) * 6 * 4, 2 * 8 * 6 * 4)
    assert count_points({"seed": {"range": [0, 1000, 1]}, "sigma": {"linspace": [0.1, 1.0, 1000]}}) == (10 ** 6, 0)


def test_empty_file_and_directory_are_named(tmp_path, capsys):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert main(["validate", str(empty), str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{empty}: 1 problem(s) in the study spec:\n  - line 1: (top level): the file is empty" in err
    assert f"{tmp_path}: 1 problem(s) in the study spec:\n  - is a directory; give the spec files in it" in err


def test_every_error_of_a_sweep_is_reported_with_figure_variables(tmp_path, capsys):
    """With a broken sweep, measurement and figure-variable references are still checked."""
    spec = tmp_path / "study.yaml"
    spec.write_text(SMALL.replace("[loss]", "[loss, kernel_nrom]") + "  sigmaa: [1]\n" + textwrap.dedent("""\
        figures:
          - {name: f, kind: time_series, variables: [los], hue: seed}
        """))
    assert main(["validate", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "3 problem(s)" in err  # hue: seed is not checked while the sweep is broken
    assert "line 4: measure.1: unknown measurement 'kernel_nrom' (did you mean 'kernel_norm'?)" in err
    assert "line 8: sweep.sigmaa: unknown sweep axis 'sigmaa' (did you mean 'sigma'?)" in err
    assert "line 10: figures.0.variables.0: 'los' is not measured (did you mean 'loss'?)" in err
