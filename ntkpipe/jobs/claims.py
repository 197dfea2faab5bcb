"""The claims job: a study's claims checked against its dataset (:mod:`ntkpipe.verdicts.evaluate`; the same
verdicts its aggregation wrote into it as ``claim_*`` variables), written as the claims table; failures are
printed in red with their numbers and never fail the job."""

from __future__ import annotations

import sys
from pathlib import Path

from ntkpipe.jobs.worker_processes import worker_job
from ntkpipe.layout import open_dataset
from ntkpipe.study.plan import StudyPlan
from ntkpipe.verdicts.evaluate import claims_table, verdicts
from ntkpipe.verdicts.render import tally, terminal_lines


@worker_job
def study_claims(plan: StudyPlan, table: str | Path) -> Path:
    """Check ``plan``'s claims against its dataset; write ``table`` (CSV, one row per claim)."""
    rows = verdicts(plan.tag, plan.study.spec.claims, open_dataset(plan.dataset_path).load(),
                    plan.study.variant)
    frame = claims_table(rows)
    frame.to_csv(table, index=False, float_format="%.4g")
    records = frame.to_dict("records")
    failed = [r for r in records if r["status"] == "FAIL"]
    print(f"ntkpipe: {plan.tag}: {tally(records)}", file=sys.stderr)
    for line in terminal_lines(failed, color=sys.stderr.isatty()):
        print(f"ntkpipe: claim {line}", file=sys.stderr)
    return Path(table)
