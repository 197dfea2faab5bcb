"""Generated valid studies (``tests/strategies.py``), run end to end through Snakemake.

One hypothesis example draws ``STUDIES_PER_RUN`` studies into one specs directory and runs ONE
Snakemake invocation for all of them (threads in one process, one JAX compile cache), then checks
each study: every job succeeded; every variable of every requested measurement is in the study
dataset with its registry attrs; every figure (free of checker defects), the table and the index
are written; a dry run has nothing left to do; and editing one leaf reruns only what depends on it (a figure title: the study's
aggregation and figures, no training; the learning rate: exactly the runs whose id changed).

Profiles (tests/conftest.py): ``ci`` (default, derandomized) and ``long`` (random, hundreds of
studies): ``HYPOTHESIS_PROFILE=long python -m pytest tests/test_generated_studies.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from ntkpipe.claims.relations import RELATIONS
from ntkpipe.data import files
from ntkpipe.layout import open_dataset
from ntkpipe.measure.registry import REGISTRY, variable_attrs
from ntkpipe.stages import STAGES
from ntkpipe.study.checks import SKIP_CHECKSUMS
from ntkpipe.study.load import RESERVED_NAMES
from ntkpipe.workflow import build_index
from tests.conftest import dry_run, run_snakemake
from tests.strategies import (
    ARCHITECTURE_BUILDERS,
    ARCHITECTURES,
    CLAIM_BUILDERS,
    DATA_BUILDERS,
    FIGURE_BUILDERS,
    FIGURE_KINDS,
    SOURCES,
    STAGE_MODELS,
    DrawnStudy,
    valid_studies,
    yaml_text,
)
from tests.test_data_files import MNIST_NAMES, idx_bytes, write_batch

pytestmark = pytest.mark.workflow

STUDIES_PER_RUN = int(os.environ.get("NTKPIPE_GENERATED_STUDIES", "3"))
"""Studies drawn into one Snakemake invocation."""

EXAMPLES_PER_WORKFLOW = 25
"""One Snakemake example per this many of the profile's examples (ci: 2, the first of them the simplest
studies; long: 200, so 600 studies)."""

REGRESSIONS = Path(__file__).parent / "generated_regressions"


def write_fake_image_data(root: Path) -> dict[str, str]:
    """Tiny MNIST and CIFAR-10 directories in the official formats (IDX; pickled batches), classes
    0 … 9 in turn, 10 test images of each (the generated studies draw n_test <= 6 of two classes or
    more): source → directory."""
    rng = np.random.default_rng(0)
    mnist = root / "mnist"
    mnist.mkdir(parents=True, exist_ok=True)
    for key, name in MNIST_NAMES.items():
        n = 200 if "train" in key else 100
        arr = rng.integers(0, 256, (n, 28, 28)) if key.startswith("x") else np.arange(n) % 10
        (mnist / name).write_bytes(idx_bytes(arr))
    batches = root / "cifar10" / files.CIFAR10_DIRNAME
    batches.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        n = 100 if name == "test_batch" else 40
        write_batch(batches / name, rng.integers(0, 256, (n, 3072), dtype=np.uint8), [i % 10 for i in range(n)])
    return {"mnist": str(mnist), "cifar10": str(root / "cifar10")}


@pytest.fixture(scope="module")
def fake_data(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv(SKIP_CHECKSUMS, "1")  # the fake files are not the official ones
    return write_fake_image_data(tmp_path_factory.mktemp("image-data"))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


# ------------------------------------------------------------------ driving Snakemake


def snakemake_run(workdir: Path) -> None:
    """Run every study in ``workdir/specs``; keep going past a failed job (the checks name it)."""
    try:
        run_snakemake(workdir, keep_going=True)
    except Exception as err:  # a failed job: reported per study below
        print(f"snakemake: {type(err).__name__}: {err}", file=sys.stderr)


# ------------------------------------------------------------------ the invariants


def study_failures(study: DrawnStudy, workdir: Path) -> list[str]:
    """What is wrong with one study after the run: missing outputs, variables or attrs."""
    index = build_index(workdir / "specs", workdir / "results", studies=[study.name])
    plan = index.plans[study.name]
    missing = [t for t in index.targets() if not (workdir / t).exists() and not Path(t).exists()]
    if missing:
        ids = _job_ids(workdir, study.name) | {study.name}
        logs = [p for p in sorted((workdir / "results" / "logs").rglob("*.log")) if p.stem in ids]
        errors = [f"--- {p.parent.name}/{p.name}\n{p.read_text()[-2000:]}" for p in logs if "Traceback" in p.read_text()]
        return [f"not written: {missing}", *errors]
    problems = [f"figure {png.name}: {defect}" for png in sorted((workdir / "results" / study.name).glob("figures/*.png"))
                for defect in Image.open(png).text.get("Warning", "").splitlines()]  # the checker's, as saved
    ds = open_dataset(plan.dataset_path if plan.dataset_path.is_absolute() else workdir / plan.dataset_path)
    for name in study.measurements:
        for variable in REGISTRY[name].variables:
            if variable.name not in ds:
                problems.append(f"{name}: variable {variable.name} not in the dataset")
                continue
            attrs = ds[variable.name].attrs
            for key, value in variable_attrs(variable.name).items():
                if key in ("long_name", "description", "units") and attrs.get(key) != value:
                    problems.append(f"{variable.name}.attrs[{key!r}] = {attrs.get(key)!r}, registry: {value!r}")
    return problems


def _edit(path: Path, change) -> dict:
    spec = yaml.safe_load(path.read_text())
    change(spec)
    path.write_text(yaml_text(spec))
    return spec


def _job_ids(workdir: Path, name: str) -> set[str]:
    """The ids of the study's run, stage and final stores (what a leaf edit may make again)."""
    plan = build_index(workdir / "specs", workdir / "results", studies=[name]).plans[name]
    return ({job.id for job in plan.runs + plan.support_runs} | {job.id for job in plan.stages.values()}
            | {job.id for job in plan.finals.values()})


def check_study_set(studies: list[DrawnStudy], workdir: Path) -> None:
    for study in studies:
        study.write(workdir / "specs")
    snakemake_run(workdir)
    failures = {s.name: f for s in studies if (f := study_failures(s, workdir))}
    assert not failures, "\n".join(f"{name}:\n{next(s for s in studies if s.name == name).text()}\n" + "\n".join(f)
                                   for name, f in failures.items())
    assert dry_run(workdir) == [], "a second run still has jobs to do"

    # one leaf edited in each of two studies: a figure title (the first study with figures) and the
    # learning rate (another study); the dry run must hold exactly the jobs whose ids changed
    titled = next((s for s in studies if s.spec.get("figures")), None)
    trained = next((s for s in studies if s is not titled), None)
    if titled is not None:
        _edit(workdir / "specs" / f"{titled.name}.yaml", lambda s: s["figures"][0].update(title="edited title"))
    before = _job_ids(workdir, trained.name) if trained else set()
    if trained is not None:
        _edit(workdir / "specs" / f"{trained.name}.yaml",
              lambda s: s["train"]["optimizer"].update(lr=s["train"]["optimizer"]["lr"] * 0.5))
    changed = (_job_ids(workdir, trained.name) - before) if trained else set()
    outputs = [Path(p).relative_to("results") for p in dry_run(workdir)]
    stores = {p.stem for p in outputs if p.parts[0] in RESERVED_NAMES}
    assert stores == changed, f"after the edits the stores {sorted(stores)} are made; the new ids are {sorted(changed)}"
    touched = {p.parts[0] for p in outputs if p.parts[0] not in RESERVED_NAMES}
    # a study dataset records its resolved spec (and its claims' verdicts), so both edited studies are
    # aggregated again, also when the edited learning rate is overridden by a sweep axis (no new run)
    expected = {s.name for s in (titled, trained) if s is not None}
    assert touched == expected, f"studies whose dataset, table or figures are made again: {touched}, expected {expected}"
    if titled is not None:
        assert any(p.parts[:2] == (titled.name, "figures") for p in outputs), "the title edit redraws no figure"


@settings(max_examples=max(1, settings().max_examples // EXAMPLES_PER_WORKFLOW))
@given(data=st.data())
def test_generated_studies_run_end_to_end(data, fake_data, tmp_path_factory):
    workdir = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    (workdir / "specs").mkdir()
    drafts = workdir / "drafts"
    drafts.mkdir()
    studies = [data.draw(valid_studies(drafts, fake_data, name=f"gen_{i}"), label=f"gen_{i}")
               for i in range(STUDIES_PER_RUN)]
    check_study_set(studies, workdir)


def test_builders_cover_the_registries():
    """A source, architecture, stage, figure kind or claim relation the language gains needs a builder in
    tests/strategies.py."""
    assert set(DATA_BUILDERS) == set(SOURCES)
    assert set(CLAIM_BUILDERS) == set(RELATIONS)
    assert set(FIGURE_BUILDERS) == set(FIGURE_KINDS)
    assert set(STAGE_MODELS) == set(STAGES)
    assert set(ARCHITECTURE_BUILDERS) == set(ARCHITECTURES)


def test_generated_regressions(fake_data, tmp_path):
    """Shrunk studies the generated tests once failed on (their image paths point at the fake data),
    run together as one generated study set, with the same invariants."""
    studies = []
    for i, path in enumerate(sorted(REGRESSIONS.glob("*.yaml"))):
        text = path.read_text().replace("FAKE_MNIST", fake_data["mnist"]).replace("FAKE_CIFAR10", fake_data["cifar10"])
        spec = yaml.safe_load(text)
        studies.append(DrawnStudy(f"regression_{i}", spec, [m if isinstance(m, str) else m["name"] for m in spec["measure"]]))
    assert len(studies) >= 3, "tests/generated_regressions/ lost its studies"
    (tmp_path / "specs").mkdir()
    check_study_set(studies, tmp_path)
