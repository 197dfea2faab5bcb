"""Stages: DAG nodes whose outputs runs read (NTK Grams, eigenvectors, NADs, pretrained networks).

:data:`STAGES` is the table of stage kinds; :func:`run_stage` is the body of the workflow's one
stage rule; :func:`run_context` gives a run its data and model with its stages applied.
"""

from ntkpipe.stages.inputs import REFERENCES, run_context
from ntkpipe.stages.job import StageJob
from ntkpipe.stages.registry import STAGES, StageKind

__all__ = ["REFERENCES", "STAGES", "StageJob", "StageKind", "run_context", "run_stage"]


def run_stage(job: StageJob, out):
    """Compute stage ``job`` into ``out`` with its kind's job function."""
    return STAGES[job.compute].job(job, out)
