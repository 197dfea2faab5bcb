"""Final measurements never retrain: a run's id leaves them out, its store keeps the final parameters,
and a final job computes the ones a study adds, bit for bit as the training job would have. Final
measurements of a diverged run are NaN with their dims, never missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ntkpipe.jobs import aggregate_study, final_run
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from tests.conftest import run_snakemake, run_study_jobs

pytestmark = pytest.mark.workflow

STUDY = """\
data: {{source: linear_teacher, dim: 8, n_train: 16, n_test: 8, gamma: 0.0}}
model: {{depth: 3, width: 8, activation: linear, sigma: 0.1}}
train:
  optimizer: {{name: gd, lr: {lr}}}
  max_time: {max_time}
  checkpoints: {{per_decade: 10}}
measure: [{measure}]
sweep:
  sigma: [0.1, 0.15]
"""
FIRST = STUDY.format(lr="5e-2", max_time=60, measure="loss, alignment, t_half")
ADDED = STUDY.format(lr="5e-2", max_time=60, measure="loss, alignment, t_half, input_spectrum, "
                     "relative_kernel_change, kernel_predictors, {name: steps_to_threshold, threshold: 0.3}")
ADDED_VARIABLES = ("input_spectrum", "relative_kernel_change", "prediction_network", "prediction_final_ntk",
                   "pred_relerr_final", "steps_to_threshold")


def _made(updated: list[str], kind: str) -> list[str]:
    return [p for p in updated if Path(p).parts[1] == kind]


def _write(workdir: Path, text: str) -> None:
    (workdir / "specs").mkdir(parents=True, exist_ok=True)
    (workdir / "specs" / "tiny_finals.yaml").write_text(text)


def test_run_ids_leave_out_final_measurements(tmp_path):
    first, added = (plan_study(load_study(_spec(tmp_path, text, name)))
                    for text, name in ((FIRST, "a"), (ADDED, "b")))
    assert [r.id for r in first.runs] == [r.id for r in added.runs]
    assert "t_half" not in str(first.runs[0].config) and [m.name for m in first.runs[0].finals] == ["t_half"]
    series = plan_study(load_study(_spec(tmp_path, FIRST.replace("alignment, ", ""), "c")))
    assert not {r.id for r in series.runs} & {r.id for r in first.runs}  # checkpoint measurements still retrain


def test_studies_sharing_runs_with_one_final_name_plan_a_final_job(tmp_path):
    """One store holds one variable of a name: the first study's item goes to the shared training job,
    the other study's (other options) to a final job of its own, before any store exists."""
    from ntkpipe.workflow import build_index

    _spec(tmp_path / "specs", ADDED, "one")
    _spec(tmp_path / "specs", ADDED.replace("threshold: 0.3", "threshold: 0.1"), "two")
    index = build_index(tmp_path / "specs", tmp_path / "results")
    assert len(index.runs) == 2 and index.plans["one"].finals == {}
    for run in index.runs.values():
        assert [(m.name, m.options) for m in run.finals if m.name == "steps_to_threshold"] == [
            ("steps_to_threshold", {"threshold": 0.3})]
    finals = index.plans["two"].finals
    assert set(finals) == set(index.runs) and set(index.finals) == {f.id for f in finals.values()}
    assert all([(m.name, m.options) for m in f.items] == [("steps_to_threshold", {"threshold": 0.1})]
               for f in finals.values())


def _spec(directory: Path, text: str, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.computes("input_spectrum", "relative_kernel_change", "kernel_predictors", "steps_to_threshold")
def test_added_final_measurement_runs_final_jobs_not_training(tmp_path):
    work = tmp_path / "work"
    _write(work, FIRST)
    first = run_snakemake(work)
    assert len(_made(first, "runs")) == 2 and _made(first, "finals") == []
    run_stores = {p: (work / p / ".zattrs").stat().st_mtime_ns for p in _made(first, "runs")}

    _write(work, ADDED)
    second = run_snakemake(work)
    assert _made(second, "runs") == [] and len(_made(second, "finals")) == 2
    assert "results/tiny_finals/tiny_finals.zarr" in second
    assert {p: (work / p / ".zattrs").stat().st_mtime_ns for p in run_stores} == run_stores
    assert run_snakemake(work) == []

    fresh = tmp_path / "fresh"
    _write(fresh, ADDED)
    made = run_snakemake(fresh)
    assert len(_made(made, "runs")) == 2 and _made(made, "finals") == []  # the training job computed them all
    later, from_start = (xr.open_zarr(w / "results/tiny_finals/tiny_finals.zarr").load() for w in (work, fresh))
    assert set(ADDED_VARIABLES) <= set(later.data_vars)
    assert np.all(later["relative_kernel_change"].values > 0)  # read from the restored final model
    timings = [k for k in later.data_vars if k.startswith("seconds_")]
    xr.testing.assert_identical(later.drop_vars(timings).drop_attrs(), from_start.drop_vars(timings).drop_attrs())


def test_diverged_runs_record_nan_finals(tmp_path):
    text = STUDY.format(lr="200.0", max_time=2000, measure="loss, t_half, input_spectrum")
    plan, stores = run_study_jobs(text, tmp_path)
    assert all(int(s["diverged"]) == 1 for s in stores.values())
    ds = read_store(aggregate_study(plan, tmp_path / "study.zarr")).load()
    assert ds["diverged"].values.tolist() == [1, 1]
    assert ds["t_half"].dims == ("sigma",) and np.all(np.isnan(ds["t_half"].values))
    assert ds["input_spectrum"].dims == ("sigma", "spectrum_index") and np.all(np.isnan(ds["input_spectrum"]))

    (tmp_path / "study.yaml").write_text(text.replace("input_spectrum", "input_spectrum, kernel_predictors"))
    plan = plan_study(load_study(tmp_path / "study.yaml"), tmp_path / "results")
    assert [[m.name for m in f.items] for f in plan.finals.values()] == [["kernel_predictors"]] * 2
    for job in plan.finals.values():
        final_run(job, job.path)
    ds = read_store(aggregate_study(plan, tmp_path / "added.zarr")).load()
    assert ds["prediction_network"].sizes == {"sigma": 2, "test_point": 8, "output": 1}
    assert np.all(np.isnan(ds["prediction_network"])) and np.all(np.isnan(ds["pred_corr_final"]))
