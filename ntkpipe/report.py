"""Captions of the Snakemake report's items (``snakemake --report``), in reStructuredText, from the
study spec: a figure's title, the paper figure it reproduces and the study description; a study
table's description of what it averages."""

from __future__ import annotations

import re

from ntkpipe.lang.titles import figure_title
from ntkpipe.study.plan import StudyPlan

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
