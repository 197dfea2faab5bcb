"""From a validated study to the jobs of the DAG: stages, runs, aggregation and figures, with paths.

Layout under ``results/`` (``tag`` = study name, or ``<study>-<variant>`` for a named variant):

    runs/<run id>.zarr                      one training run (shared by every study that has it)
    stages/<compute>/<stage id>.zarr        e.g. stages/ntk_gram/…, stages/eigendecomposition/…
    <tag>/<tag>.zarr                        the study dataset (sweep axes as dimensions)
    <tag>/figures/<figure>.png

Run and stage ids are content hashes of what the job computes (:mod:`ntkpipe.spec.identity`), so
identical runs are made once and any change makes a new id; the aggregation and figure jobs carry
their own slice of the spec as their config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ntkpipe.data.dataset import output_count
from ntkpipe.spec.identity import canonical, content_id
from ntkpipe.spec.load import DEFAULT_VARIANT, Study
from ntkpipe.spec.schema import RunSpec


@dataclass(frozen=True)
class StageJob:
    id: str
    compute: str
    config: dict
    path: Path
    input_path: Path | None = None


@dataclass(frozen=True)
class RunJob:
    id: str
    spec: RunSpec
    config: dict
    path: Path
    stage_paths: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyPlan:
    study: Study
    tag: str
    runs: list[RunJob]
    stages: dict[str, StageJob]
    dataset_path: Path
    figure_paths: dict[str, Path]

    def aggregate_config(self) -> dict:
        """What the study dataset depends on besides its run stores."""
        spec = self.study.spec
        return canonical({"tag": self.tag, "axes": self.study.axes, "points": self.study.points,
                          "runs": [r.id for r in self.runs],
                          "summaries": [s.model_dump(mode="json") for s in spec.summaries]})

    def figure_config(self, name: str) -> dict:
        fig = next(f for f in self.study.spec.figures if f.name == name)
        return canonical(fig.model_dump(mode="json"))


def study_tag(name: str, variant: str) -> str:
    return name if variant == DEFAULT_VARIANT else f"{name}-{variant}"


def plan_study(study: Study, results: str | Path = "results") -> StudyPlan:
    """Resolve every run and stage of ``study`` to an id and a path."""
    results = Path(results)
    tag = study_tag(study.name, study.variant)
    stages: dict[str, StageJob] = {}
    runs = []
    for run in study.runs:
        config = run.model_dump(mode="json")
        stage_paths: dict[str, Path] = {}
        if run.data.labels.kind == "eigenvector_sign":
            eigen = _eigen_stage(study, run, results, stages)
            config["data"]["labels"]["stage"] = eigen.id
            stage_paths["labels"] = eigen.path
        run_id = content_id(config)
        runs.append(RunJob(run_id, run, canonical(config), results / "runs" / f"{run_id}.zarr", stage_paths))
    figures = {f.name: results / tag / "figures" / f"{f.name}.png" for f in study.spec.figures}
    return StudyPlan(study, tag, runs, stages, results / tag / f"{tag}.zarr", figures)


def _stage(compute: str, config: dict[str, Any], results: Path, stages: dict, input_path=None) -> StageJob:
    config = canonical({"compute": compute, **config})
    stage_id = content_id(config)
    job = StageJob(stage_id, compute, config, results / "stages" / compute / f"{stage_id}.zarr", input_path)
    stages.setdefault(stage_id, job)
    return job


def _eigen_stage(study: Study, run: RunSpec, results: Path, stages: dict) -> StageJob:
    """The eigendecomposition stage of ``run``'s labels and the NTK Gram stage it reads.

    The Gram is of the run's network at init (same data, architecture, init and seed); it does not
    depend on the labels or on ``model.kind`` (a linearization has its origin's init NTK).
    """
    eigen_spec = study.spec.stages[run.data.labels.stage]
    data = run.data.model_dump(mode="json")
    data.pop("labels")
    model = run.model.model_dump(mode="json")
    model.pop("kind")
    gram = _stage("ntk_gram", {"seed": run.seed, "data": data, "model": model,
                               "outputs": output_count(run.data)}, results, stages)
    return _stage("eigendecomposition", {"input": gram.id, "top_k": eigen_spec.top_k}, results, stages,
                  input_path=gram.path)
