"""Inputs the Snakefile used to skip or discover late: a missing or empty specs directory, a ``*.yml``
spec, a variant name that is no results path, a sweep above the run limit, and a results directory
that jobs cannot write into. Each stops the workflow while it is parsed, before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ntkpipe.errors import ConfigError
from ntkpipe.workflow import JAX_CACHE_ENV, build_index, check_results_writable, jax_cache_dir, written_directories
from tests.conftest import JAX_CACHE_ENV as SESSION_CACHE_ENV
from tests.conftest import run_snakemake

SPEC = """\
data: {source: linear_teacher, dim: 4, n_train: 8}
model: {depth: 2, width: 4}
train: {optimizer: {name: gd, lr: 0.1}, steps: 2}
measure: [loss]
sweep: {seed: [0, 1, 2]}
"""


def specs_dir(root: Path, **specs: str) -> Path:
    (root / "specs").mkdir(parents=True)
    for name, text in specs.items():
        (root / "specs" / name.replace("__", ".")).write_text(text)
    return root


def test_missing_and_empty_specs_directories_stop_the_workflow(tmp_path):
    with pytest.raises(Exception, match=r"the specs directory '/no/such/dir' does not exist "
                                        r"\(--config specs=/no/such/dir\)"):
        run_snakemake(tmp_path, config={"specs": "/no/such/dir"})
    specs_dir(tmp_path)
    with pytest.raises(Exception, match=r"the specs directory 'specs' holds no study specs \(\*\.yaml\)"):
        run_snakemake(tmp_path)
    assert not (tmp_path / "results").exists()


def test_a_yml_spec_and_a_bad_variant_name_stop_the_workflow(tmp_path):
    specs_dir(tmp_path, study__yml=SPEC, other__yaml=SPEC + "variants:\n  Big-One: {model: {width: 7}}\n")
    with pytest.raises(Exception) as err:
        run_snakemake(tmp_path)
    message = str(err.value)
    assert "study.yml: line 1: (top level): the workflow reads only specs/*.yaml files; rename 'study.yml' to " \
           "'study.yaml'" in message
    assert "other.yaml: line 7: variants.Big-One: a variant's name is part of its results' paths" in message
    assert not (tmp_path / "results").exists()


def test_the_run_limit_is_a_snakemake_setting(tmp_path):
    specs_dir(tmp_path, study__yaml=SPEC)
    with pytest.raises(Exception, match=r"line 5: sweep: the study has 3 runs, more than the limit of 2 "):
        run_snakemake(tmp_path, config={"max_runs": 2})
    index = build_index(tmp_path / "specs", tmp_path / "results", max_runs=3)
    assert len(index.runs) == 3


def test_a_results_path_that_is_a_file_stops_the_workflow(tmp_path):
    specs_dir(tmp_path, study__yaml=SPEC)
    (tmp_path / "results").write_text("not a directory")
    with pytest.raises(Exception, match=r"results directory: results is a file, but the workflow writes "
                                        r"results/\S+ there; move the file away or choose another directory"):
        run_snakemake(tmp_path)
    assert (tmp_path / "results").read_text() == "not a directory"


def test_unwritable_results_directories_are_named_before_any_job(tmp_path, monkeypatch):
    """Checked with os.access (a root user may write anywhere, so it is stubbed: results/runs exists
    and is read-only, results/study/ does not exist yet and would be made under writable results/)."""
    specs_dir(tmp_path, study__yaml=SPEC)
    monkeypatch.delenv(JAX_CACHE_ENV)  # the suite's shared compilation cache: here the default one
    results = tmp_path / "results"
    index = build_index(tmp_path / "specs", results)
    assert written_directories(index) == {results / "runs", results / "study", results / "logs" / "train",
                                          results / "logs" / "aggregate", results / "logs" / "table",
                                          results / "logs" / "index", results / ".cache" / "jax"}
    (results / "runs").mkdir(parents=True)
    check_results_writable(index)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != results / "runs" and real_access(p, mode))
    with pytest.raises(ConfigError, match=f"results directory: {results / 'runs'} is not writable, and the jobs "
                                          f"write into {results / 'runs'}; make it writable"):
        check_results_writable(index)


def test_the_compilation_cache_set_by_the_environment_is_checked_in_place_of_the_results_one(tmp_path, monkeypatch):
    specs_dir(tmp_path, study__yaml=SPEC)
    monkeypatch.setenv(JAX_CACHE_ENV, str(tmp_path / "jax"))
    index = build_index(tmp_path / "specs", tmp_path / "results")
    assert jax_cache_dir(index.results) == tmp_path / "jax"
    written = written_directories(index)
    assert tmp_path / "jax" in written and tmp_path / "results" / ".cache" / "jax" not in written
    monkeypatch.delenv(JAX_CACHE_ENV)
    assert jax_cache_dir(index.results) == tmp_path / "results" / ".cache" / "jax"
    assert SESSION_CACHE_ENV == JAX_CACHE_ENV  # the suite's session cache is the one jobs read


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_results_stop_snakemake(tmp_path):
    specs_dir(tmp_path, study__yaml=SPEC)
    (tmp_path / "results").mkdir()
    (tmp_path / "results").chmod(0o555)
    try:
        with pytest.raises(Exception, match=r"results directory: results is not writable"):
            run_snakemake(tmp_path)
    finally:
        (tmp_path / "results").chmod(0o755)
