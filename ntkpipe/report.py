"""Captions of the Snakemake report's items (``snakemake --report``), in reStructuredText, from the
study spec: a figure's title, the paper figure it reproduces and the study description; a study
table's description of what it averages. Also each figure's caption paragraph and PNG metadata, and
the study's ``index.md`` (issue 27)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ntkpipe.lang.titles import figure_title
from ntkpipe.study.plan import StudyPlan
from ntkpipe.verdicts.render import status_mark

if TYPE_CHECKING:
    from ntkpipe.lang.schema import FigureSpec

RST_SPECIAL = re.compile(r"([\\`*_|<>\[\]])")


def rst_text(text: str) -> str:
    """``text`` as literal reStructuredText: markup characters escaped, lines joined."""
    return " ".join(RST_SPECIAL.sub(r"\\\1", line.strip()) for line in text.splitlines() if line.strip())


def _study_line(plan: StudyPlan) -> str:
    spec = plan.study.spec
    about = f" {rst_text(spec.description)}" if spec.description else ""
    return f"Study **{rst_text(plan.tag)}** ({rst_text(plan.study.path.name)}).{about}"


def figure_caption(plan: StudyPlan, name: str) -> str:
    """The figure's title in bold, ``Reproduces: <reproduces>`` if the spec says, and the study."""
    figure = next(f for f in plan.study.spec.figures if f.name == name)
    title = figure_title(plan.study.spec, figure.model_copy(update={"reproduces": None}))
    lines = [f"**{rst_text(title)}**"]
    if figure.reproduces:
        lines.append(f"Reproduces: {rst_text(figure.reproduces)}.")
    return "\n\n".join(lines + [_study_line(plan)])


def table_rows(plan: StudyPlan) -> int:
    """The rows of the study table: its sweep points without ``seed`` (1 without a sweep)."""
    return len({tuple(v for a, v in point.items() if a != "seed") for point in plan.study.points})


def table_caption(plan: StudyPlan) -> str:
    """What the study table holds, how many rows, and the study."""
    rows = table_rows(plan)
    return (f"Every scalar variable of the study dataset averaged over seeds at each sweep point "
            f"({rows} row{'s' if rows != 1 else ''}).\n\n{_study_line(plan)}")


def claims_caption(plan: StudyPlan) -> str:
    """What the claims table holds, how many claims, and the study."""
    n = len(plan.study.spec.claims)
    return (f"The paper's claims ({n}) checked against the study dataset: each claim's source, quoted statement, "
            f"regime, quantity and relation, measured and expected values, pass or FAIL, and the numbers behind "
            f"them.\n\n{_study_line(plan)}")


def _figure(plan: StudyPlan, name: str) -> FigureSpec:
    return next(f for f in plan.study.spec.figures if f.name == name)


_NORMALIZED = {"initial": "over its initial value", "final": "over its final value",
               "change": "minus its initial value"}


def _drawn(f: FigureSpec) -> str:
    """What figure ``f`` draws against what, by its kind (the caption's first sentence)."""
    from ntkpipe.labels import axis_label, variable_label

    if f.kind == "sweep":
        return (f"{', '.join(variable_label(y) for y in f.plotted())} against {axis_label(f.x)}"
                + (f", one line per {axis_label(f.hue)}" if f.hue else "")
                + (f", one panel per {axis_label(f.col)}" if f.col else "")
                + " (mean ± sd band over the other axes, dots for single runs)"
                + (f"; the {f.fit.replace('_', ' ')} fitted to each line is drawn thin" if f.fit else ""))
    if f.kind == "time_series":
        return (f"{', '.join(variable_label(v) for v in f.variables)} against time"
                + (f", one line per {axis_label(f.hue)}" if f.hue else "")
                + (f", one column per {axis_label(f.col)}" if f.col else "")
                + "".join(f"; {variable_label(v)} {_NORMALIZED[how]}" for v, how in f.normalize.items())
                + " (mean ± sd band over the averaged axes; values at t = 0 at the left edge)")
    if f.kind == "scatter":
        return (f"{', '.join(variable_label(y) for y in f.y)} against {variable_label(f.x)}"
                + (f", one panel per {axis_label(f.col)}" if f.col else "") + ", with y = x")
    if f.kind == "images":
        return (f"the first {f.count} images of {variable_label(f.variable)}"
                + (f", one row per {axis_label(f.rows)}" if f.rows else "")
                + (" and their Fourier magnitudes" if f.fourier else ""))
    if f.kind == "matrix":
        return (f"{variable_label(f.variable)} as a heat map, averaged over seeds"
                + (f", one panel per {axis_label(f.col)}" if f.col else ""))
    if f.kind == "phases":
        return (f"the phase table of {f.measured}: one row per {axis_label(f.rows)}"
                + (f", one panel per {axis_label(f.col)}" if f.col else "")
                + "; the exponent in d fitted to its runs with ±2 standard errors, coloured by the measured phase, "
                  "beside the exponent the scaling predicts (dashed); the right axis gives the predicted and measured "
                  "phase (✓ agree, ✗ disagree)")
    raise KeyError(f.kind)


def figure_text(plan: StudyPlan, name: str) -> str:
    """A one-paragraph caption of figure ``name`` from its spec: what is drawn against what, one
    line per what, over how many runs and seeds, what is dashed."""
    f = _figure(plan, name)
    runs = len(plan.study.points)
    seeds = len({p.get("seed") for p in plan.study.points}) if "seed" in plan.study.axes else 1
    text = _drawn(f)
    text = text[0].upper() + text[1:]
    theory = getattr(f, "theory", None)
    dashed = " Dashed: theory." if theory else ""
    selected = f" Selected: {', '.join(f'{k} = {v}' for k, v in f.where.items())}." if f.where else ""
    return (f"{text}.{dashed}{selected} {runs} run{'s' if runs != 1 else ''}"
            + (f", {seeds} seeds per point" if seeds > 1 else "") + ".")


def figure_metadata(plan: StudyPlan, name: str, defects: Sequence[str] = ()) -> dict[str, str]:
    """The PNG text of figure ``name``: ``Title``, ``Description`` (the paper panel and caption),
    ``Source`` (the spec file and the hash of its content), ``Software`` (ntkpipe's version) and,
    when the checker found any, ``Warning`` (the defects, one a line)."""
    from ntkpipe import __version__

    f = _figure(plan, name)
    path = plan.study.path
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "unknown"
    title = figure_title(plan.study.spec, f.model_copy(update={"reproduces": None}))
    description = (f"Reproduces {f.reproduces}. " if f.reproduces else "") + figure_text(plan, name)
    meta = {"Title": " ".join(title.split()), "Description": description,
            "Source": f"{path.name} (sha256 {digest}), study {plan.tag}", "Software": f"ntkpipe {__version__}"}
    if defects:
        meta["Warning"] = "\n".join(defects)
    return meta


def study_index(plan: StudyPlan, figures: dict[str, Path], table: Path, claims: Path | None = None) -> str:
    """The study's ``index.md``: every figure with the paper panel it reproduces, its caption and the
    defects the checker found in it (read from its PNG), the table with its row count, and the claims
    table's verdicts (``claims``, the CSV of :mod:`ntkpipe.jobs.claims`)."""
    from PIL import Image
    from PIL.PngImagePlugin import PngImageFile

    spec = plan.study.spec
    verdicts = _claim_verdicts(claims)
    lines = [f"# {plan.tag}", "", f"{' '.join((spec.description or '').split())}", "",
             f"Spec: `{plan.study.path.name}`. {len(plan.study.points)} runs.", "", "## Figures", ""]
    for name, path in figures.items():
        f = _figure(plan, name)
        meta = cast(PngImageFile, Image.open(path)).text if Path(path).is_file() else {}  # figures are PNGs
        lines += [f"### {name}", "", f"![{name}](figures/{Path(path).name})", ""]
        if f.reproduces:
            lines += [f"Reproduces: {f.reproduces}.", ""]
        lines += [figure_text(plan, name), ""]
        lines += _figure_claims(plan, name, verdicts)
        if warning := meta.get("Warning"):
            lines += ["Defects found by the figure checker:", ""] + [f"- {d}" for d in warning.splitlines()] + [""]
    rows = len(Path(table).read_text().splitlines()) - 1 if Path(table).is_file() else table_rows(plan)
    lines += ["## Table", "", f"[`{Path(table).name}`]({Path(table).name}): {rows} row{'s' if rows != 1 else ''}, "
              "every scalar variable, final value of each series and every string variable, averaged over seeds "
              "per sweep point.", ""]
    lines += _phase_section(plan.phase_table_path)
    return "\n".join(lines + _claims_section(claims))


def _phase_section(path: Path | None) -> list[str]:
    """The phase table's link, row count and how many phases agree (none without one)."""
    if path is None:
        return []
    import pandas as pd

    if not Path(path).is_file():
        return [f"[`{Path(path).name}`]({Path(path).name}): the phase table (not made yet).", ""]
    frame = pd.read_csv(path)
    agree = int(frame["agree"].astype(str).str.lower().eq("true").sum())
    return [f"[`{Path(path).name}`]({Path(path).name}): the phase table (solvable-model Table 1), {len(frame)} rows "
            "(one per group of the measured_phase summary): predicted phase and exponent p, fitted exponent b ± s, "
            f"measured phase; the phases agree in {agree} of {len(frame)}.", ""]


def _claim_verdicts(claims: Path | None) -> dict[str, dict]:
    """Claim name → its row of the claims CSV (empty without one)."""
    import pandas as pd

    if claims is None or not Path(claims).is_file():
        return {}
    return {r["claim"]: r for r in pd.read_csv(claims, keep_default_na=False).to_dict("records")}


def _figure_claims(plan: StudyPlan, figure: str, verdicts: dict[str, dict]) -> list[str]:
    """``Claims shown:`` the claims naming ``figure`` (``claims[].figures``), each with its status and numbers
    from the claims CSV (``not checked yet`` without one)."""
    shown = [c for c in plan.study.spec.claims if figure in c.figures]
    if not shown:
        return []
    out = ["Claims shown:", ""]
    for c in shown:
        row = verdicts.get(c.name)
        status = "not checked yet" if row is None else status_mark(row["status"])
        detail = "" if row is None else f": {row['detail']}"
        quote = " ".join(c.statement.split())
        out.append(f"- {status} `{c.name}` ({c.source}; {c.regime}) — “{quote}”{detail}")
    return out + [""]


def _claims_section(claims: Path | None) -> list[str]:
    """``## Claims``: each claim's verdict with its numbers (a Markdown table), from the claims CSV."""
    import pandas as pd

    from ntkpipe.verdicts.render import markdown_table, tally

    if claims is None or not Path(claims).is_file():
        return []
    rows = pd.read_csv(claims, keep_default_na=False).to_dict("records")
    return ["## Claims", "", f"[`{Path(claims).name}`]({Path(claims).name}): {tally(rows)}.", "",
            markdown_table(rows), ""]
