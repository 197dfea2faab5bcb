"""``kind: phases`` figures: the phase table of a ``measured_phase`` summary (solvable-model Table 1).

One row per value of ``rows`` (e.g. scaling) that has runs, one panel per value of ``col`` (e.g. task),
stacked with heights in proportion to their rows. Each row draws the fitted exponent b of the summary's
y in d with ±2 standard errors (the width the measured phase is judged with) as a dot coloured by the
measured phase, and the exponent p the scaling powers predict as a short dashed mark (theory: dashes
mean theory). The left axis names the groups, the right one "predicted / measured" phase with ✓ where
they agree and ✗ (in red) where not; each panel's title says how many agree. A row without a fit
(every run diverged) says so beside its predicted mark.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ntkpipe.labels import axis_label, display_name
from ntkpipe.layout import axis_values, select, sub_grid
from ntkpipe.plots.checks import THEORY
from ntkpipe.plots.finish import LEGEND, explain_empty, finish_figure
from ntkpipe.plots.style import DPI
from ntkpipe.summaries.phases import _one

PHASE_COLORS = {"kernel": "tab:blue", "learning": "tab:orange", "frozen": "tab:gray", "unstable": "tab:red"}
"""The colour of each measured phase (categorical; any other phase is drawn in grey)."""
OTHER = "0.5"
ERRORS = 2  # the error bar spans ± this many standard errors (measured_phase's default ``stderrs``)
ROW_INCHES = 0.3


def phase_rows(ds: xr.Dataset, spec) -> list[dict]:
    """One dict per value of ``spec.rows`` in ``ds`` with runs: its value, the predicted and measured
    phase, the predicted exponent p and the fitted exponent b with its standard error s."""
    m = spec.measured
    if spec.rows in ds.coords and ds[spec.rows].ndim:
        groups = [(r, sub_grid(ds, {spec.rows: r})) for r in axis_values(ds, spec.rows)]
    else:  # selected by ``where`` (a scalar coordinate), or a study without a sweep: one row
        groups = [(ds[spec.rows].item() if spec.rows in ds.coords else "all runs", ds)]
    out = []
    for r, sub in groups:
        measured = str(_one(sub[m]))
        if measured in ("none", "", "nan"):
            continue
        out.append({"value": r, "measured": measured, "predicted": str(_one(sub[spec.predicted])),
                    "p": float(_one(sub[f"{m}_predicted_exponent"])), "b": float(_one(sub[f"{m}_exponent"])),
                    "s": float(_one(sub[f"{m}_exponent_stderr"]))})
    return out


def plot_phases(ds: xr.Dataset, spec, title: str):
    ds = select(ds, spec.where)
    cols = axis_values(ds, spec.col) if spec.col else [None]
    panels = [phase_rows(sub_grid(ds, {spec.col: c}) if spec.col else ds, spec) for c in cols]
    heights = [max(len(rows), 1) for rows in panels]
    fig = Figure(figsize=(7.6, ROW_INCHES * sum(heights) + 1.3 * len(cols) + 0.6), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(cols), 1, squeeze=False, sharex=True, gridspec_kw={"height_ratios": heights})[:, 0]
    measured_label = ds[f"{spec.measured}_exponent"].attrs.get("long_name", "measured exponent")
    seen: dict[str, str] = {}
    for ax, c, rows in zip(axes, cols, panels):
        _panel(ax, rows, seen)
        explain_empty(ax, sub_grid(ds, {spec.col: c}) if spec.col else ds)
        agree = sum(r["predicted"] == r["measured"] for r in rows)
        head = f"{axis_label(spec.col, ds)} = {display_name(c)}: " if spec.col else ""
        ax.set_title(f"{head}predicted and measured phase agree in {agree} of {len(rows)}", fontsize=10)
        ax.set_ylabel(axis_label(spec.rows, ds))
    axes[-1].set_xlabel(f"{measured_label} (dot: fit ± {ERRORS} s.e.; dashed: predicted)")
    handles = [Line2D([], [], marker="o", ls="none", color=color, label=phase) for phase, color in seen.items()
               if any(line.get_color() == color for ax in axes for line in ax.get_lines())]
    handles.append(Line2D([], [], ls="--", color="0.2", label="predicted exponent p", gid=THEORY))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), title="measured phase (colour)",
               title_fontsize=8, **LEGEND)
    return finish_figure(fig, title)


def _panel(ax, rows: list[dict], seen: dict[str, str]) -> None:
    """One panel: a row per group, fitted exponent ± errors, predicted mark, phases on the right axis."""
    n = len(rows)
    for i, r in enumerate(rows):
        color = PHASE_COLORS.get(r["measured"], OTHER)
        seen.setdefault(r["measured"], color)
        if np.isfinite(r["p"]):
            ax.vlines(r["p"], i - 0.38, i + 0.38, linestyles="--", color="0.2", lw=1.3, gid=THEORY, zorder=3)
        if np.isfinite(r["b"]):
            err = ERRORS * r["s"] if np.isfinite(r["s"]) else 0.0
            if err > 0:  # a bar without caps: caps of a zero-width bar would coincide with the dot
                ax.hlines(i, r["b"] - err, r["b"] + err, color=color, lw=1.6, zorder=4)
            ax.plot([r["b"]], [i], "o", color=color, ms=5, zorder=5)
        elif np.isfinite(r["p"]):
            ax.text(r["p"], i, "  no fit (runs diverged)", fontsize=7, va="center", ha="left", color="0.3")
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), [display_name(r["value"]) for r in rows], fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    ax.axvline(0.0, color="0.6", lw=0.8, zorder=1)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(range(n), [f"{r['predicted']} / {r['measured']} {'✓' if r['predicted'] == r['measured'] else '✗'}"
                                for r in rows], fontsize=8)
    for label, r in zip(right.get_yticklabels(), rows):
        if r["predicted"] != r["measured"]:
            label.set_color("tab:red")
    right.set_ylabel("predicted / measured phase", fontsize=9)


