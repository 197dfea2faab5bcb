"""The claims of studies as the results hold them: read from each study's claims table, or evaluated now
from the spec's claims and the study dataset (``ntkpipe claims --evaluate``); and the README's fidelity
table, written between two markers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ntkpipe.layout import open_dataset
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study
from ntkpipe.verdicts.evaluate import claims_table, verdicts
from ntkpipe.verdicts.render import markdown_table, tally
from ntkpipe.workflow import spec_files

BEGIN, END = "<!-- claims:begin (ntkpipe claims --markdown README.md) -->", "<!-- claims:end -->"


def claim_rows(specs: str | Path, results: str | Path, variant: str = "default", studies=None,
               evaluate: bool = False) -> tuple[list[dict], list[str]]:
    """Every claim of the selected studies as a table row, and what is missing (a study without its claims
    table, or without its dataset with ``evaluate``)."""
    rows, missing = [], []
    for path in spec_files(specs, studies):
        plan = plan_study(load_study(path, variant, data_files=False), results)
        if not plan.study.spec.claims:
            continue
        if evaluate:
            if not plan.dataset_path.exists():
                missing.append(f"{plan.tag}: no dataset {plan.dataset_path}")
                continue
            frame = claims_table(verdicts(plan.tag, plan.study.spec.claims, open_dataset(plan.dataset_path).load(),
                                                  variant))
        elif plan.claims_table_path.is_file():
            frame = pd.read_csv(plan.claims_table_path, keep_default_na=False, na_values=[""])
            frame = frame.fillna({c: "" for c in frame.columns if frame[c].dtype == object})
        else:
            missing.append(f"{plan.tag}: no claims table {plan.claims_table_path} (snakemake makes it)")
            continue
        rows += frame.to_dict("records")
    return rows, missing


def write_fidelity_table(path: str | Path, rows: list[dict]) -> Path:
    """Replace the text between :data:`BEGIN` and :data:`END` in ``path`` with the Markdown table of ``rows``."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no fidelity-table markers; add the lines {BEGIN} and {END} where it goes")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = f"{tally(rows)}.\n\n{markdown_table(rows)}"
    path.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")
    return path
