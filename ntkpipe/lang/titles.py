"""The title a figure is drawn with: its spec's ``title`` (else the study's description), and the
paper figure it reproduces (``reproduces``) in parentheses on a line of its own."""

from __future__ import annotations

from ntkpipe.lang.schema import StudySpec


def figure_title(study: StudySpec, figure) -> str:
    """``title``, else the study description (else, for a spec with neither, the figure's name in
    words), then "(<reproduces>)", e.g. "(Silent alignment Fig. 3 / E.1)", on a second line."""
    title = figure.title or study.description or figure.name.replace("_", " ")
    return f"{title}\n({figure.reproduces})" if figure.reproduces else title
