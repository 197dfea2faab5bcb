"""Packed runs: same-shape runs trained in one compiled program write the stores their unpacked jobs
write (within float32 rounding), a diverging member leaves the others intact, and adding one σ to a
finished sweep runs one single-run job."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ntkpipe.jobs.pack_training import train_pack
from ntkpipe.jobs.training import train_run
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from ntkpipe.study.packs import pack_key, packs_by_run, plan_packs, unpacked_pattern
from ntkpipe.study.plan import plan_study
from tests.conftest import run_snakemake

SCALING = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 60
  checkpoints: {per_decade: 5}
measure: [loss, alignment, first_layer_alignment, t_half, t_align]
sweep:
  seed: [0, 1]
  sigma: SIGMAS
"""

SGD = """\
data: {source: digits, classes: [0, 1], n_train: 40, n_test: 20}
model: {depth: 2, width: 16, activation: relu, sigma: 1.4, bias: true}
train:
  optimizer: {name: sgd, lr: 0.05, momentum: 0.9, schedule: linear_decay}
  loss: bce
  batch_size: 16
  epochs: 2
  checkpoints: {spacing: linear, count: 2}
measure: [loss, test_accuracy]
sweep:
  seed: [0, 1]
  lr: [0.05, 0.2]
"""

GD_DIGITS = """\
data: {source: digits, classes: [0, 1], n_train: 40, n_test: 20}
model: {depth: 3, width: 16, activation: relu, sigma: 1.4, bias: true}
train:
  optimizer: {name: gd, lr: 0.1}
  steps: 30
  checkpoints: {spacing: linear, count: 5}
measure: [loss, test_loss, train_accuracy, test_accuracy, kernel_norm, alignment]
sweep:
  seed: [0, 1]
  sigma: [1.0, 1.4]
"""

RTOL = 1e-6
"""Packed vs unpacked: every stored variable agrees within RTOL times its largest magnitude. Members
train by ``lax.map`` (unbatched steps), so on CPU every variable of these sweeps is in fact
bit-identical; the shared checkpoint quantities are vmapped (float64 rounding of kernel sums)."""

RTOL_KERNEL = 1e-10
"""Float64 quantities of bit-identical (full-batch GD) parameters, read from the pack's vmapped
training Gram (kernel_norm, alignment) or computed from a member's weights: within RTOL_KERNEL."""

KERNEL_VARIABLES = ("kernel_norm", "alignment", "first_layer_alignment")


def _plan(directory: Path, text: str):
    path = directory / "study.yaml"
    path.write_text(text)
    return plan_study(load_study(path), directory / "results")


def _assert_same_store(unpacked: Path, packed: Path, rtol: dict[str, float] | None = None) -> None:
    """Equal variables and coordinates, each within ``rtol[name]`` (default RTOL) of its largest magnitude."""
    a, b = read_store(unpacked).load(), read_store(packed).load()
    assert set(a.data_vars) == set(b.data_vars) and a.attrs["config"] == b.attrs["config"]
    for name in a.data_vars:
        if name.startswith("seconds"):
            continue
        x, y = np.asarray(a[name].values, float), np.asarray(b[name].values, float)
        np.testing.assert_array_equal(np.isfinite(x), np.isfinite(y), err_msg=name)
        finite = np.isfinite(x)
        scale = np.max(np.abs(x[finite]), initial=0.0)
        np.testing.assert_allclose(y[finite], x[finite], rtol=0, atol=(rtol or {}).get(name, RTOL) * scale,
                                   err_msg=name)
    for name in a.coords:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def _train_both(directory: Path, text: str):
    plan = _plan(directory, text)
    packs = plan_packs(plan.runs)
    assert [len(p.runs) for p in packs.values()] == [len(plan.runs)]
    for job in plan.runs:
        train_run(job, directory / "unpacked" / job.path.name)
    for pack in packs.values():
        train_pack(pack.runs, [directory / "packed" / job.path.name for job in pack.runs])
    return plan


def test_packed_gd_sweep_matches_unpacked_and_divergence_stays_per_member(tmp_path):
    plan = _train_both(tmp_path, SCALING.replace("SIGMAS", "[0.1, 0.2, 1000.0]"))
    for job in plan.runs:
        _assert_same_store(tmp_path / "unpacked" / job.path.name, tmp_path / "packed" / job.path.name,
                           dict.fromkeys(KERNEL_VARIABLES, RTOL_KERNEL))
        store = read_store(tmp_path / "packed" / job.path.name)
        assert int(store["diverged"]) == (job.spec.model.sigma == 1000.0)
        if job.spec.model.sigma != 1000.0:  # the diverged members did not poison the others
            assert np.isfinite(store["loss"].values).all() and np.isfinite(float(store["t_half"]))


def test_packed_gd_checkpoint_quantities_match_unpacked(tmp_path):
    """Outputs on train and test and the training Gram, computed for the whole pack in its training
    call, give each member the losses, accuracies and kernel quantities of its unpacked run."""
    plan = _train_both(tmp_path, GD_DIGITS)
    for job in plan.runs:
        unpacked, packed = tmp_path / "unpacked" / job.path.name, tmp_path / "packed" / job.path.name
        _assert_same_store(unpacked, packed, dict.fromkeys(KERNEL_VARIABLES, RTOL_KERNEL))
        a, b = read_store(unpacked), read_store(packed)
        np.testing.assert_array_equal(a["final_params"].values, b["final_params"].values)  # GD: bit-identical
        assert np.isfinite(b["kernel_norm"].values).all() and np.isfinite(b["test_loss"].values).all()


def test_packed_sgd_over_seeds_and_learning_rates_matches_unpacked(tmp_path):
    plan = _train_both(tmp_path, SGD)
    times = set()
    for job in plan.runs:
        _assert_same_store(tmp_path / "unpacked" / job.path.name, tmp_path / "packed" / job.path.name)
        times.add(float(read_store(tmp_path / "packed" / job.path.name)["time"].values[-1]))
    assert len(times) == 2  # each member keeps its own time axis t = η₀·step


def test_pack_keys_and_the_train_rule_pattern(tmp_path):
    plan = _plan(tmp_path, SCALING.replace("SIGMAS", "[0.1, 0.2]").replace("max_time: 60", "steps: 5"))
    specs = [job.spec for job in plan.runs]
    assert len({pack_key(s) for s in specs}) == 1
    other = specs[0].model_copy(update={"model": specs[0].model.model_copy(update={"width": 9})})
    assert pack_key(other) != pack_key(specs[0])

    def with_lr(spec, lr):
        optimizer = spec.train.optimizer.model_copy(update={"lr": lr})
        return spec.model_copy(update={"train": spec.train.model_copy(update={"optimizer": optimizer})})

    assert pack_key(with_lr(specs[0], 0.2)) == pack_key(specs[0])  # `steps`: lr is vmapped
    timed = _plan(tmp_path, SCALING.replace("SIGMAS", "[0.1]")).runs[0].spec
    assert pack_key(with_lr(timed, 0.2)) != pack_key(timed)  # `max_time`: lr sets the step count
    packs = plan_packs(plan.runs, max_size=3)  # 4 runs → a pack of 3; the fourth stays single
    assert [len(p.runs) for p in packs.values()] == [3]
    first = min(plan.runs, key=lambda j: j.id)
    first.path.mkdir(parents=True)  # made meanwhile: the pack shrinks to the rest of its chunk
    assert [[j.id for j in p.runs] for p in plan_packs(plan.runs, max_size=3).values()] == \
        [[j.id for j in next(iter(packs.values())).runs[1:]]]
    pattern = re.compile(unpacked_pattern(set(packs_by_run(packs))) + r"\.zarr$")
    single = {j.id for j in plan.runs} - set(packs_by_run(packs))
    assert {j.id for j in plan.runs if pattern.match(j.path.name)} == single


@pytest.mark.workflow
def test_snakemake_packs_missing_runs_and_adding_one_sigma_runs_one_job(tmp_path):
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "tiny.yaml"
    spec.write_text(SCALING.replace("seed: [0, 1]", "seed: [0]").replace("SIGMAS", "[0.1, 0.15]"))
    first = [p for p in run_snakemake(tmp_path, config={"pack": 1}) if "/runs/" in p]
    assert len(first) == 2
    logs = sorted(p.name for p in (tmp_path / "results" / "logs" / "train").iterdir())
    assert len(logs) == 1 and logs[0].startswith("pack-")  # both runs by one packed job
    spec.write_text(SCALING.replace("seed: [0, 1]", "seed: [0]").replace("SIGMAS", "[0.1, 0.15, 0.2]"))
    second = [p for p in run_snakemake(tmp_path, config={"pack": 1}) if "/runs/" in p]
    assert len(second) == 1 and second[0] not in first
    run_id = Path(second[0]).stem
    assert (tmp_path / "results" / "logs" / "train" / f"{run_id}.log").exists()  # the `train` rule made it
