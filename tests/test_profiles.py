"""Cluster profiles: GPUs for exactly the training and kernel rules (none on profiles/slurm-cpu),
settings the executor plugins know."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pkgutil
import re
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.file_group  # workflow_rules() runs Snakemake once for the file

ROOT = Path(__file__).resolve().parents[1]
GPU_RULES = {"train", "stage", "final"}
# Snakemake's own options a profile here may set (all but the executor plugin's, which carry its prefix).
SNAKEMAKE_KEYS = {"executor", "jobs", "latency-wait", "retries", "default-resources", "set-resources",
                  "config", "force-use-threads", "printshellcmds", "cluster-generic-submit-cmd"}


def profile(name: str) -> dict:
    return yaml.safe_load((ROOT / "profiles" / name / "config.yaml").read_text())


@functools.cache
def workflow_rules() -> set[str]:
    """The workflow's rule names as Snakemake lists them (the `train` rule is defined in a loop)."""
    listed = subprocess.run(["snakemake", "--list-rules"], cwd=ROOT, check=True, capture_output=True, text=True)
    return set(listed.stdout.split())


def plugin_module(executor: str):
    """The executor plugin's package (the `cluster` extra, which `dev` installs)."""
    return importlib.import_module(f"snakemake_executor_plugin_{executor}")


def plugin_source(module) -> str:
    """The plugin package's source: every resource name it reads appears in it."""
    parts = [inspect.getsource(module)]
    for info in pkgutil.iter_modules(module.__path__):
        parts.append(inspect.getsource(importlib.import_module(f"{module.__name__}.{info.name}")))
    return "\n".join(parts)


def gpu_rules(config: dict, request) -> set[str]:
    return {rule for rule, resources in config["set-resources"].items() if request(resources)}


def test_slurm_requests_one_gpu_for_exactly_the_training_and_kernel_rules_as_job_arrays():
    config = profile("slurm")
    assert config["executor"] == "slurm"
    assert set(config["set-resources"]) <= workflow_rules()
    assert gpu_rules(config, lambda r: r.get("gpu") == 1) == GPU_RULES
    assert {r["slurm_partition"] for rule, r in config["set-resources"].items() if rule in GPU_RULES} == {"gpu"}
    assert "gpu" not in config["default-resources"] and config["default-resources"]["slurm_partition"] == "cpu"
    # a `--config` on the command line replaces the profile's `config`: the GPU request must not live there
    assert "config" not in config
    assert set(config["slurm-array-jobs"].split(",")) == GPU_RULES


def test_slurm_cpu_is_the_slurm_profile_without_gpu_requests():
    gpu, cpu = profile("slurm"), profile("slurm-cpu")
    assert not any("gpu" in r for r in [cpu["default-resources"], *cpu["set-resources"].values()])
    assert {r["slurm_partition"] for r in [cpu["default-resources"], *cpu["set-resources"].values()]} == {"cpu"}
    without_gpu = {rule: {k: v for k, v in r.items() if k != "gpu"} | {"slurm_partition": "cpu"}
                   for rule, r in gpu["set-resources"].items()}
    assert cpu["set-resources"] == without_gpu
    del gpu["set-resources"], cpu["set-resources"]
    assert cpu == gpu  # every other setting alike


@pytest.mark.parametrize("name", ["slurm", "slurm-cpu"])
def test_slurm_profiles_read_job_states_with_squeue(name):
    """The plugin's default status command is `sacct` whenever that binary exists; on a cluster without
    accounting sacct exits 1 and the plugin never sees a job end (tests/test_slurm.py runs on one)."""
    assert profile(name)["slurm-status-command"] == "squeue"


@pytest.mark.parametrize("name", ["slurm", "slurm-cpu"])
def test_slurm_profiles_requeue_and_retry_killed_jobs(name):
    """A preempted job goes back to the queue (sbatch --requeue), and a training job ended by SIGTERM
    (scancel, the time limit) is retried, resuming from its snapshot (tests/test_slurm.py)."""
    config = profile(name)
    assert config["slurm-requeue"] is True and config["retries"] >= 1


def test_lsf_sends_exactly_the_training_and_kernel_rules_to_a_gpu_queue():
    config = profile("lsf")
    assert config["executor"] == "lsf"
    assert set(config["set-resources"]) <= workflow_rules()
    assert gpu_rules(config, lambda r: r.get("lsf_extra") == "-gpu num=1" and r["lsf_queue"] == "gpu") == GPU_RULES
    assert "lsf_extra" not in config["default-resources"] and "config" not in config


@pytest.mark.parametrize("name", ["slurm", "slurm-cpu", "lsf"])
def test_profile_keys_are_settings_and_resources_of_the_executor_plugin(name):
    config = profile(name)
    module = plugin_module(config["executor"])
    prefix = f"{config['executor']}-"
    fields = {f.name for f in dataclasses.fields(module.ExecutorSettings)} if hasattr(module, "ExecutorSettings") else set()
    for key in config:
        if key.startswith(prefix):
            assert key[len(prefix):].replace("-", "_") in fields, f"{name}: {key} is no setting of the plugin"
        else:
            assert key in SNAKEMAKE_KEYS, f"{name}: unexpected key {key}"
    source = plugin_source(module)
    resources = {k for r in [config["default-resources"], *config["set-resources"].values()] for k in r}
    for resource in resources:
        assert re.search(rf"resources(\.get\(\s*[\"']|\.){resource}\b", source), f"{name}: {resource} unread"
