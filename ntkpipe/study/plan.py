"""From a validated study to the jobs of the DAG: stages, runs, aggregation and figures, with paths.

Layout under ``results/`` (``tag`` = study name, or ``<study>-<variant>`` for a named variant):

    runs/<run id>.zarr                      one training run (shared by every study that has it)
    finals/<final id>.zarr                  final measurements added to a run store that lacks them
    stages/<compute>/<stage id>.zarr        e.g. stages/ntk_gram/…, stages/eigendecomposition/…
    <tag>/<tag>.zarr                        the study dataset (sweep axes as dimensions; claim_* verdicts)
    <tag>/<tag>_claims.csv                  the study's claims checked, one row per claim
    <tag>/figures/<figure>.png

Run and stage ids are content hashes of what the job computes (:mod:`ntkpipe.lang.identity`), so
identical runs are made once and any change makes a new id; a run's id leaves out its final
measurements (:mod:`ntkpipe.study.final_items`), so adding one never retrains: the training job
computes those asked for when it runs, a final job those its existing store lacks. The aggregation
and figure jobs carry their own slice of the spec as their config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ntkpipe.labels import AXIS_SYMBOLS
from ntkpipe.lang.identity import canonical, content_id
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.paths import get_path
from ntkpipe.lang.schema import MeasureItem, RunSpec
from ntkpipe.lang.titles import figure_title
from ntkpipe.stages import REFERENCES, STAGES, StageJob
from ntkpipe.study.final_items import is_final, item_config, item_key, run_final_items, stored_final_items
from ntkpipe.study.load import DEFAULT_VARIANT, Study
from ntkpipe.summaries import summary_options


@dataclass(frozen=True)
class RunJob:
    """A training run: ``stage_paths`` maps what each stage provides to the store it reads, and
    ``reference`` to the store of the trained network a kernel kind reads (``akgd``, ``ofe_fit``).
    ``config`` (what ``id`` hashes) leaves out the final measurements; ``finals`` are those the
    training job computes."""

    id: str
    spec: RunSpec
    config: dict
    path: Path
    stage_paths: dict[str, Path] = field(default_factory=dict)
    finals: tuple[MeasureItem, ...] = ()
    label: str = ""
    """The study tag and the sweep point (``depth_scaling σ=0.03 depth=3 seed=1``), for progress lines."""


@dataclass(frozen=True)
class FinalJob:
    """Final measurements ``items`` of a trained run whose store lacks them, computed from that
    store; ``id`` hashes ``config``: the run's id and the items."""

    id: str
    run: RunJob
    items: tuple[MeasureItem, ...]
    config: dict
    path: Path


@dataclass(frozen=True)
class StudyPlan:
    study: Study
    tag: str
    runs: list[RunJob]
    stages: dict[str, StageJob]
    dataset_path: Path
    figure_paths: dict[str, Path]
    support_runs: list[RunJob] = field(default_factory=list)
    """Network runs that kernel kinds read but the sweep does not list (not in the study dataset)."""
    finals: dict[str, FinalJob] = field(default_factory=dict)
    """By run id: the final job of each run whose store lacks some of the study's final items."""

    @property
    def table_path(self) -> Path:
        """The study table for the report (:mod:`ntkpipe.jobs.table`), next to the dataset."""
        return self.dataset_path.parent / f"{self.tag}_summary.csv"

    @property
    def phase_table_path(self) -> Path | None:
        """The phase table (solvable-model Table 1, :func:`ntkpipe.jobs.table.phase_table_file`) next to
        the dataset, for a study with a ``measured_phase`` summary; None for others."""
        if not any(s.kind == "measured_phase" for s in self.study.spec.summaries):
            return None
        return self.dataset_path.parent / f"{self.tag}_phases.csv"

    @property
    def claims_table_path(self) -> Path:
        """The claims table, one row per claim, next to the dataset."""
        return self.dataset_path.parent / f"{self.tag}_claims.csv"

    def aggregate_config(self) -> dict:
        """What the study dataset depends on besides its run stores, and a hash of the whole resolved
        spec, which the dataset stores (``study_spec``): editing a title or a description rewrites the
        dataset (and so redraws the study's figures), never a run; so does editing a claim (the dataset
        holds its verdict)."""
        spec = self.study.spec
        return canonical({"tag": self.tag, "axes": self.study.axes, "points": self.study.points,
                          "runs": [r.id for r in self.runs],
                          "summaries": [summary_options(s).model_dump(mode="json") for s in spec.summaries],
                          "finals": [item_config(m) for m in self.study.runs[0].measure if is_final(m)],
                          **({"scalings": [s.model_dump(mode="json") if s else None for s in self.study.scalings]}
                             if spec.scaling is not None else {}),
                          "spec": content_id(spec.model_dump(mode="json"))})

    def figure_config(self, name: str) -> dict:
        """The figure's settings and the title it is drawn with (which may be the study's description)."""
        fig = next(f for f in self.study.spec.figures if f.name == name)
        return canonical({**fig.model_dump(mode="json"), "title": figure_title(self.study.spec, fig)})


def study_tag(name: str, variant: str) -> str:
    return name if variant == DEFAULT_VARIANT else f"{name}-{variant}"


def point_label(tag: str, point: dict) -> str:
    """``<tag> σ=0.03 L=3 seed=1``: the study and a sweep point's values by their axes' symbols
    (:data:`ntkpipe.labels.AXIS_SYMBOLS`; floats to 3 digits)."""
    values = (f"{AXIS_SYMBOLS.get(k, k)}={v:.3g}" if isinstance(v, float) else f"{AXIS_SYMBOLS.get(k, k)}={v}"
              for k, v in point.items())
    return " ".join([tag, *values])


def plan_study(study: Study, results: str | Path = "results") -> StudyPlan:
    """Resolve every run and stage of ``study`` to an id and a path."""
    results = Path(results)
    tag = study_tag(study.name, study.variant)
    stages: dict[str, StageJob] = {}
    runs = [replace(_plan_run(study, run, results, stages), label=point_label(tag, point))
            for run, point in zip(study.runs, study.points)]
    listed = {job.id for job in runs}
    support: dict[str, RunJob] = {}
    for i, job in enumerate(runs):
        if MODEL_KINDS[job.spec.model.kind].reference:
            network = job.spec.model_copy(update={"model": job.spec.model.model_copy(update={"kind": "network"})})
            ref = _plan_run(study, network, results, stages)
            if ref.id not in listed:
                support.setdefault(ref.id, replace(ref, finals=(), label=f"{job.label} (network)"))
            runs[i] = replace(job, stage_paths={**job.stage_paths, "reference": ref.path})
    figures = {f.name: results / tag / "figures" / f"{f.name}.png" for f in study.spec.figures}
    finals = plan_finals(runs, results, lambda job: held_items(job, job))
    return StudyPlan(study, tag, runs, stages, results / tag / f"{tag}.zarr", figures, list(support.values()), finals)


def held_items(job: RunJob, trainer: RunJob) -> frozenset[str]:
    """Keys of the final items ``job``'s store holds or, if it has none yet, that ``trainer`` (the
    job that will make it: ``job`` merged with the other studies' requests) computes."""
    stored = stored_final_items(job.path, job.id)
    return stored if stored is not None else frozenset(item_key(m) for m in trainer.finals)


def plan_finals(runs: list[RunJob], results: Path, held: Callable[[RunJob], frozenset[str]]) -> dict[str, FinalJob]:
    """The final job of each run whose store lacks some of its ``finals`` (``held(job)``: the keys of
    the items it holds, see :func:`held_items`)."""
    out = {}
    for job in runs:
        have = held(job)
        missing = tuple(m for m in job.finals if item_key(m) not in have)
        if missing:
            config = canonical({"run": job.id, "measure": [item_config(m) for m in missing]})
            final_id = content_id(config)
            out[job.id] = FinalJob(final_id, job, missing, config, results / "finals" / f"{final_id}.zarr")
    return out


def _plan_run(study: Study, run: RunSpec, results: Path, stages: dict[str, StageJob]) -> RunJob:
    """The job of ``run``, with the stages it reads resolved to ids (and added to ``stages``)."""
    config = run.model_dump(mode="json")
    stage_paths: dict[str, Path] = {}
    for provides, section in REFERENCES.items():  # data stages first: later stages read the data
        node = _stage_reference(config, section)
        if node is None:
            continue
        data_inputs = {p: path for p, path in stage_paths.items() if p != "origin"}
        job = _plan_stage(study, node["stage"], run, config, data_inputs, results, stages)
        node["stage"] = job.id
        stage_paths[provides] = job.path
    config["measure"] = [m for m in config["measure"] if not is_final(m)]
    run_id = content_id(config)
    return RunJob(run_id, run, canonical(config), results / "runs" / f"{run_id}.zarr", stage_paths,
                  run_final_items(run))


def _stage_reference(config: dict, section: tuple[str, ...]) -> dict | None:
    """The section of a run config that names a stage (its ``stage`` key), if it does."""
    node = get_path(config, section)
    return node if isinstance(node, dict) and node.get("stage") else None


def _plan_stage(study: Study, name: str, run: RunSpec, run_config: dict, data_inputs: dict[str, Path],
                results: Path, stages: dict[str, StageJob]) -> StageJob:
    """The job of stage ``name`` for ``run`` (and, recursively, of the stages it reads)."""
    spec = study.spec.stages[name]
    kind = STAGES[spec.compute]
    upstream = {role: _plan_stage(study, other, run, run_config, data_inputs, results, stages)
                for role, (other, _) in kind.upstream(spec).items()}
    config = canonical({"compute": spec.compute,
                        **kind.config(spec, run, run_config, {role: job.id for role, job in upstream.items()})})
    inputs = {role: job.path for role, job in upstream.items()}
    if kind.reads_run_data:
        inputs.update(data_inputs)
    stage_id = content_id(config)
    job = StageJob(stage_id, spec.compute, config, results / "stages" / spec.compute / f"{stage_id}.zarr", inputs, run)
    return stages.setdefault(stage_id, job)
