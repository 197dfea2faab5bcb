"""A study's claims checked against its dataset: one :class:`Verdict` per claim, as a dataset of
``claim_<name>_measured``, ``claim_<name>_expected`` and ``claim_<name>_pass`` (the claims store) and as
a table (one row per claim). A claim that cannot be evaluated (e.g. every run diverged) fails with the
reason as its detail; nothing here raises for a claim."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ntkpipe.claims.record import Outcome, judged_in
from ntkpipe.claims.relations import RELATIONS
from ntkpipe.verdicts.quantity import read_quantity

COLUMNS = ["study", "claim", "source", "statement", "regime", "quantity", "relation", "measured", "expected",
           "status", "detail", "tolerance", "figures"]
"""The claims table's columns."""


@dataclass(frozen=True)
class Verdict:
    """One claim's row: what it says, and measured, expected, status (pass or FAIL) and detail; the
    figures that show it (comma-separated names)."""

    study: str
    claim: str
    source: str
    statement: str
    regime: str
    quantity: str
    relation: str
    measured: float
    expected: float
    status: str
    detail: str
    tolerance: str
    figures: str = ""


def quantity_text(q) -> str:
    """``variable[where]`` with its reductions, in one line."""
    where = ", ".join(f"{k}={v}" for k, v in q.where.items())
    reduce = ", ".join(f"{v} over {k}" for k, v in q.reduce.items())
    return q.variable + (f"[{where}]" if where else "") + (f" ({reduce})" if reduce else "")


def outcome(claim, ds: xr.Dataset) -> Outcome:
    """The relation's verdict on the claim's quantity in ``ds`` (a failure naming the reason if it cannot be read)."""
    relation = RELATIONS[claim.relation.kind]
    tol = claim.tolerance

    def slack(scale: float) -> float:
        return 0.0 if tol is None else tol.value * scale if tol.relative else tol.value

    try:
        values = read_quantity(ds, claim.quantity, relation.along(claim.relation))
        return relation.evaluate(claim.relation, values, lambda q: read_quantity(ds, q), slack)
    except (KeyError, ValueError, IndexError) as err:
        return Outcome(np.nan, np.nan, False, f"not evaluated: {err}")


def verdicts(study_tag: str, claims: list, ds: xr.Dataset, variant: str = "default") -> list[Verdict]:
    """Every claim of a study checked against its dataset ``ds`` (the runs of ``variant``). A claim judged
    only in other variants is measured here too and listed with the status ``<variant> variant``."""
    out = []
    for c in claims:
        o = outcome(c, ds)
        status = "pass" if o.passed else "FAIL"
        if not judged_in(c, variant):
            status = f"{' / '.join(c.variants)} variant"
            o = Outcome(o.measured, o.expected, False, f"judged in the {' / '.join(c.variants)} variant; at this "
                                                        f"size: {o.detail}")
        tol = "" if c.tolerance is None else (f"{c.tolerance.value:g}{' relative' if c.tolerance.relative else ''}: "
                                             f"{c.tolerance.reason}")
        out.append(Verdict(study_tag, c.name, c.source, " ".join(c.statement.split()), c.regime,
                           quantity_text(c.quantity), RELATIONS[c.relation.kind].text(c.relation), o.measured,
                           o.expected, status, o.detail, tol,
                           ", ".join(c.figures)))
    return out


def claims_table(rows: list[Verdict]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in rows], columns=COLUMNS)


def claims_dataset(rows: list[Verdict]) -> xr.Dataset:
    """``claim_<name>_measured``, ``_expected`` (float) and ``_pass`` (bool), each described (CF attrs); a claim
    of another variant has no ``_pass``."""
    out = {}
    for r in rows:
        about = f"{r.source}: \"{r.statement}\" ({r.regime})"
        out[f"claim_{r.claim}_measured"] = xr.DataArray(r.measured, attrs={
            "long_name": f"claim {r.claim}: measured", "description": f"{r.quantity}, {r.relation}; {about}",
            "detail": r.detail})
        out[f"claim_{r.claim}_expected"] = xr.DataArray(r.expected, attrs={
            "long_name": f"claim {r.claim}: expected", "description": f"what {r.quantity} is compared with: {r.relation}"})
        if r.status not in ("pass", "FAIL"):  # judged in another variant
            continue
        out[f"claim_{r.claim}_pass"] = xr.DataArray(r.status == "pass", attrs={
            "long_name": f"claim {r.claim}: holds", "description": f"whether {r.quantity} {r.relation}"
                                                                   + (f" within {r.tolerance}" if r.tolerance else "")})
    return xr.Dataset(out)
