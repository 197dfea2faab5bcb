"""The plan cache (ntkpipe.plan_cache): a second planning of unchanged specs validates nothing and
returns the same index; a spec edit, or a run store made, replaced or damaged since, plans again;
and a store damaged after the cache was written is still found invalid and set aside."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ntkpipe.workflow as workflow
from ntkpipe.plan_cache import CACHE_DIR
from ntkpipe.store import write_store
from ntkpipe.study.final_items import FINAL_ITEMS_ATTR, final_items_attr

STUDY = """\
data: {source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}
model: {depth: 2, width: 4, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 10
  checkpoints: {per_decade: 4}
measure: [loss, alignment, t_half]
sweep:
  sigma: [0.1, 0.2]
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tiny_cache.yaml").write_text(STUDY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The spec files validated (load_study calls) from now on."""
    calls: list[str] = []
    real = workflow.load_study

    def counting(path, *args, **kwargs):
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(workflow, "load_study", counting)
    return calls


def plan() -> workflow.WorkflowIndex:
    return workflow.build_index("specs", "results", cache=True)


def write_run(job) -> Path:
    """The store the training job of ``job`` would write (a loss series; its final items)."""
    t = np.arange(1.0, 5.0)
    ds = xr.Dataset({"loss": ("time", 1 / t)}, coords={"time": t},
                    attrs={FINAL_ITEMS_ATTR: final_items_attr(job.finals)})
    return write_store(ds, job.path, config=job.config, store_id=job.id)


def test_an_unchanged_plan_is_reused_and_a_spec_edit_plans_again(workdir, loads):
    first = plan()
    assert loads == ["tiny_cache.yaml"] and len(list((workdir / "results" / CACHE_DIR).glob("*.pickle"))) == 1
    again = plan()
    assert loads == ["tiny_cache.yaml"]  # nothing validated
    assert again.runs.keys() == first.runs.keys() and again.stages.keys() == first.stages.keys()
    assert [job.config for job in again.runs.values()] == [job.config for job in first.runs.values()]
    assert again.finals.keys() == first.finals.keys()
    assert workflow.build_index("specs", "results").runs.keys() == first.runs.keys()  # as without the cache
    loads.clear()

    (workdir / "specs" / "tiny_cache.yaml").write_text(STUDY.replace("[0.1, 0.2]", "[0.1, 0.3]"))
    edited = plan()
    assert loads == ["tiny_cache.yaml"]
    assert len(edited.runs.keys() & first.runs.keys()) == 1


def test_a_store_made_or_damaged_after_the_cache_was_written_is_seen(workdir, loads, capsys):
    jobs = list(plan().runs.values())
    assert all(job.finals for job in jobs)  # t_half is a final item: each run's job computes it
    stores = [write_run(job) for job in jobs]
    index = plan()  # the stores were made since: planned again from the cached validation
    assert loads == ["tiny_cache.yaml"] and index.finals == {}
    assert plan().set_aside_invalid() == []  # reused, and the stores verify

    chunk = stores[0] / "loss" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-1])  # damaged after the cache was written
    index = plan()
    assert loads == ["tiny_cache.yaml"]
    assert index.set_aside_invalid() == [stores[0]]
    err = capsys.readouterr().err
    assert f"{stores[0]} is invalid (file size(s) differ: loss/0 (" in err
    assert not stores[0].exists() and stores[1].exists()


def test_a_replaced_store_of_other_final_items_plans_its_final_job(workdir, loads):
    jobs = list(plan().runs.values())
    stores = [write_run(job) for job in jobs]
    assert plan().finals == {}
    t = np.arange(1.0, 5.0)  # the store rewritten without its final items (e.g. by an older spec)
    write_store(xr.Dataset({"loss": ("time", 1 / t)}, coords={"time": t}), stores[0], config=jobs[0].config,
                store_id=jobs[0].id)
    index = plan()
    (final,) = index.finals.values()
    assert final.run.id == jobs[0].id and [m.name for m in final.items] == ["t_half"]
    assert loads == ["tiny_cache.yaml"]


def test_a_stamped_store_written_in_place_or_given_a_file_is_checked_again(workdir, loads, capsys):
    """A valid store's stamp (ntkpipe.store_stamps) spares its check only while no file of it was
    written, added or removed: an attrs edit of the same size, and a file added, are still caught."""
    stores = [write_run(job) for job in plan().runs.values()]
    assert plan().set_aside_invalid() == []  # planned again (the stores were made), stamped
    assert plan().set_aside_invalid() == []  # checked by their stamps
    attrs = stores[0] / ".zattrs"
    text = attrs.read_text()
    edited = text.replace('\\"seed\\": 0', '\\"seed\\": 1')
    assert edited != text and len(edited) == len(text)
    attrs.write_text(edited)
    (stores[1] / "loss" / "extra").write_bytes(b"")
    assert plan().set_aside_invalid() == stores
    err = capsys.readouterr().err
    assert f"{stores[0]} is invalid (its config attr hashes to" in err
    assert f"{stores[1]} is invalid (file(s) not in its manifest: loss/extra)" in err
    assert loads == ["tiny_cache.yaml"]
