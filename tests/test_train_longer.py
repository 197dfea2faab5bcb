"""Training longer without retraining: a run whose spec raises ``max_time``, ``steps`` or ``epochs``
continues the finished shorter run of its lineage (same config but for the horizon and the
checkpoints) from its saved final state, optimizer state included, computing only the new steps;
its store is bit-identical to a run trained from step 0. Where the dynamics depend on the total
(a learning-rate schedule over it) or the checkpoints before the shorter horizon differ (a linear
grid over the total), it trains from step 0 and says why."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import ntkpipe
from ntkpipe.jobs.lineage import lineage_id
from ntkpipe.jobs.pack_training import train_pack
from ntkpipe.jobs.training import train_run
from ntkpipe.store import OtherVersionWarning, read_store
from ntkpipe.study.packs import plan_packs
from ntkpipe.study.plan import RunJob
from tests.conftest import REPO, run_snakemake
from tests.test_resume import assert_same_stores, bitwise_equal, plan

ADAM = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: tanh, sigma: 0.8}
train:
  optimizer: {name: adam, lr: 0.01}
  dtype: float64
  max_time: HORIZON
  checkpoints: {per_decade: 8}
measure: [loss, alignment, first_layer_alignment, t_half]
"""

SGD = """\
data: {source: digits, classes: [0, 1], n_train: 40, n_test: 20}
model: {depth: 2, width: 16, activation: relu, sigma: 1.4, bias: true}
train:
  optimizer: {name: sgd, lr: 0.05, momentum: 0.9, SCHEDULE}
  loss: bce
  batch_size: 16
  epochs: HORIZON
  checkpoints: {CHECKPOINTS}
measure: [loss, test_accuracy, kernel_norm]
"""


def train(directory: Path, text: str):
    """Plan the one-run study ``text`` in ``directory`` and train it there; its job and store."""
    job = plan(directory, text).runs[0]
    return job, read_store(train_run(job, job.path))


@pytest.mark.parametrize(("text", "short", "long"), [
    (ADAM, "0.5", "2"),  # 50 -> 200 steps; the short run's last step is on the long run's log grid
    (ADAM, "0.63", "2"),  # 63 steps: between grid points
    (SGD.replace(", SCHEDULE", "").replace("CHECKPOINTS", "per_decade: 6"), "2", "5"),  # float32, batches
])
def test_longer_run_continues_the_shorter_and_equals_training_from_scratch(tmp_path, capfd, text, short, long):
    _, shorter = train(tmp_path / "study", text.replace("HORIZON", short))
    job, longer = train(tmp_path / "study", text.replace("HORIZON", long))
    assert "continuing from step" in capfd.readouterr().err
    fresh, scratch = train(tmp_path / "scratch", text.replace("HORIZON", long))
    assert fresh.id == job.id and longer.attrs["lineage"] == shorter.attrs["lineage"] == lineage_id(job.config)
    assert_same_stores(tmp_path / "scratch" / "results" / "runs" / f"{job.id}.zarr", job.path)
    total, done = int(longer["step"][-1]), int(shorter["step"][-1])
    assert (scratch.attrs["steps_trained"], longer.attrs["steps_trained"]) == (total, total - done)
    assert done < total and np.isfinite(longer["loss"].values).all()


@pytest.mark.parametrize(("schedule", "checkpoints", "why"), [
    ("schedule: linear_decay", "per_decade: 6", "dynamics depend on the number of steps"),
    ("schedule: constant", "spacing: linear, count: 4", "checkpoints before step 9 differ"),
])
def test_what_depends_on_the_total_trains_from_step_zero(tmp_path, capfd, schedule, checkpoints, why):
    text = SGD.replace("SCHEDULE", schedule).replace("CHECKPOINTS", checkpoints)
    train(tmp_path / "study", text.replace("HORIZON", "3"))
    job, longer = train(tmp_path / "study", text.replace("HORIZON", "5"))
    assert why in capfd.readouterr().err
    assert longer.attrs["steps_trained"] == int(longer["step"][-1])
    train(tmp_path / "scratch", text.replace("HORIZON", "5"))
    assert_same_stores(tmp_path / "scratch" / "results" / "runs" / f"{job.id}.zarr", job.path)


def shipped_like(max_time: float) -> str:
    """The shipped depth-scaling study (silent alignment Fig. 3) at a small size, over ``max_time``."""
    spec = yaml.safe_load((REPO / "specs" / "depth_scaling.yaml").read_text())
    spec["data"].update(dim=8, n_train=16)
    spec["model"]["width"] = 8
    spec["train"]["max_time"] = max_time
    spec["sweep"] = {"seed": [0], "union": [{"depth": [2], "sigma": [0.01, 0.1]}, {"depth": [3], "sigma": [0.1, 0.2]}]}
    for key in ("figures", "variants", "claims"):  # claims read figures and sweep points this copy drops
        spec.pop(key)
    return yaml.safe_dump(spec, sort_keys=False)


@pytest.mark.workflow
def test_extending_max_time_of_a_study_retrains_nothing(tmp_path, capfd):
    """Raising the study's max_time: each longer run trains only its new steps, and the study's
    dataset is bit-identical to one trained from step 0. Lowering it back where only the longer runs
    are stored: one train job per run reads the longer run's records and measures only its last
    checkpoint (not on the longer run's grid), replaying its state from step 0 (none is saved at its
    last step); the stores are bit-identical to those trained from step 0."""
    def study(directory: Path, max_time: float) -> Path:
        (directory / "specs").mkdir(parents=True, exist_ok=True)
        (directory / "specs" / "depth_scaling.yaml").write_text(shipped_like(max_time))
        run_snakemake(directory, config={"specs": str(directory / "specs"), "results": str(directory / "results")},
                      targets=[str(directory / "results" / "depth_scaling" / "depth_scaling.zarr")])
        return directory / "results" / "depth_scaling" / "depth_scaling.zarr"

    def trained(directory: Path) -> dict[str, tuple[int, int]]:
        """Steps trained and total steps of each run store, by lineage."""
        out = {}
        for path in (directory / "results" / "runs").glob("*.zarr"):
            store = read_store(path)
            out.setdefault(store.attrs["lineage"], []).append((int(store.attrs["steps_trained"]),
                                                                int(store["step"][-1])))
        return out

    study(tmp_path / "extended", 10)
    extended = study(tmp_path / "extended", 20)
    scratch = study(tmp_path / "scratch", 20)
    runs = trained(tmp_path / "extended")
    assert len(runs) == 4 and all(len(pair) == 2 for pair in runs.values())
    for (short, _), (new, total) in (sorted(pair) for pair in runs.values()):
        assert (short, new, total) == (200, 200, 400)  # the longer run took only its 200 new steps
    assert [steps for pair in trained(tmp_path / "scratch").values() for steps, _ in pair] == [400] * 4
    a, b = read_store(extended).load(), read_store(scratch).load()
    compared = [name for name in b.variables if not name.startswith("seconds")]
    assert {"loss", "t_half", "t_half_theory", "alignment"} <= set(compared)
    for name in compared:
        assert bitwise_equal(a[name].values, b[name].values), name
    logs = tmp_path / "scratch" / "results" / "logs" / "train"
    before = set(logs.glob("*.log"))
    capfd.readouterr()
    study(tmp_path / "scratch", 10)
    err = capfd.readouterr().err
    shorter = sorted(p.stem for p in set(logs.glob("*.log")) - before)
    assert len(shorter) == 4 and err.count("checkpoints read from stored runs") == 4  # one train job per run
    read, count = read_message(err)
    assert read == count - 1
    for run_id in shorter:
        path = tmp_path / "scratch" / "results" / "runs" / f"{run_id}.zarr"
        assert read_store(path).attrs["steps_trained"] == 200 and len(read_store(path)["step"]) == count
        assert_same_stores(tmp_path / "extended" / "results" / "runs" / f"{run_id}.zarr", path)


PACKED = """\
data: {source: linear_teacher, dim: 8, n_train: 16, gamma: 0.0}
model: {depth: 3, width: 8, activation: tanh}
train:
  optimizer: {name: gd, lr: 0.05}
  dtype: float64
  steps: HORIZON
  checkpoints: {per_decade: 8}
measure: [loss, alignment, kernel_norm, t_half]
sweep:
  sigma: [0.6, 0.8, 1.0]
"""


def run_study(directory: Path, text: str, **config) -> Path:
    """Write ``text`` as the study ``s`` of ``directory`` and make its dataset through Snakemake."""
    (directory / "specs").mkdir(parents=True, exist_ok=True)
    (directory / "specs" / "s.yaml").write_text(text)
    run_snakemake(directory, config={"specs": str(directory / "specs"), "results": str(directory / "results"),
                                     **config}, targets=[str(directory / "results" / "s" / "s.zarr")])
    return directory / "results" / "s" / "s.zarr"


def train_logs(directory: Path) -> list[str]:
    """The training jobs' logs (a pack's is ``pack-<id>.log``)."""
    return sorted(p.name for p in (directory / "results" / "logs" / "train").glob("*.log"))


@pytest.mark.workflow
def test_a_longer_packed_study_continues_its_packs(tmp_path):
    """With ``pack=1``, raising ``steps`` runs one pack job that continues the shorter pack's members
    from their saved final states (150 new steps each, not 200), and every store and the study's
    dataset are bit-identical to the longer study trained packed from step 0."""
    run_study(tmp_path / "extended", PACKED.replace("HORIZON", "50"), pack=1)
    first = train_logs(tmp_path / "extended")
    extended = run_study(tmp_path / "extended", PACKED.replace("HORIZON", "200"), pack=1)
    scratch = run_study(tmp_path / "scratch", PACKED.replace("HORIZON", "200"), pack=1)
    assert len(first) == 1 and first[0].startswith("pack-")
    logs = train_logs(tmp_path / "extended")
    assert len(logs) == 2 and all(name.startswith("pack-") for name in logs)  # one more job: the longer pack
    new_log = next(name for name in logs if name not in first)
    runs = tmp_path / "extended" / "results" / "runs"
    longer = {}
    for path in runs.glob("*.zarr"):
        store = read_store(path)
        if int(store["step"][-1]) == 200:
            longer[path.name] = int(store.attrs["steps_trained"])
    assert sorted(longer.values()) == [150] * 3, longer
    for name in longer:
        assert_same_stores(tmp_path / "scratch" / "results" / "runs" / name, runs / name)
    assert {int(read_store(p).attrs["steps_trained"]) for p in (tmp_path / "scratch" / "results" / "runs").glob(
        "*.zarr")} == {200}
    a, b = read_store(extended).load(), read_store(scratch).load()
    for name in (n for n in b.variables if not n.startswith("seconds")):
        assert bitwise_equal(a[name].values, b[name].values), name
    assert new_log in train_logs(tmp_path / "scratch")  # the same pack (its id hashes its runs' ids)


def read_message(err: str) -> tuple[int, int]:
    """(checkpoints read, checkpoints) from a training job's "… checkpoints read from stored runs" line."""
    found = re.search(r"(\d+) of (\d+) checkpoints read from stored runs of the same lineage", err)
    assert found, err[-2000:]
    return int(found.group(1)), int(found.group(2))


def test_a_shorter_horizon_reads_the_longer_runs_records_and_replays_only_to_its_end(tmp_path, capfd):
    """A run shorter than a stored run of its lineage reads that run's records at its checkpoints (the
    log grid's are a prefix of the longer run's) and trains only to bring a saved state (step 0, or a
    shorter stored run's last step) to its last step, measuring only a last step the longer run did not
    measure; its store is bit-identical to training it from step 0."""
    train(tmp_path / "study", ADAM.replace("HORIZON", "2"))  # 200 steps, log grid
    capfd.readouterr()
    for horizon, start, last_read in [("0.3", 0, False), ("0.56", 30, True)]:  # 30 steps (not on the grid), 56 (on it)
        job, store = train(tmp_path / "study", ADAM.replace("HORIZON", horizon))
        read, count = read_message(capfd.readouterr().err)
        assert read == count - (0 if last_read else 1) and len(store["step"]) == count
        total = int(store["step"][-1])
        assert store.attrs["steps_trained"] == total - start  # from step 0, then from the 30-step run's state
        train(tmp_path / "scratch", ADAM.replace("HORIZON", horizon))
        assert_same_stores(tmp_path / "scratch" / "results" / "runs" / f"{job.id}.zarr", job.path)


EVERY = SGD.replace(", SCHEDULE", "").replace("HORIZON", "30").replace(
    "measure: [loss, test_accuracy, kernel_norm]",
    "measure: [loss, test_accuracy, {name: energy_concentration, subset: 20, top_k: 4, every: 2}]")


def test_checkpoints_added_or_removed_inside_a_finished_horizon(tmp_path, capfd):
    """Checkpoints added to a finished horizon (SGD: data order and momentum replayed): the stored
    records at the old checkpoints are read where measured alike (``energy_concentration`` is taken
    every 2nd checkpoint, whose indices move), states are replayed from step 0 up to the last new
    checkpoint only, and the final state is the stored run's. Checkpoints removed: nothing is trained.
    Each store is bit-identical to training it from step 0."""
    job, base = train(tmp_path / "study", EVERY.replace("CHECKPOINTS", "per_decade: 3"))
    total = int(base["step"][-1])
    capfd.readouterr()
    for checkpoints in ["per_decade: 6", "per_decade: 1"]:
        text = EVERY.replace("CHECKPOINTS", checkpoints)
        job, store = train(tmp_path / "study", text)
        read, count = read_message(capfd.readouterr().err)
        steps = store["step"].values
        new = [int(s) for s in steps if s not in base["step"].values]
        assert int(steps[-1]) == total and store.attrs["steps_trained"] == (max(new) if new else 0)
        assert read < count if new else read == count
        train(tmp_path / "scratch", text)
        assert_same_stores(tmp_path / "scratch" / "results" / "runs" / f"{job.id}.zarr", job.path)


def train_packed(directory: Path, text: str) -> list[RunJob]:
    """Plan the study ``text`` in ``directory`` and make its one pack there; its runs."""
    (pack,) = plan_packs(plan(directory, text).runs).values()
    train_pack(pack.runs, [job.path for job in pack.runs])
    return list(pack.runs)


def test_a_packed_run_within_a_stored_horizon_is_made_alone_from_the_stored_run(tmp_path, capfd):
    """A pack whose members a stored (packed) run of their lineage covers makes each member alone,
    reading the stored records (56 steps lie on the 200-step run's log grid) and replaying its state;
    the stores are bit-identical to the shorter pack trained from step 0 (full-batch GD: the packed
    parameters are the single run's)."""
    train_packed(tmp_path / "study", PACKED.replace("HORIZON", "200"))
    capfd.readouterr()
    jobs = train_packed(tmp_path / "study", PACKED.replace("HORIZON", "56"))
    err = capfd.readouterr().err
    assert err.count("checkpoints read from stored runs") == 3 and "pack of" not in err
    read, count = read_message(err)
    assert read == count
    train_packed(tmp_path / "scratch", PACKED.replace("HORIZON", "56"))
    for job in jobs:
        assert read_store(job.path).attrs["steps_trained"] == 56
        assert_same_stores(tmp_path / "scratch" / "results" / "runs" / job.path.name, job.path)


def test_a_stored_run_of_another_ntkpipe_version_is_passed_over(tmp_path, capfd, monkeypatch):
    """A stored run whose snapshot another ntkpipe version made is not read (said on stderr): the
    longer run trains from step 0."""
    train(tmp_path / "study", ADAM.replace("HORIZON", "0.5"))
    monkeypatch.setattr(ntkpipe, "__version__", "0+another")
    capfd.readouterr()
    with pytest.warns(OtherVersionWarning, match="It is used as is"):  # the store is; its snapshot is not read
        _, longer = train(tmp_path / "study", ADAM.replace("HORIZON", "2"))
    assert "not reading a stored run of the same lineage (made by format" in capfd.readouterr().err
    assert longer.attrs["steps_trained"] == int(longer["step"][-1])
