"""`snakemake --report` of a tiny study: its figure and its table, captioned from the spec."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ntkpipe.layout import final_value, open_dataset
from tests.conftest import run_snakemake, snakemake_workflow

pytestmark = pytest.mark.workflow

TINY = """\
description: Tiny report study
data: {source: linear_teacher, dim: 4, n_train: 8}
model: {depth: 3, width: 4, activation: linear, sigma: 0.1}
train: {optimizer: {name: gd, lr: 0.05}, max_time: 20, checkpoints: {per_decade: 4}}
measure: [loss, t_half]
sweep: {sigma: [0.1, 0.2], seed: [0, 1]}
figures:
  - {name: t_half, kind: sweep, x: sigma, y: t_half, title: Half-loss time of the tiny net,
     reproduces: Tiny paper Fig. 7}
"""


def test_report_holds_the_captioned_figure_and_study_table(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tiny_report.yaml").write_text(TINY)
    made = run_snakemake(tmp_path)
    assert "results/tiny_report/tiny_report_summary.csv" in made

    table = pd.read_csv(tmp_path / "results/tiny_report/tiny_report_summary.csv", index_col="sigma")
    ds = open_dataset(tmp_path / "results/tiny_report/tiny_report.zarr")
    expected = ds.t_half.mean("seed").values
    assert table.index.tolist() == [0.1, 0.2]
    np.testing.assert_allclose(table["t_half"].values, expected, rtol=1e-3)
    assert table.columns.tolist() == ["diverged", "t_half", "loss_final"]  # a series by its final value; no timings
    np.testing.assert_allclose(table["loss_final"].values, final_value(ds.loss).mean("seed").values, rtol=1e-3)

    from snakemake.report.html_reporter import ReportSettings
    from snakemake.settings.types import DAGSettings

    with snakemake_workflow(tmp_path) as workflow:  # `snakemake --report report.html`
        workflow.dag(DAGSettings()).create_report(report_settings=ReportSettings(path=tmp_path / "report.html"))
    html = (tmp_path / "report.html").read_text()
    study = "<p>Study <strong>tiny_report</strong> (tiny_report.yaml). Tiny report study</p>"
    figure = ('"caption": "<p><strong>Half-loss time of the tiny net</strong></p>\\n'
              f'<p>Reproduces: Tiny paper Fig. 7.</p>\\n{study}')
    table = ('"caption": "<p>Every scalar variable of the study dataset averaged over seeds at each sweep point '
             f'(2 rows).</p>\\n{study}')
    assert figure in html and table in html
