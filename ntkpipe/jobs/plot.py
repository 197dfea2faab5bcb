"""The plotting job: one figure of a study dataset."""

from __future__ import annotations

from pathlib import Path

from ntkpipe.layout import open_dataset
from ntkpipe.plots import PLOTTERS
from ntkpipe.plots.style import save
from ntkpipe.study.plan import StudyPlan


def plot_figure(plan: StudyPlan, name: str, out: str | Path) -> Path:
    """Draw figure ``name`` of ``plan`` from its study dataset into ``out`` (PNG)."""
    spec = next(f for f in plan.study.spec.figures if f.name == name)
    ds = open_dataset(plan.dataset_path).load()
    title = spec.title or f"{plan.tag}: {name.replace('_', ' ')}"
    return save(PLOTTERS[spec.kind](ds, spec, title), out)
