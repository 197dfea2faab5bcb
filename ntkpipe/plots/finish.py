"""The clean-up every figure kind ends with, so that :func:`ntkpipe.plots.checks.figure_defects`
finds nothing: coincident lines get distinct markers and a note in the legend (never dashes:
dashes mean theory), markup becomes mathtext, integer axes get integer ticks, the
title and long labels are wrapped to fit, legends move outside the axes when they would cover
data, log axes are labelled with plain numbers (:class:`LogNumbers`) and tick labels that would
overlap are left out (majors kept first). A panel with nothing to draw says why
(:func:`explain_empty`); a figure of facets gets one legend for all (:func:`figure_legend`)."""

from __future__ import annotations

import math
import textwrap
from typing import cast

import numpy as np
import xarray as xr
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, Formatter, LogFormatter, MaxNLocator, NullLocator

from ntkpipe.plots.checks import (
    EMPTY_PANEL,
    PIXEL,
    THEORY,
    coincide,
    data_lines,
    data_span,
    drawn_tick_labels,
    integer_data,
    lay_out,
    legend_covers,
    legends,
    line_label,
    line_style,
    overhang,
    texts_beside_ticks,
    texts_outside,
    theory_range,
)
from ntkpipe.plots.mathtext import as_math, math_error
from ntkpipe.plots.style import PLAIN, diverged_runs, number, power_of_ten

LEGEND = {"fontsize": 8, "frameon": False}
MARKERS = ["s", "^", "D", "v", "P", "X", "o", "<", ">", "p", "h", "*"]
MARKS = 12  # markers along a line told apart from a coincident one
LEGEND_CHARS = 48  # legend entries are wrapped to lines of at most this many characters
NOTE_CHARS = 40  # coincident lines with longer names together are counted in the note, not named
LAYOUT_SLACK = 3.0  # lines are compared before the layout sizes the axes: a wider tolerance than the check's
DECADES = 5  # a log axis spanning more decades (margins included) is labelled in powers of ten


def finish_figure(fig: Figure, title: str, legend_axes=(), *, fontsize: float = 11) -> Figure:
    """Title ``fig``, give ``legend_axes`` that have labelled artists (and no legend yet) their
    legends and apply every clean-up (module docstring).

    The constrained layout is computed again after wrapping texts, moving legends or growing the
    figure to texts it could not fit (or while a text is still outside), then frozen: leaving out
    tick labels only frees space, and later draws (checks, saving) skip it."""
    legend_axes = note_coincident_lines(fig, list(legend_axes))
    for ax in fig.axes:
        limits_from_data(ax)
        integer_ticks(ax)
        log_tick_labels(ax)
    legend_axes = [ax for ax in legend_axes if ax.get_legend() or ax.get_legend_handles_labels()[0]]
    for ax in legend_axes:
        if ax.get_legend() is None:  # a legend drawn before (e.g. of chosen handles) is kept
            ax.legend(loc="best", **LEGEND)
    suptitle = fig.suptitle(title, fontsize=fontsize)
    wrap_legend_texts(fig)
    mathtext_labels(fig)
    renderer = lay_out(fig)  # drafts of the layout: the job's draw (checks, PNG) makes the pixels
    for _ in range(4):  # one pass may not settle (fixed-aspect images, colour bars): redraw then
        changed = fit_texts(fig, suptitle, renderer)
        covering = [ax for ax in legend_axes if legend_covers(ax, renderer)]
        if covering:
            move_legends_outside(fig, covering, renderer)
        grown = not (changed or covering) and grow_to_texts(fig, renderer)
        if not (changed or covering or grown or texts_outside(fig, renderer)):
            break
        renderer = lay_out(fig)
    thin_tick_labels(fig, renderer)
    fig.set_layout_engine("none")
    return fig


def separate_coincident_lines(ax: Axes) -> list[str]:
    """Lines drawn through the same points with the same style would hide all but the last. Dashes
    mean theory, so data lines are never re-dashed: every line of such a group after the first
    gets a larger hollow marker of its own shape (at most :data:`MARKS` along it; the earlier
    line shows inside). Returns a note per group, "a, b coincide", for the legend."""
    ax.viewLim  # noqa: B018 -- autoscale now, so that coincidence is judged in the final data limits
    groups: list[list[Line2D]] = []
    data = [line for line in data_lines(ax) if line.get_gid() != THEORY]  # equal theories may coincide
    for line in sorted(data, key=lambda line: line.get_zorder()):  # drawing order
        joined = [g for g in groups if line_style(g[0]) == line_style(line)
                  and any(coincide(other, line, LAYOUT_SLACK * PIXEL) for other in g)]
        groups = [g for g in groups if g not in joined] + [[*(x for g in joined for x in g), line]]
    notes = []
    for group in (g for g in groups if len(g) > 1):
        markers = [m for m in MARKERS if m != line_style(group[0])[1]]
        for k, line in enumerate(group[1:]):
            had_marker = line_style(line)[1] is not None
            line.set_marker(markers[k % len(markers)])
            line.set_fillstyle("none")
            line.set_markersize(1.8 * line.get_markersize() if had_marker else 6.0)
            line.set_markevery(max(1, len(np.asarray(line.get_xydata())) // MARKS))
        names = [line_label(line) for line in group if not line_label(line).startswith("_")]
        if not names:  # single runs' dots: nothing in the legend to qualify
            continue
        short = names and len(group) == len(names) and sum(map(len, names)) <= NOTE_CHARS
        notes.append(f"{', '.join(names)} coincide" if short else
                     f"{len(group)} lines coincide (hollow markers on all but the first)")
    return notes


def legend_handles(legend: Legend) -> list[Artist]:
    """The handles of ``legend``, one per entry: every entry ntkpipe puts in a legend has one
    (matplotlib types them ``Artist | None``, None for an entry without a handler)."""
    return cast("list[Artist]", legend.legend_handles)


def note_coincident_lines(fig: Figure, legend_axes: list[Axes]) -> list[Axes]:
    """Separate the coincident lines of every panel (:func:`separate_coincident_lines`) and list
    their notes in the figure's legend, which is drawn again from the lines as they now look
    (a legend keeps copies of its handles): once per panel where lines coincide, named by the panel
    (:func:`panel_name`) when the figure has several, so that equal notes of two panels are told
    apart and the note of a panel without the legend is not read as the legend panel's. Returns the
    axes that get a legend."""
    drawn = [ax for ax in fig.axes if data_lines(ax)]
    notes = [f"{panel_name(ax)}: {note}" if len(drawn) > 1 else note
             for ax in drawn for note in separate_coincident_lines(ax)]
    notes = list(dict.fromkeys(notes))
    if not notes:
        return legend_axes
    holders = [ax for ax in fig.axes if ax.get_legend() is not None] or legend_axes or fig.axes[:1]
    holder = holders[0]
    lines = {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}
    legend = holder.get_legend()
    if legend is not None:
        labels = [text.get_text() for text in legend.get_texts()]
        handles = [lines.get(label, handle) for label, handle in zip(labels, legend_handles(legend))]
    else:
        handles, labels = holder.get_legend_handles_labels()
    for note in notes:
        handles.append(Line2D([], [], ls="none", label=note))
        labels.append(note)
    title = legend.get_title().get_text() if legend is not None else ""
    holder.legend(handles, labels, loc="best", title=title or None, title_fontsize=8, **LEGEND)
    return [holder, *(ax for ax in legend_axes if ax is not holder)]


def panel_name(ax: Axes) -> str:
    """What names a panel of a grid to a reader: its column's heading (its own title, else the title
    of the top panel of its column: ``L = 2``) and, in a grid of several rows, its y label."""
    spec = ax.get_subplotspec()
    heading = ax.get_title()
    if not heading and spec is not None:
        top = [other for other in ax.figure.axes if (s := other.get_subplotspec()) is not None
               and s.get_gridspec() is spec.get_gridspec() and s.colspan == spec.colspan and s.rowspan.start == 0]
        heading = top[0].get_title() if top else ""
    several_rows = spec is not None and spec.get_gridspec().nrows > 1
    parts = [" ".join(heading.split())] if heading else []
    parts += [" ".join(ax.get_ylabel().split())] if several_rows or not parts else []
    return ", ".join(p for p in parts if p) or "a panel"


def wrap_legend_texts(fig: Figure) -> None:
    """Legend entries longer than :data:`LEGEND_CHARS` wrapped at spaces (each line on its own), so
    that no entry is wider than a panel (a legend inside the axes is part of their layout)."""
    for legend in legends(fig):
        for text in legend.get_texts():
            lines = text.get_text().split("\n")
            if max(map(len, lines)) > LEGEND_CHARS:
                text.set_text("\n".join(textwrap.fill(line, LEGEND_CHARS, break_long_words=False) for line in lines))


def mathtext_labels(fig: Figure) -> None:
    """Every text of ``fig`` (titles, axis labels, legend entries, notes) with its markup as
    mathtext (:func:`ntkpipe.plots.mathtext.as_math`); mathtext matplotlib cannot render (a spec's
    title) is shown as written, ``$`` escaped, for the checker to report rather than the job to fail."""
    for text in texts_beside_ticks(fig):  # tick labels are the formatter's, set when drawn
        label = text.get_text()
        math = as_math(label) if label else label
        if math and math_error(math):
            math = math.replace("$", r"\$")
        if math != label:
            text.set_text(math)


def limits_from_data(ax: Axes) -> None:
    """The y range from the data, not from theory: when theory lines reach beyond the data by more
    than :data:`ntkpipe.plots.checks.THEORY_SLACK` of their span, the axis is set to the data
    (with matplotlib's margins) and the theory is clipped to it."""
    span = data_span(ax)
    if span is None or not theory_range(ax):
        return
    scale = ax.yaxis.get_transform()
    lo, hi = scale.transform(np.asarray(span, np.float64))
    pad = 0.05 * max(hi - lo, 0.3 if ax.get_yscale() == "log" else abs(hi) * 0.1 or 1.0)
    ax.set_ylim(*scale.inverted().transform(np.asarray([lo - pad, hi + pad])))


def integer_ticks(ax: Axes) -> None:
    """Integer-valued data (depth, index j, epochs) get integer ticks, unless the ticks were set."""
    for axis in (ax.xaxis, ax.yaxis):
        if integer_data(ax, axis) and not isinstance(axis.get_major_locator(), FixedLocator):
            axis.set_major_locator(MaxNLocator(integer=True))


class LogNumbers(LogFormatter):
    """Log-axis tick labels as :func:`ntkpipe.plots.style.number` writes them (1, 10, 2048, 0.25),
    or as powers of ten (10⁻⁴) when the view spans more than :data:`DECADES` decades or leaves
    :data:`ntkpipe.plots.style.PLAIN`. Which ticks are labelled is matplotlib's choice."""

    def _num_to_string(self, x, vmin, vmax):
        lo, hi = sorted((abs(vmin), abs(vmax)))
        plain = lo > 0 and math.log10(hi / lo) <= DECADES and PLAIN[0] <= lo and hi < PLAIN[1]
        return number(x) if plain else power_of_ten(x)


def log_tick_labels(ax: Axes) -> None:
    """Every log axis of ``ax`` labelled by :class:`LogNumbers` (ticks set with labels keep them)."""
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log" and not isinstance(axis.get_major_locator(), FixedLocator):
            axis.set_major_formatter(LogNumbers())
            axis.set_minor_formatter(LogNumbers())


def explain_empty(ax: Axes, ds: xr.Dataset | None = None) -> bool:
    """If ``ax`` draws no finite value (no line point, finite and positive along its log axes, and
    no finite pixel), say so in the panel -- "no finite values to draw", on a log axis "no finite
    positive values to draw on a log axis" -- with the runs of ``ds`` that diverged
    (:func:`ntkpipe.plots.style.diverged_runs`), and leave out its ticks (a log axis cannot place
    them without positive data). :func:`fit_texts` wraps the text to the panel's width. Returns
    whether the panel was empty."""
    # an image drawn has its array (matplotlib types it ndarray | None)
    if _drawn_points(ax) or any(np.isfinite(np.ma.filled(cast(np.ndarray, im.get_array()), np.nan)).any()
                                for im in ax.get_images()):
        return False
    log = "log" in (ax.get_xscale(), ax.get_yscale())
    text = "no finite positive values to draw on a log axis" if log else "no finite values to draw"
    why = diverged_runs(ds) if ds is not None else None
    ax.text(0.5, 0.5, f"{text} ({why})" if why else text, transform=ax.transAxes, fontsize=8, ha="center",
            va="center", color="0.3", gid=EMPTY_PANEL, in_layout=False)
    for axis, limits in ((ax.xaxis, ax.set_xlim), (ax.yaxis, ax.set_ylim)):
        if axis.get_scale() == "log":
            limits(1.0, 10.0)
        axis.set_major_locator(FixedLocator([]))
        axis.set_minor_locator(NullLocator())
    return True


def _drawn_points(ax: Axes) -> bool:
    """Whether a data line of ``ax`` has a point it can draw (finite; positive along a log axis)."""
    for line in data_lines(ax):
        xy = np.asarray(line.get_xydata(), np.float64)
        keep = np.isfinite(xy).all(axis=1)
        for column, scale in enumerate((ax.get_xscale(), ax.get_yscale())):
            if scale == "log":
                keep &= xy[:, column] > 0
        if keep.any():
            return True
    return False


def figure_legend(axes, order=(), title: str | None = None) -> list[Axes]:
    """One legend for a figure of panels ``axes`` (row by row), in its top-right panel: every
    labelled artist of any panel, a label once -- those in ``order`` first (e.g. hue values in
    their order), then lines in the order first drawn, then entries that draw nothing (notes,
    proxies) -- so that each facet's lines and notes are listed, under ``title`` (the quantity the
    entries tell apart, e.g. the hue axis). Returns the panel holding it, for
    :func:`finish_figure` (which moves it outside when it covers data); none when nothing is labelled."""
    entries: dict[str, object] = {}
    for ax in axes.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if not entries:
        return []
    rank = {label: i for i, label in enumerate(order)}

    def key(item):
        label, handle = item
        note = isinstance(handle, Line2D) and not len(np.asarray(handle.get_xydata()))
        return note, rank.get(label, len(rank))

    entries = dict(sorted(entries.items(), key=key))  # stable: first drawn first among equals
    holder = axes[0, -1]
    holder.legend(list(entries.values()), list(entries), loc="best", title=title, title_fontsize=8, **LEGEND)
    return [holder]


def fit_texts(fig: Figure, suptitle: Text, renderer) -> bool:
    """Wrap the figure title and x labels to the figure's width, axes titles to their axes' width,
    y labels to the figure's height and the texts of empty panels (:func:`explain_empty`) to their
    axes' width. Returns whether any text was wrapped."""
    pad = 8.0
    changed = wrap_to(suptitle, fig.bbox.width - 2 * pad, renderer)
    for ax in fig.axes:
        changed |= wrap_to(ax.title, max(ax.bbox.width, 0.9 * fig.bbox.width / len(fig.axes)), renderer)
        changed |= wrap_to(ax.xaxis.label, fig.bbox.width - 2 * pad, renderer)
        changed |= wrap_to(ax.yaxis.label, fig.bbox.height - 2 * pad, renderer)
        for text in ax.texts:
            if text.get_gid() == EMPTY_PANEL:
                changed |= wrap_to(text, ax.bbox.width - pad, renderer)
    return changed


def wrap_to(text: Text, pixels: float, renderer) -> bool:
    """Re-wrap ``text`` (at spaces, keeping its line breaks) until it is at most ``pixels`` long
    along its direction. Returns whether it was re-wrapped."""
    paragraphs = [" ".join(line.split()) for line in text.get_text().split("\n")]
    changed = False
    for _ in range(8):
        if not any(paragraphs):
            break
        box = text.get_window_extent(renderer)
        length = box.height if text.get_rotation() % 180 == 90 else box.width
        if length <= pixels:
            break
        longest = max(len(line) for line in text.get_text().split("\n"))
        chars = max(int(longest * pixels / length) - 1, 8)
        text.set_text("\n".join(textwrap.fill(p, chars, break_long_words=False) for p in paragraphs))
        changed = True
    return changed


def grow_to_texts(fig: Figure, renderer) -> bool:
    """Texts the layout could not fit (a fixed-aspect matrix whose long tick labels take the width its
    axis label needed) make the figure larger by how far they reach out, and a margin. Returns
    whether it grew."""
    over = overhang(fig, renderer)
    wider, taller = over["left"] + over["right"], over["bottom"] + over["top"]
    if wider > PIXEL:
        fig.set_figwidth(fig.get_figwidth() + (wider + 4 * PIXEL) / fig.dpi)
    if taller > PIXEL:
        fig.set_figheight(fig.get_figheight() + (taller + 4 * PIXEL) / fig.dpi)
    return max(wider, taller) > PIXEL


def move_legends_outside(fig: Figure, axes: list[Axes], renderer) -> None:
    """Legends that cover data go to the right of their axes; the figure widens by their width."""
    extra = 0.0
    for ax in axes:
        legend = ax.get_legend()
        assert legend is not None, "only axes whose legend covers data move it"
        width = legend.get_window_extent(renderer).width
        ncols = 1 if legend.get_window_extent(renderer).height < 0.95 * fig.bbox.height else 2
        handles, labels = legend_handles(legend), [text.get_text() for text in legend.get_texts()]
        title = legend.get_title().get_text() or None
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, ncols=ncols,
                  title=title, title_fontsize=8, **LEGEND)
        extra += ncols * width + 12.0
    fig.set_figwidth(fig.get_figwidth() + extra / fig.dpi)


class HiddenLabels(Formatter):
    """``base`` with the labels at the ``hidden`` tick values left empty."""

    def __init__(self, base: Formatter, hidden):
        self.base, self.hidden = base, np.asarray(sorted(hidden), np.float64)

    def set_axis(self, axis):
        super().set_axis(axis)
        self.base.set_axis(axis)

    def set_locs(self, locs):
        self.base.set_locs(locs)

    def get_offset(self):
        return self.base.get_offset()

    def __call__(self, x, pos=None):
        if np.isclose(x, self.hidden, rtol=1e-9, atol=0.0).any():
            return ""
        return self.base(x, pos)


def thin_tick_labels(fig: Figure, renderer) -> bool:
    """Leave out tick labels that overlap one already kept (major labels first, in order along the
    axis). Returns whether any label was left out."""
    changed = False
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            changed |= _thin_axis(axis, renderer)
    return changed


def _thin_axis(axis: Axis, renderer) -> bool:
    major = {id(t.label1) for t in axis.get_major_ticks()} | {id(t.label2) for t in axis.get_major_ticks()}
    labels = sorted(drawn_tick_labels(axis), key=lambda item: (id(item[1]) not in major, item[0]))
    kept, hidden = [], {True: set(), False: set()}
    for value, text in labels:
        box = text.get_window_extent(renderer).padded(1.0)
        if any(box.overlaps(other) for other in kept):
            hidden[id(text) in major].add(value)
        else:
            kept.append(box)
    for is_major, values in hidden.items():
        if values:
            current = axis.get_major_formatter() if is_major else axis.get_minor_formatter()
            if isinstance(current, HiddenLabels):
                values |= set(current.hidden.tolist())
                current = current.base
            (axis.set_major_formatter if is_major else axis.set_minor_formatter)(HiddenLabels(current, values))
    return bool(hidden[True] or hidden[False])
