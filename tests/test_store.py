"""Verified result stores: a manifest of their files written last, the config checked against its
hash and the id, provenance recorded; damaged, edited, interrupted or foreign stores are reported
with their path and the fix, set aside so that Snakemake reruns their jobs, and listed or removed
by `ntkpipe verify` and `ntkpipe clean`."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import jax
import numpy as np
import pytest
import xarray as xr
import zarr

import ntkpipe.store as store_module
from ntkpipe import __version__
from ntkpipe.cli import main
from ntkpipe.errors import ResultError, SpecError
from ntkpipe.lang.identity import content_id
from ntkpipe.results_dir import every_planned_store
from ntkpipe.store import MANIFEST, OtherVersionWarning, read_store, verify_store, write_store
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from tests.conftest import REPO, run_snakemake, warnings_as_errors

CONFIG = {"model": {"sigma": 0.1, "depth": 2}, "seed": 0}
RUN_ID = content_id(CONFIG)

STUDY = """\
data: {source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}
model: {depth: 2, width: 4, activation: linear, sigma: 0.1}
train:
  optimizer: {name: gd, lr: 5e-2}
  max_time: 10
  checkpoints: {per_decade: 4}
measure: [loss, alignment]
sweep:
  sigma: [0.1, 0.2]
figures:
  - {name: curves, kind: time_series, variables: [loss], hue: sigma}
"""


def series() -> xr.Dataset:
    t = np.arange(1.0, 21.0)
    return xr.Dataset({"loss": ("time", 1 / t), "alignment": ("time", np.log1p(t))}, coords={"time": t})


@pytest.fixture
def store(tmp_path) -> Path:
    return write_store(series(), tmp_path / "results" / "runs" / f"{RUN_ID}.zarr", config=CONFIG, store_id=RUN_ID)


def _problems(path: Path, expect_id: str | None = RUN_ID, deep: bool = False) -> tuple[str, ...]:
    return verify_store(path, expect_id, deep=deep).problems


def _read_fails(path: Path) -> str:
    """The message of the ResultError read_store raises (at open, before any data is loaded)."""
    with pytest.raises(ResultError) as err:
        read_store(path, expect_id=RUN_ID)
    message = str(err.value)
    assert message.startswith(f"{path}: invalid result store: ")
    attrs = json.loads((path / ".zattrs").read_text())
    made = ", ".join(f"{k} {v}" for k, v in json.loads(attrs["versions"]).items())
    assert f" (made by {made}, on {attrs['created']}); " in message
    assert f"`rm -r {path}`" in message and "ntkpipe clean --invalid --deep" in message
    assert message.endswith("and rerun snakemake.")
    return message


def test_a_store_records_its_files_and_provenance(store):
    files = {p.relative_to(store).as_posix(): p for p in store.rglob("*") if p.is_file() and p.name != MANIFEST}
    manifest = json.loads((store / MANIFEST).read_text())
    assert set(manifest["files"]) == set(files) and "loss/0" in files
    for rel, path in files.items():
        assert manifest["files"][rel] == [path.stat().st_size, zlib.crc32(path.read_bytes())]
    assert (manifest["id"], manifest["config_hash"]) == (RUN_ID, RUN_ID)
    attrs = xr.open_zarr(store).attrs
    assert content_id(json.loads(attrs["config"])) == attrs["config_hash"] == attrs["id"] == RUN_ID
    made_by = json.loads(attrs["versions"])
    assert made_by["ntkpipe"] == attrs["ntkpipe_version"] == __version__
    assert made_by["numpy"] == np.__version__ and made_by["xarray"] == xr.__version__
    assert made_by["zarr"] == zarr.__version__ and made_by["python"] == ".".join(map(str, sys.version_info[:3]))
    assert {"jax", "jaxlib"} <= set(made_by) and made_by["device"].split(":")[0] == jax.devices()[0].platform
    if (REPO / ".git").exists():
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert made_by["git"].removesuffix("+dirty") == head.stdout.strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", attrs["created"])
    assert verify_store(store, RUN_ID, deep=True).valid
    np.testing.assert_array_equal(read_store(store, expect_id=RUN_ID)["loss"].values, series()["loss"].values)


def test_a_deleted_chunk_is_reported_not_read_as_nan(store):
    os.remove(store / "loss" / "0")
    assert _problems(store) == ("missing file(s) loss/0",)
    assert "missing file(s) loss/0" in _read_fails(store)


def test_a_truncated_chunk_is_reported_before_any_decompression(store):
    chunk = store / "loss" / "0"
    size = chunk.stat().st_size
    chunk.write_bytes(chunk.read_bytes()[: size // 2])
    assert _problems(store) == (f"file size(s) differ: loss/0 ({size // 2} bytes, manifest: {size})",)
    message = _read_fails(store)
    assert "blosc" not in message.lower()


def test_changed_bytes_of_the_same_size_fail_the_deep_check(store):
    chunk = store / "loss" / "0"
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    chunk.write_bytes(bytes(data))
    assert _problems(store) == ()  # the fast check (Snakefile, plan) reads sizes only
    assert _problems(store, deep=True) == ("file content(s) differ from the manifest's checksum: loss/0",)
    assert "checksum: loss/0" in _read_fails(store)


def test_an_edited_config_or_version_attr_is_caught(store, tmp_path):
    edited = {"model": {"sigma": 0.777, "depth": 2}, "seed": 0}
    zarr.open_group(store, mode="a", zarr_format=2).attrs["config"] = json.dumps(edited, sort_keys=True)
    assert (f"its config attr hashes to {content_id(edited)}, not to its config_hash {RUN_ID} "
            "(edited after it was written)") in _problems(store)
    assert "its config attr hashes to" in _read_fails(store)
    # the config hash rewritten to match the config: the manifest pins the written one
    zarr.open_group(store, mode="a", zarr_format=2).attrs["config_hash"] = content_id(edited)
    assert (f"its id/config_hash attrs ({RUN_ID}, {content_id(edited)}) differ from its manifest's "
            f"({RUN_ID}, {RUN_ID}) (edited after it was written)") in _problems(store)
    other = write_store(series(), tmp_path / "other.zarr", config=CONFIG, store_id=RUN_ID)
    zarr.open_group(other, mode="a", zarr_format=2).attrs["ntkpipe_version"] = "0.0.0-other"
    assert _problems(other)[0].startswith("file size(s) differ: .zattrs (")


def test_a_store_of_another_id_is_reported(store):
    other_id = "0123456789abcdef"
    assert _problems(store, other_id) == (f"holds id {RUN_ID}, expected {other_id}",)


def test_a_store_of_another_ntkpipe_version_is_used_with_one_warning(tmp_path, monkeypatch):
    made_by = {**store_module.versions(), "ntkpipe": "0.1.9"}
    monkeypatch.setattr(store_module, "versions", lambda: made_by)
    monkeypatch.setattr(store_module, "_WARNED_VERSIONS", set())
    path = write_store(series(), tmp_path / "results" / "runs" / f"{RUN_ID}.zarr", config=CONFIG, store_id=RUN_ID)
    check = verify_store(path, RUN_ID, deep=True)
    assert check.valid and check.outdated and check.version == "0.1.9"
    made = ", ".join(f"{k} {v}" for k, v in sorted(made_by.items()))
    created = xr.open_zarr(path).attrs["created"]
    expected = (f"{path} was made by {made}, on {created}; this is ntkpipe {__version__}. It is used as is (so are "
                f"other stores of ntkpipe 0.1.9). To recompute such stores: `ntkpipe clean --outdated --results "
                f"{tmp_path / 'results'}` (or `rm -r {path}`), then rerun snakemake")
    with pytest.warns(OtherVersionWarning) as caught:
        np.testing.assert_array_equal(read_store(path)["loss"].values, series()["loss"].values)
    assert [str(w.message) for w in caught] == [expected]
    with warnings_as_errors():
        read_store(path)  # once per process and version


def test_a_store_from_before_manifests_is_invalid(tmp_path):
    path = tmp_path / "old.zarr"
    series().assign_attrs(config=json.dumps(CONFIG), id=RUN_ID, ntkpipe_version="0.1.0").to_zarr(
        path, zarr_format=2, consolidated=True)
    assert _problems(path) == ("made before store manifests (ntkpipe 0.1.0 < 0.2.0)",)


def test_a_job_killed_mid_write_leaves_no_store_and_its_rerun_removes_the_leftover(tmp_path, monkeypatch):
    path = tmp_path / "results" / "runs" / f"{RUN_ID}.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX warns that fork and threads do not mix; the child never uses JAX
        child = os.fork()
    if child == 0:  # killed after writing the data, before the manifest
        try:
            monkeypatch.setattr(store_module, "_write_manifest", lambda *args: os.kill(os.getpid(), signal.SIGKILL))
            write_store(series(), path, config=CONFIG, store_id=RUN_ID)
        finally:
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == -signal.SIGKILL
    assert not path.exists()
    (leftover,) = store_module.leftovers(path)
    assert leftover.name.startswith(f".{path.name}.tmp-") and (leftover / "loss" / "0").is_file()
    shutil.copytree(leftover, path)  # what a writer without the rename would leave: data, no manifest
    assert _problems(path) == ("no manifest (its write was interrupted, or the manifest was deleted)",)
    write_store(series(), path, config=CONFIG, store_id=RUN_ID)
    assert store_module.leftovers(path) == [] and verify_store(path, RUN_ID, deep=True).valid


def _study(tmp_path: Path):
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "tiny.yaml"
    spec.write_text(STUDY)
    return spec, plan_study(load_study(spec), tmp_path / "results")


def test_verify_and_clean_list_and_remove_invalid_orphaned_and_leftover_stores(tmp_path, capsys):
    spec, plan = _study(tmp_path)
    results = tmp_path / "results"
    good, damaged = (write_store(series(), job.path, config=job.config, store_id=job.id) for job in plan.runs)
    os.remove(damaged / "loss" / "0")
    orphan_config = {"model": {"sigma": 9.0}}
    orphan = write_store(series(), results / "runs" / f"{content_id(orphan_config)}.zarr", config=orphan_config,
                         store_id=content_id(orphan_config))
    leftover = results / "runs" / f".{good.name}.tmp-deadbeef"
    leftover.mkdir()
    aside = results / ".invalid" / "runs.0123456789abcdef.zarr-20250101T000000Z"
    aside.mkdir(parents=True)
    args = ["--results", str(results), "--specs", str(tmp_path / "specs")]

    assert main(["verify", *args]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:-1]) == sorted([f"valid      {good}",
                                       f"invalid    {damaged}  (missing file(s) loss/0)",
                                       f"orphan     {orphan}  (planned by no spec in any variant)",
                                       f"set aside  {aside}",
                                       f"leftover   {leftover}  (of an interrupted write)"])
    assert sorted(out[-1].split(", ")) == sorted(["1 valid", "1 invalid", "1 orphan", "1 set aside", "1 leftover"])

    assert main(["clean", *args]) == 0  # without a flag: only lists
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and all(any(line.startswith("would remove ") and f" {path}" in line for line in out)
                                 for path in (damaged, orphan, aside, leftover))
    assert out[-1].startswith("4 to remove; nothing removed")
    assert damaged.exists() and orphan.exists() and aside.exists() and leftover.exists()

    assert main(["clean", "--invalid", "--tmp", *args]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == sorted([f"removed invalid    {damaged}  (missing file(s) loss/0)",
                                                                   f"removed set aside  {aside}",
                                                                   f"removed leftover   {leftover}  (of an interrupted write)"])
    assert not damaged.exists() and not aside.exists() and not leftover.exists() and orphan.exists()
    assert main(["clean", "--orphans", *args]) == 0
    assert not orphan.exists() and good.exists()
    capsys.readouterr()
    assert main(["verify", *args]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 valid"


def test_orphans_are_told_without_local_data_files(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "images.yaml").write_text(STUDY.replace(
        "{source: linear_teacher, dim: 4, n_train: 8, gamma: 0.0}",
        f"{{source: mnist, path: {tmp_path / 'no_mnist'}, classes: [0, 1], n_train: 8}}"))
    with pytest.raises(SpecError, match="no_mnist"):
        load_study(tmp_path / "specs" / "images.yaml")
    planned, errors = every_planned_store(tmp_path / "specs", tmp_path / "results")
    plan = plan_study(load_study(tmp_path / "specs" / "images.yaml", data_files=False), tmp_path / "results")
    assert errors == [] and planned == {**{job.path: job.id for job in plan.runs}, plan.dataset_path: "images"}
    assert every_planned_store(tmp_path / "nothing", tmp_path / "results")[1] == [
        f"{tmp_path / 'nothing'}: no study specs (*.yaml); give the specs directory with --specs"]


@pytest.mark.workflow
def test_snakemake_recomputes_exactly_the_invalid_stores(tmp_path, capsys):
    spec, plan = _study(tmp_path)
    first = run_snakemake(tmp_path)
    dataset = plan.dataset_path
    assert len(first) == 2 + 1 + 1 + 1 + 1  # runs, dataset, figure, table, index
    before = xr.open_zarr(dataset).load()
    damaged, foreign = (job.path for job in plan.runs)
    shutil.rmtree(foreign)
    shutil.copytree(damaged, foreign)  # another run's store at this run's path
    os.remove(damaged / "loss" / "0")
    leftover = damaged.with_name(f".{damaged.name}.tmp-deadbeef")
    leftover.mkdir()
    capsys.readouterr()

    assert main(["plan", str(spec), "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert (f"run      {plan.runs[0].id}  invalid  sigma=0.1  (missing file(s) loss/0; snakemake recomputes it)"
            in out.splitlines())
    assert (f"run      {plan.runs[1].id}  invalid  sigma=0.2  (holds id {plan.runs[0].id}, expected "
            f"{plan.runs[1].id}; snakemake recomputes it)") in out.splitlines()
    assert out.splitlines()[-1] == "0/2 runs done"

    again = run_snakemake(tmp_path)
    assert again == sorted(os.path.relpath(p, tmp_path) for p in
                           [damaged, foreign, dataset, plan.table_path, dataset.parent / "index.md",
                            *plan.figure_paths.values()])
    err = capsys.readouterr().err
    rel = damaged.relative_to(tmp_path)
    assert f"ntkpipe: {rel} is invalid (missing file(s) loss/0); moved to results/.invalid/runs.{damaged.name}-" in err
    assert sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "results" / ".invalid").iterdir()) == sorted(
        f"runs.{p.name}" for p in (damaged, foreign))
    assert not leftover.exists()
    after = xr.open_zarr(dataset).load()
    compared = [v for v in before.data_vars if not v.startswith("seconds")]
    assert {"loss", "alignment"} <= set(compared)
    assert after[compared].drop_attrs().identical(before[compared].drop_attrs())
    assert run_snakemake(tmp_path) == []


def test_stores_are_encoded_in_process_with_the_bytes_zarr_writes():
    """:func:`ntkpipe.store_files.dataset_files` writes what ``to_zarr`` (xarray, zarr-python) writes,
    file for file and byte for byte: several chunks with a padded edge, a chunk that is all fill value
    (NaN; 0 for integers) and so not written, scalars, booleans, integers, float32, a coordinate that
    is not a dimension, attrs of numpy and non-ASCII values; strings go through zarr."""
    from ntkpipe.store_files import _encoded_files, dataset_files, zarr_files

    rng = np.random.default_rng(0)
    big = rng.normal(size=(700, 900))
    big[:350] = np.nan  # whole chunks of NaN
    ds = xr.Dataset(
        {"big": (("row", "col"), big, {"long_name": "K^{c,d} ∈ ℝ", "scale": np.float64(0.5), "shape": np.arange(3)}),
         "flat": ("n", rng.normal(size=300_001)),
         "seconds": ((), 1.25), "diverged": ((), 0), "steps": ((), np.int64(7)),
         "mask": ("n3", np.array([True, False, True])), "f32": ("n3", np.array([1.5, np.nan, -0.0], np.float32)),
         "zeros": ("n3", np.zeros(3, np.int32)), "u8": ("n3", np.arange(3, dtype=np.uint8))},
        coords={"row": np.arange(1, 701), "col": np.linspace(0, 1, 900), "label": ("n3", np.array([0.1, 0.2, 0.3]))},
        attrs={"config": json.dumps({"a": 1}), "steps_trained": 5, "note": "γ = 30"})
    encoded = _encoded_files(ds)
    assert encoded is not None
    fast = dict(encoded)
    assert fast == zarr_files(ds)
    assert "big/0.0" not in fast and "diverged/0" not in fast and "seconds/0" in fast
    assert len([k for k in fast if k.startswith("flat/") and not k.startswith("flat/.")]) > 1
    strings = ds.assign_coords(kind=("n3", ["a", "bc", "d"]))
    assert _encoded_files(strings) is None and dict(dataset_files(strings)) == zarr_files(strings)
    with_encoding = ds.copy()
    with_encoding["f32"].encoding = {"dtype": "float64"}
    assert _encoded_files(with_encoding) is None


def test_a_loaded_store_is_the_dataset_zarr_reads(tmp_path):
    """:func:`ntkpipe.store.load_store` decodes the files itself and gives what ``read_store(...).load()``
    gives: values, attrs, indexes, variable order and each variable's encoding (which a dataset written
    back is written with); a store it does not decode (strings) is read through zarr."""
    from ntkpipe.store import load_store

    rng = np.random.default_rng(1)
    flat = rng.normal(size=300_001).astype(np.float32)
    flat[:100_000] = np.nan
    ds = series().assign({"flat": ("n", flat), "diverged": ((), 0), "mask": ("m", np.array([True, False])),
                          "counts": ("m", np.array([3, 0]))}).assign_coords(label=("m", [0.5, 1.5]))
    for name, data in {"plain": ds, "strings": ds.assign_coords(kind=("m", ["a", "bc"]))}.items():
        path = write_store(data, tmp_path / f"{name}.zarr", config=CONFIG, store_id=RUN_ID)
        loaded, read = load_store(path, expect_id=RUN_ID), read_store(path, expect_id=RUN_ID).load()
        assert loaded.identical(read) and list(loaded.variables) == list(read.variables)
        assert loaded.encoding == read.encoding and set(loaded.xindexes) == set(read.xindexes) == {"time"}
        for k, variable in read.variables.items():
            assert loaded[k].encoding.keys() == variable.encoding.keys(), k
            for key, value in variable.encoding.items():
                assert np.array_equal(loaded[k].encoding[key], value, equal_nan=True) if key == "_FillValue" else \
                    loaded[k].encoding[key] == value, (k, key)
    os.remove(tmp_path / "plain.zarr" / "loss" / "0")
    with pytest.raises(ResultError, match="missing file"):
        load_store(tmp_path / "plain.zarr", expect_id=RUN_ID)
