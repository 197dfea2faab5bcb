"""The distributed path: every job of a multi-stage study (NTK Gram → eigendecomposition → runs →
aggregation → figure) as its own process through `profiles/processes` (the cluster-generic
executor, sharing only the filesystem), compared bit for bit with the in-process run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

pytestmark = pytest.mark.workflow

ROOT = Path(__file__).resolve().parents[1]
STUDY = """\
data: {source: digits, n_train: 30, n_test: 20, labels: {kind: eigenvector_sign, stage: eig, eigen_index: 2}}
model: {depth: 2, width: 16, activation: relu, sigma: 1.4}
train:
  optimizer: {name: gd, lr: 0.05}
  steps: 30
  checkpoints: {per_decade: 5}
stages:
  gram: {compute: ntk_gram}
  eig: {compute: eigendecomposition, input: gram, top_k: 10}
measure: [loss, alignment, test_accuracy, eigenvalue]
sweep:
  eigen_index: [2, 3]
figures:
  - {name: curves, kind: time_series, variables: [loss, alignment], hue: eigen_index}
"""


def snakemake(tmp: Path, results: str, *options: str) -> subprocess.Popen:
    """A ``snakemake`` process of the repository's workflow on ``tmp/specs`` into ``tmp/results``, started,
    for the study's dataset and figure (the jobs from the Gram to the figure; not its table and index)."""
    targets = [str(tmp / results / "tiny" / "tiny.zarr"), str(tmp / results / "tiny" / "figures" / "curves.png")]
    return subprocess.Popen([sys.executable, "-m", "snakemake", *targets, "--snakefile", str(ROOT / "Snakefile"),
                             *options, "--config", f"specs={tmp / 'specs'}", f"results={tmp / results}"],
                            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_jobs_as_processes_match_the_in_process_run(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tiny.yaml").write_text(STUDY)
    # both at once: the process run mostly waits for its job processes to start (imports), so the
    # in-process run fills the time; their results directories (and plan caches) are apart
    runs = [snakemake(tmp_path, "processes", "--profile", str(ROOT / "profiles" / "processes")),
            snakemake(tmp_path, "threads", "--cores", "1")]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
    apart = xr.open_zarr(tmp_path / "processes" / "tiny" / "tiny.zarr").load()
    together = xr.open_zarr(tmp_path / "threads" / "tiny" / "tiny.zarr").load()
    compared = [v for v in together.data_vars if not v.startswith("seconds")]
    assert {"loss", "alignment", "eigenvalue", "test_accuracy"} <= set(compared)
    assert int(together["diverged"].sum()) == 0
    assert apart[compared].drop_attrs().identical(together[compared].drop_attrs())
    assert (tmp_path / "processes" / "tiny" / "figures" / "curves.png").stat().st_size > 0
    assert (tmp_path / "processes" / "logs" / "aggregate" / "tiny.log").read_text().endswith("s\n")
