"""Claims verdicts as text: terminal lines (failures in red, with their numbers) and a Markdown table."""

from __future__ import annotations

import math

RED, GREEN, RESET = "\033[31m", "\033[32m", "\033[0m"


def _number(x) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def status_mark(status: str) -> str:
    """A verdict's status for a reader: ✅ pass, ❌ FAIL, or ◻ the variant it is judged in."""
    return {"pass": "✅ pass", "FAIL": "❌ FAIL"}.get(status, f"◻ {status}")


def tally(rows) -> str:
    """``N of M claims hold`` over the claims judged on these runs, and how many are judged in another variant."""
    judged = [r for r in rows if r["status"] in ("pass", "FAIL")]
    held = sum(r["status"] == "pass" for r in judged)
    other = len(rows) - len(judged)
    return f"{held} of {len(judged)} claims hold" + (f" ({other} more judged in another variant)" if other else "")


def terminal_lines(rows, color: bool = True) -> list[str]:
    """One line per claim: status, study, claim, source, relation, measured vs expected and detail; a
    failure in red (with ``color``), a claim of another variant uncoloured."""
    out = []
    for r in rows:
        ok = r["status"] != "FAIL"
        status = r["status"] if not color else f"{GREEN if ok else RED}{r['status']}{RESET}"
        line = (f"{status:>4} {r['study']}.{r['claim']} ({r['source']}; {r['regime']}): {r['quantity']} "
                f"{r['relation']}: measured {_number(r['measured'])}, expected {_number(r['expected'])}; {r['detail']}")
        out.append(line if ok or not color else f"{RED}{line}{RESET}")
    return out


def markdown_table(rows) -> str:
    """A Markdown table: study, claim, paper and figure, regime, measured, status."""
    lines = ["| study | claim | paper and figure | regime | measured | status |", "|---|---|---|---|---|---|"]
    for r in rows:
        cell = lambda s: str(s).replace("|", "\\|")  # noqa: E731
        lines.append(f"| {r['study']} | {r['claim']} | {cell(r['source'])} | {cell(r['regime'])} | "
                     f"{cell(r['detail'])} | {status_mark(r['status'])} |")
    return "\n".join(lines)
