"""The plotting job: one figure of a study dataset, checked for defects as it is saved (they go to the
log and into the PNG's metadata, which :func:`ntkpipe.report.figure_metadata` writes). The plotting
modules (matplotlib) are imported when a figure is drawn, not with :mod:`ntkpipe.jobs`."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ntkpipe.lang.titles import figure_title
from ntkpipe.layout import open_dataset
from ntkpipe.study.plan import StudyPlan

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MATPLOTLIB_LOCK = threading.Lock()
"""Matplotlib is not thread-safe (its text layout and mathtext parser keep shared state): the plot jobs
of one Snakemake process (``profiles/default`` runs jobs as threads) draw their figures one at a time.
Two drawn at once failed the main job with a spurious mathtext ``ParseException`` on a valid title."""


def draw_figure(plan: StudyPlan, name: str) -> Figure:
    """Figure ``name`` of ``plan`` drawn from its study dataset."""
    from ntkpipe.plots import PLOTTERS

    spec = next(f for f in plan.study.spec.figures if f.name == name)
    ds = open_dataset(plan.dataset_path).load()
    return PLOTTERS[spec.kind](ds, spec, figure_title(plan.study.spec, spec))


def plot_figure(plan: StudyPlan, name: str, out: str | Path) -> Path:
    """Draw figure ``name`` of ``plan`` into ``out`` (PNG); its defects (``plots.checks``) are
    reported on stderr, not raised: a figure with a clipped label is still worth having."""
    from ntkpipe.plots.checks import draw, figure_defects
    from ntkpipe.plots.style import save
    from ntkpipe.report import figure_metadata

    with MATPLOTLIB_LOCK:
        fig = draw_figure(plan, name)
        draw(fig)  # as it will be saved: the checker reads the drawn figure, the PNG carries its defects
        defects = figure_defects(fig, drawn=True)
        for defect in defects:
            print(f"ntkpipe: figure {out}: {defect}", file=sys.stderr)
        return save(fig, out, figure_metadata(plan, name, defects), drawn=True)
