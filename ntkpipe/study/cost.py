"""What a study will cost before it runs: an estimate of its jobs' seconds and of its largest job's
memory, from a linear model of each job's time in features of its shapes.

A job's seconds are Σ_f c_f·x_f over the features below (:data:`FEATURES`); the constants c_f are
fitted (non-negative least squares, :func:`fit_constants`) to the seconds that the jobs of finished
studies log (``done in S s``) by ``benchmarks/scale.py --calibrate``, and kept with the machine they
were measured on in ``cost_constants.json`` beside this module. The FLOP counts are the leading terms:

* training, per step: 3·B·[FP] (a forward and a backward pass over a batch of B examples; [FP] the
  FLOPs of one example's forward pass by XLA's cost analysis, 2·P_θ for an MLP of P_θ parameters and
  more for a CNN, which reuses its weights; a linearization's step takes a jvp too: twice that;
  :func:`ntkpipe.train.flops.step_flops`);
* an NTK Gram over g examples and C outputs: (g·C)²·P_θ (a Jacobian contraction; Novak et al. 2022, Sec. 3);
* an eigendecomposition of an (g·C)² Gram: (g·C)³.

A study compiles each distinct program shape of its runs once (:func:`program_shape`; the first run
of a shape pays it, convolutional nets far more than MLPs); each job is counted once, though several
sweep points be the same run. A training job has one Gram of its measurements' largest size
(``Measurement.gram_points``) per checkpoint and passes over its points per checkpoint; a stage job one Gram of its run's train ∪ test points (an eigendecomposition stage also
its eigendecomposition); the study's aggregation a part per run, and each figure a fixed part.
Memory is :mod:`ntkpipe.resources`' estimate of each job (its ``mem_mb``); the study's peak is its
largest job's. Wall time on k cores is the summed seconds over k: the main job keeps its cores
busy (``benchmarks/README.md``: wall ≈ 1.03 × job seconds / 2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.resources import gram_points, parameter_count, run_memory_mb, stage_memory_mb
from ntkpipe.study.plan import StudyPlan
from ntkpipe.train.driver import checkpoint_steps, total_steps
from ntkpipe.train.flops import step_flops

CONSTANTS_FILE = Path(__file__).with_name("cost_constants.json")
FEATURES = {
    "train_job": "each training job: start, writing its store",
    "compile": "each distinct program shape of the study's MLP runs (:func:`program_shape`: runs that differ "
               "only in their initialization or learning rate share compiled programs), charged to its first run",
    "conv_compile": "the same for other architectures (XLA compiles convolutions far slower)",
    "train_flops": "training FLOPs of an MLP, 3·B·[FP] per step (6·B·[FP] for a linearization; none for a kernel "
                   "kind, whose dynamics are on its Gram)",
    "conv_train_flops": "the same for other architectures (convolutions run below an MLP's GEMM rate)",
    "checkpoint": "each checkpoint: its measurements' fixed part",
    "checkpoint_points": "each checkpoint's points (train and test): its measurements' passes over the data",
    "measurement": "each measurement item: its compilation and final computation",
    "gram_flops": "checkpoint Grams, (g·C)²·P_θ each",
    "stage_job": "each stage job (Gram, eigendecomposition, NADs, pretraining)",
    "stage_gram_flops": "a stage's Gram, (g·C)²·P_θ",
    "eigen_flops": "an eigendecomposition stage's (g·C)³",
    "study_run": "the study's aggregation, per run",
    "study_job": "the study's aggregation and table",
    "figure": "each figure",
}
"""Feature name -> what it counts (a job's seconds are Σ constant × feature)."""


@dataclass(frozen=True)
class Constants:
    """Seconds per unit of each feature, and where they were measured."""

    seconds: dict[str, float]
    machine: str

    @classmethod
    def load(cls, path: Path = CONSTANTS_FILE) -> Constants:
        data = json.loads(Path(path).read_text())
        return cls({f: float(data["seconds"][f]) for f in FEATURES}, data["machine"])


@dataclass(frozen=True)
class StudyCost:
    """The estimate for one study: each job's features, its seconds and the largest job's memory."""

    tag: str
    runs: int
    jobs: list[tuple[str, dict[str, float]]]
    """(job name, its features)."""
    seconds: float
    peak_mb: int

    def wall_seconds(self, cores: int) -> float:
        return self.seconds / max(cores, 1)


def run_features(run) -> dict[str, float]:
    """Features of the training job of ``run`` (a :class:`~ntkpipe.lang.schema.RunSpec`)."""
    params = parameter_count(run)
    kind = MODEL_KINDS[run.model.kind]
    steps = total_steps(run.train, run.data.n_train)
    batch = run.train.batch_size or run.data.n_train
    checkpoints = len(checkpoint_steps(run.train.checkpoints, steps))
    rows = gram_points(run) * _outputs(run)
    flops = 0.0 if kind.kernel else step_flops(steps, batch, example_flops(run), kind.linearized)
    return {"train_job": 1.0, "train_flops" if run.model.architecture == "mlp" else "conv_train_flops": flops,
            "checkpoint": float(checkpoints), "checkpoint_points": float(checkpoints * (run.data.n_train + run.data.n_test)),
            "measurement": float(len(run.measure)), "gram_flops": float(checkpoints) * rows**2 * params}


def example_flops(run) -> float:
    """[FP] of the run's network on one example: 2·P_θ for an MLP; for other architectures XLA's cost
    analysis of the forward pass (cached by network shapes: σ, seed and the like do not change it)."""
    if run.model.architecture == "mlp":
        return 2.0 * parameter_count(run)
    from ntkpipe.data import input_shape

    model = run.model.model_copy(update={"kind": "network", "origin": None, "gamma": 1.0}
                                 | ({"init": "gaussian"} if hasattr(run.model, "init") else {}))
    key = (model.model_dump_json(exclude={"sigma", "seed"}), input_shape(run.data), _outputs(run))
    if key not in _FLOPS:
        import jax.numpy as jnp

        from ntkpipe.models import build_model
        from ntkpipe.ntk.cost import forward_flops

        _FLOPS[key] = forward_flops(build_model(model, key[1], key[2], 0), jnp.zeros(key[1], jnp.float32))
    return _FLOPS[key]


_FLOPS: dict[tuple, float] = {}


def stage_features(stage) -> dict[str, float]:
    """Features of a stage job (a :class:`~ntkpipe.stages.StageJob`): a Gram over its run's points."""
    run = stage.run
    rows = (run.data.n_train + run.data.n_test) * _outputs(run)
    features = {"stage_job": 1.0, "stage_gram_flops": float(rows) ** 2 * parameter_count(run)}
    if stage.compute == "eigendecomposition":
        features["eigen_flops"] = float(rows) ** 3
    return features


def _outputs(run) -> int:
    from ntkpipe.data import output_count

    return output_count(run.data)


def program_shape(run) -> str:
    """What the compiled programs of ``run`` depend on: its model options but its initialization (seed,
    σ, layer variances, pretrained origin: they set the parameters' values, not the programs) and, for an
    MLP, its output scale and γ (traced scalars, :mod:`ntkpipe.models.fixed`), the data's shapes, the
    optimizer, loss, batch and dtype, and the measurements; not learning rates or step counts, which the
    programs take as arguments."""
    from ntkpipe.data import input_shape

    train = run.train
    traced = {"output_scale", "gamma"} if run.model.architecture == "mlp" else set()
    return json.dumps([run.model.model_dump(mode="json", exclude={"seed", "sigma", "layer_variance", "origin"} | traced),
                       input_shape(run.data), run.data.n_train, run.data.n_test, _outputs(run), train.optimizer.name,
                       train.loss, train.batch_size, train.dtype, [m.model_dump(mode="json") for m in run.measure]],
                      sort_keys=True)


def study_jobs(plan: StudyPlan) -> list[tuple[str, dict[str, float], int]]:
    """(job name, features, estimated mem_mb) of every job ``plan`` makes, once each (sweep points that are
    the same run share its job), done or not."""
    jobs, compiled, seen = [], set(), set()
    for job in plan.runs + plan.support_runs:
        if job.id in seen:
            continue
        seen.add(job.id)
        shape = program_shape(job.spec)
        features = run_features(job.spec)
        if shape not in compiled:
            features["compile" if job.spec.model.architecture == "mlp" else "conv_compile"] = 1.0
        compiled.add(shape)
        jobs.append((f"train {job.id}", features, run_memory_mb(job.spec)))
    for s in plan.stages.values():
        assert s.run is not None, "a planned stage job holds the run that reads it"
        jobs.append((f"stage {s.compute} {s.id}", stage_features(s), stage_memory_mb(s.run)))
    jobs.append((f"aggregate {plan.tag}", {"study_job": 1.0, "study_run": float(len(plan.runs))}, 0))
    jobs += [(f"plot {plan.tag} {name}", {"figure": 1.0}, 0) for name in plan.figure_paths]
    return jobs


def job_seconds(features: dict[str, float], constants: Constants) -> float:
    return sum(constants.seconds[f] * x for f, x in features.items())


def study_cost(plan: StudyPlan, constants: Constants) -> StudyCost:
    """The estimate of every job of ``plan`` (done or not: what running the study from scratch costs)."""
    jobs = study_jobs(plan)
    seconds = sum(job_seconds(features, constants) for _, features, _ in jobs)
    peak = max(mem for _, _, mem in jobs)
    return StudyCost(plan.tag, len(plan.runs), [(name, features) for name, features, _ in jobs], seconds, peak)


def fit_constants(samples: list[tuple[dict[str, float], float]], weights: list[float] | None = None) -> dict[str, float]:
    """Non-negative least squares of seconds on features (absolute errors, so that a study's summed
    seconds come out right rather than each small job's), each sample's error times its weight (1 without
    ``weights``; ``benchmarks/scale.py calibrate`` weighs a job by 1/√(its study's seconds), so that small
    studies count too). Features no sample has get 0."""
    from scipy.optimize import nnls

    names = list(FEATURES)
    x = np.array([[features.get(f, 0.0) for f in names] for features, _ in samples])
    y = np.array([seconds for _, seconds in samples])
    w = np.ones(len(samples)) if weights is None else np.asarray(weights, float)
    scale = np.maximum(np.abs(x).max(axis=0), 1e-300)
    coef, _ = nnls(x / scale * w[:, None], y * w)
    return {f: float(c / s) for f, c, s in zip(names, coef, scale)}


def describe(cost: StudyCost, cores: int) -> str:
    """One line: ``tag: N runs, J jobs, ≈ S s of jobs, ≈ W on C cores, peak ≈ M MB (estimate; machine)``."""
    return (f"{cost.tag}: {cost.runs} runs, {len(cost.jobs)} jobs; estimate: {_duration(cost.seconds)} of job time, "
            f"{_duration(cost.wall_seconds(cores))} wall on {cores} core{'s' * (cores != 1)}, peak memory "
            f"{cost.peak_mb / 1024:.1f} GiB (largest job)")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

