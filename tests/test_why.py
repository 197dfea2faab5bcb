"""`ntkpipe why`: each job that would run, with the spec keys that changed since the last run."""

from __future__ import annotations

import pytest

from ntkpipe.cli import main
from ntkpipe.workflow import build_index
from tests.conftest import run_snakemake

pytestmark = pytest.mark.workflow

TINY = """\
description: Tiny why study
data: {source: linear_teacher, dim: 4, n_train: 8}
model: {depth: 3, width: 4, activation: linear, sigma: 0.1}
train: {optimizer: {name: gd, lr: 0.05}, max_time: 4, checkpoints: {per_decade: 2}}
measure: [loss]
sweep: {sigma: [0.1, 0.2]}
figures:
  - {name: curves, kind: time_series, variables: [loss], hue: sigma, title: Loss}
"""


def _why(work, capsys) -> list[str]:
    capsys.readouterr()
    assert main(["why", "--specs", str(work / "specs"), "--results", str(work / "results")]) == 0
    return capsys.readouterr().out.splitlines()


def test_why_names_the_changed_spec_keys(tmp_path, capsys):
    spec = tmp_path / "specs" / "tiny_why.yaml"
    spec.parent.mkdir()
    spec.write_text(TINY)
    run_snakemake(tmp_path)
    assert _why(tmp_path, capsys) == ["tiny_why: up to date"]

    spec.write_text(TINY.replace("lr: 0.05", "lr: 0.1").replace("[0.1, 0.2]", "[0.1, 0.2, 0.3]"))
    ids = [job.id[:8] for job in build_index(tmp_path / "specs", tmp_path / "results").plans["tiny_why"].runs]
    assert _why(tmp_path, capsys) == [
        "tiny_why: 6 jobs to run",
        f"  run {ids[0]} (tiny_why σ=0.1): its config changed since the last aggregation",
        "      train.optimizer.lr: 0.05 → 0.1",
        f"  run {ids[1]} (tiny_why σ=0.2): its config changed since the last aggregation",
        "      train.optimizer.lr: 0.05 → 0.1",
        f"  run {ids[2]} (tiny_why σ=0.3): new sweep point",
        "  aggregate tiny_why.zarr: the spec changed since it was made; 3 of the stores it reads are made",
        "      sweep.sigma: added 0.3",
        "      train.optimizer.lr: 0.05 → 0.1",
        "  figure curves: its dataset is made again",
        "  table tiny_why_summary.csv: its dataset is made again",
    ]

    spec.write_text(TINY.replace("title: Loss", "title: Training loss"))
    assert _why(tmp_path, capsys) == [
        "tiny_why: 3 jobs to run",
        "  aggregate tiny_why.zarr: the spec changed since it was made",
        "      figures[name=curves].title: 'Loss' → 'Training loss'",
        "  figure curves: its dataset is made again",
        "      figures[name=curves].title: 'Loss' → 'Training loss'",
        "  table tiny_why_summary.csv: its dataset is made again",
    ]
