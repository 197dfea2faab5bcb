"""The claims job: a study's claims checked against its dataset (:mod:`ntkpipe.verdicts.evaluate`), written
as the claims store (``claim_<name>_measured``, ``_expected``, ``_pass``) and the claims table; failures
are printed in red with their numbers and never fail the job."""

from __future__ import annotations

import sys
from pathlib import Path

from ntkpipe.layout import open_dataset
from ntkpipe.store import write_store
from ntkpipe.study.plan import StudyPlan
from ntkpipe.verdicts.evaluate import claims_dataset, claims_table, verdicts
from ntkpipe.verdicts.render import terminal_lines


def study_claims(plan: StudyPlan, store: str | Path, table: str | Path) -> Path:
    """Check ``plan``'s claims against its dataset; write ``store`` and ``table`` (CSV)."""
    rows = verdicts(plan.tag, plan.study.spec.claims, open_dataset(plan.dataset_path).load())
    frame = claims_table(rows)
    frame.to_csv(table, index=False, float_format="%.4g")
    records = frame.to_dict("records")
    failed = [r for r in records if r["status"] != "pass"]
    print(f"ntkpipe: {plan.tag}: {len(records) - len(failed)} of {len(records)} claims hold", file=sys.stderr)
    for line in terminal_lines(failed, color=sys.stderr.isatty()):
        print(f"ntkpipe: claim {line}", file=sys.stderr)
    return write_store(claims_dataset(rows), store, config=plan.claims_config(), store_id=f"{plan.tag}_claims")
