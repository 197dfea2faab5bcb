"""The plotting job: one figure of a study dataset, checked for defects as it is saved (they go to the
log and into the PNG's metadata, which :func:`ntkpipe.report.figure_metadata` writes). The plotting
modules (matplotlib) are imported when a figure is drawn, not with :mod:`ntkpipe.jobs`."""

from __future__ import annotations

import os
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ntkpipe.jobs.worker_processes import worker_job
from ntkpipe.lang.titles import figure_title
from ntkpipe.layout import open_dataset
from ntkpipe.study.plan import StudyPlan

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

MATPLOTLIB_LOCK = threading.Lock()
"""Matplotlib is not thread-safe (its text layout and mathtext parser keep shared state): the figures
drawn in threads of one process are drawn one at a time. Two drawn at once failed the main job with a
spurious mathtext ``ParseException`` on a valid title."""


def draw_figure(plan: StudyPlan, name: str) -> Figure:
    """Figure ``name`` of ``plan`` drawn from its study dataset."""
    from ntkpipe.plots import PLOTTERS

    spec = next(f for f in plan.study.spec.figures if f.name == name)
    return PLOTTERS[spec.kind](study_dataset(plan.dataset_path), spec, figure_title(plan.study.spec, spec))


def study_dataset(path: str | Path) -> xr.Dataset:
    """The study dataset at ``path``, loaded once for the figures drawn from it in this process (the
    plot jobs of a Snakemake process are its threads): each figure gets a shallow copy of the
    loaded dataset, which is read again when the store was rewritten (a store is renamed into place,
    so it is a new directory)."""
    st = os.stat(path)
    return _loaded(str(path), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)).copy()


@lru_cache(maxsize=2)
def _loaded(path: str, _directory: tuple[int, ...]) -> xr.Dataset:
    """The dataset at ``path`` loaded into memory; ``_directory`` (its store directory's device, inode
    and times) keys the cache."""
    return open_dataset(path).load()


@worker_job
def plot_figure(plan: StudyPlan, name: str, out: str | Path) -> Path:
    """Draw figure ``name`` of ``plan`` into ``out`` (PNG); its defects (``plots.checks``) are
    reported on stderr, not raised: a figure with a clipped label is still worth having. In a worker
    process where the workflow runs its jobs as threads (:mod:`ntkpipe.jobs.worker_processes`)."""
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
