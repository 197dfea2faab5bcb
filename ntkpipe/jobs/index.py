"""The study index job: ``results/<study>/index.md``, every figure with its paper panel, caption and
defects, the table with its row count, and the claims checked (:func:`ntkpipe.report.study_index`)."""

from __future__ import annotations

from pathlib import Path

from ntkpipe.jobs.worker_processes import worker_job
from ntkpipe.study.plan import StudyPlan


@worker_job
def study_index_file(plan: StudyPlan, out: str | Path) -> Path:
    """Write the index of ``plan``'s figures (as saved) and table to ``out``."""
    from ntkpipe.report import study_index

    out = Path(out)
    claims = plan.claims_table_path if plan.study.spec.claims else None
    out.write_text(study_index(plan, plan.figure_paths, plan.table_path, claims))
    return out
