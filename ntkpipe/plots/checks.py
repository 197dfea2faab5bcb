"""Automatic checks of a drawn figure: what a reader would see as a defect.

:func:`figure_defects` draws the figure (Agg) and returns one message per defect:

* a text (title, axis or tick label, legend entry, annotation) that extends beyond the figure;
* two drawn tick labels of one axis that overlap;
* two texts that overlap each other (titles, axis labels, annotations, notes; a legend as a whole:
  a legend drawn over the title, a note under a legend);
* an axis whose plotted data are all integers (depth, index j, epochs) with ticks between them;
* a line hidden under another: both drawn with the same line style and marker through the same
  points (within a pixel), so only the later one shows;
* a legend drawn over plotted data (lines, markers);
* a labelled line that no legend of a figure with legends lists (e.g. a facet's lines when only
  another facet has a legend);
* a dashed data line, or a theory line (gid :data:`THEORY`) drawn solid: dashes mean theory;
* a text with markup a reader sees raw (``φ_j``, ``K_V^{c,c}``, an id such as ``model_case``)
  or mathtext matplotlib cannot render;
* more than one legend;
* a fitted exponent or slope in a legend with no fitted curve (gid :data:`FIT`) drawn;
* a colour bar telling apart lines of at most :data:`LEGEND_COLOURS` colours (a few categories or
  values read off a legend; a colour bar is for many ordered values).

Only what is drawn counts: invisible artists, empty texts and ticks outside the view are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis, XAxis, YAxis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from ntkpipe.plots.mathtext import as_math, math_error, raw_markup

PIXEL = 1.0  # tolerance of every comparison in display space
EMPTY_PANEL = "ntkpipe-empty-panel"
"""The gid of the text that says why a panel draws nothing (:func:`ntkpipe.plots.finish.explain_empty`)."""
THEORY = "ntkpipe-theory"
"""The gid of a theory line (and of its legend sample): the only lines drawn dashed."""
FIT = "ntkpipe-fit"
"""The gid of a fitted curve (drawn thin, solid, unlabelled: the legend of its data gives the fit)."""


def figure_defects(fig: Figure, *, drawn: bool = False) -> list[str]:
    """The defects of ``fig``, one message each (empty for a clean figure). ``fig`` is drawn first
    unless ``drawn`` says it was just drawn on its Agg canvas unchanged (e.g. saved as PNG)."""
    renderer = fig.canvas.get_renderer() if drawn and isinstance(fig.canvas, FigureCanvasAgg) else draw(fig)
    defects = texts_outside(fig, renderer) + overlapping_texts(fig, renderer)
    for name, ax in _named_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            defects += [f"{name}: {m}" for m in _overlapping_tick_labels(axis, renderer)]
            defects += [f"{name}: {m}" for m in _fractional_ticks(ax, axis)]
        defects += [f"{name}: {m}" for m in _hidden_lines(ax)]
        defects += [f"{name}: {m}" for m in _legend_over_data(ax, renderer)]
        defects += [f"{name}: {m}" for m in _dashes_not_theory(ax)]
        defects += [f"{name}: y range set by theory: {m}" for m in [theory_range(ax)] if m]
    return (defects + _unlisted_lines(fig) + _markup(fig) + _legend_count(fig) + _fit_without_line(fig)
            + _colour_bar_for_few(fig))


def draw(fig: Figure):
    """Draw ``fig`` on an Agg canvas (layout included, :func:`ticks_once`); return the renderer."""
    canvas = agg_canvas(fig)
    with ticks_once(fig):
        canvas.draw()
    return canvas.get_renderer()


def agg_canvas(fig: Figure) -> FigureCanvasAgg:
    """The Agg canvas of ``fig`` (given one if it has another)."""
    return fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)


def lay_out(fig: Figure):
    """:func:`draw` without the pixels: the figure's draw runs on its Agg renderer with the renderer's
    drawing calls disabled (as ``Figure.draw_without_rendering`` does), so the layout, ticks, text
    extents and legend placement are what a draw leaves; returns the renderer. For the drafts of a
    figure's layout: only its last draw needs pixels."""
    renderer = agg_canvas(fig).get_renderer()
    with ticks_once(fig), renderer._draw_disabled():  # pyright: ignore[reportAttributeAccessIssue]  # private: what draw_without_rendering uses
        fig.draw(renderer)
    return renderer


@contextmanager
def ticks_once(fig: Figure) -> Iterator[None]:
    """While in it, every axis of ``fig`` sets its ticks (locators, formatters, labels) and measures its
    tick labels once per state -- view interval, axes box (which sets the locators' tick space), scale,
    locators and formatters -- where matplotlib's draw asks again: a constrained-layout draw sets an
    axis' ticks six times, each label measured as often. The same ticks and boxes, computed less."""
    axes = [axis for ax in fig.axes for axis in ax._axis_map.values()  # pyright: ignore[reportAttributeAccessIssue]  # private: the axes' axis objects
            if "_update_ticks" not in vars(axis)]  # not memoized already (an enclosing ticks_once)
    for axis in axes:
        _memoize_ticks(axis)
    try:
        yield
    finally:
        for axis in axes:
            del axis._update_ticks, axis._get_ticklabel_bboxes  # pyright: ignore[reportAttributeAccessIssue]  # the memos, not the methods


def _memoize_ticks(axis: Axis) -> None:
    """Shadow ``axis``'s ``_update_ticks`` and ``_get_ticklabel_bboxes`` by memos keyed by its tick state."""
    update, measure = axis._update_ticks, axis._get_ticklabel_bboxes  # pyright: ignore[reportAttributeAccessIssue]  # private: what the draw calls
    ticks: dict[tuple, list] = {}
    boxes: dict[tuple, tuple[list, list]] = {}

    def state() -> tuple:
        return (tuple(axis.get_view_interval()), axis.axes.bbox.bounds, axis._scale, axis.major.locator,  # pyright: ignore[reportAttributeAccessIssue]  # private: the scale object
                axis.minor.locator, axis.major.formatter, axis.minor.formatter)

    def update_once() -> list:
        key = state()
        if key not in ticks:
            ticks[key] = update()
        return ticks[key]

    def measure_once(drawn: list, renderer) -> tuple[list, list]:
        key = (state(), id(renderer), *map(id, drawn))
        if key not in boxes:
            boxes[key] = measure(drawn, renderer)
        return list(boxes[key][0]), list(boxes[key][1])

    axis._update_ticks, axis._get_ticklabel_bboxes = update_once, measure_once  # pyright: ignore[reportAttributeAccessIssue]


def texts_beside_ticks(artist: Artist) -> list[Text]:
    """``artist.findobj(Text)`` (in its order) less the ticks' labels: an axis gives its label and offset
    text, and its ticks are not walked (listing them makes every tick of the locator, the larger part
    of the time of a walk before the figure is drawn)."""
    if isinstance(artist, Axis):
        children: list[Artist] = [artist.label, artist.offsetText]
    else:
        children = artist.get_children()
    out = [text for child in children for text in texts_beside_ticks(child)]
    return out + [artist] if isinstance(artist, Text) else out


def drawn_ticks(axis: Axis) -> list:
    """The major and minor ticks of ``axis`` inside its view interval (those matplotlib draws)."""
    scale = axis.get_transform()
    lo, hi = sorted(scale.transform(np.asarray(axis.get_view_interval(), np.float64)))
    span = max(hi - lo, 1e-300)
    ticks = axis.get_major_ticks() + axis.get_minor_ticks()
    if not ticks:
        return []
    with np.errstate(divide="ignore", invalid="ignore"):
        locs = np.asarray(scale.transform(np.asarray([tick.get_loc() for tick in ticks], np.float64)), np.float64)
    inside = np.isfinite(locs) & (locs >= lo - 1e-9 * span) & (locs <= hi + 1e-9 * span)
    return [tick for tick, keep in zip(ticks, inside) if keep]


def drawn_tick_labels(axis: Axis) -> list[tuple[float, Text]]:
    """(tick value, label) of every visible, non-empty tick label that is drawn."""
    if not (axis.get_visible() and axis.axes.get_visible() and axis.axes.axison):
        return []
    return [(tick.get_loc(), label) for tick in drawn_ticks(axis) if tick.get_visible()
            for label in (tick.label1, tick.label2) if shown(label)]


def shown(text: Text) -> bool:
    """Whether ``text`` is visible and not blank."""
    return bool(text.get_visible() and text.get_text().strip())


def _named_axes(fig: Figure) -> list[tuple[str, Axes]]:
    """Every axes with a name for messages: its title, else its position."""
    return [(f"axes {i} ({ax.get_title()!r})" if ax.get_title() else f"axes {i}", ax) for i, ax in enumerate(fig.axes)]


def _texts(fig: Figure) -> list[Text]:
    """Every drawn text: figure texts, titles, axis labels, drawn tick labels, legends, annotations."""
    texts = [t for t in texts_beside_ticks(fig) if shown(t) and _parents_visible(t)]
    texts += [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for _, t in drawn_tick_labels(axis)]
    return texts


def _parents_visible(text: Text) -> bool:
    """Whether the axes and legend that hold ``text`` (if any) are drawn."""
    ax = text.axes
    if ax is None:
        return True
    legend = ax.get_legend()
    return ax.get_visible() and not (legend is not None and not legend.get_visible() and text in legend.get_texts())


def texts_outside(fig: Figure, renderer) -> list[str]:
    """A message for each drawn text that extends beyond the figure by more than a pixel."""
    out = []
    for text, over in _overhangs(fig, renderer):
        sides = [f"{side} by {px:.0f} px" for side, px in over.items() if px > PIXEL]
        if sides:
            out.append(f"text {_short(text)} extends beyond the figure ({', '.join(sides)})")
    return out


def overhang(fig: Figure, renderer) -> dict[str, float]:
    """How far the drawn texts reach beyond the figure on each side, in pixels (0 where none does)."""
    sides = {"left": 0.0, "right": 0.0, "bottom": 0.0, "top": 0.0}
    for _, over in _overhangs(fig, renderer):
        sides = {side: max(px, over[side]) for side, px in sides.items()}
    return sides


def _overhangs(fig: Figure, renderer) -> list[tuple[Text, dict[str, float]]]:
    """Each drawn text with how far it reaches beyond each side of the figure (negative: inside)."""
    box = fig.bbox
    out = []
    for text in _texts(fig):
        b = text.get_window_extent(renderer)
        out.append((text, {"left": box.x0 - b.x0, "right": b.x1 - box.x1, "bottom": box.y0 - b.y0, "top": b.y1 - box.y1}))
    return out


def overlapping_texts(fig: Figure, renderer) -> list[str]:
    """A message for each pair of drawn texts that overlap by more than a pixel each way: titles, axis
    labels, annotations and figure texts, and each legend as one box (its own entries are inside it).
    Tick labels are left to :func:`_overlapping_tick_labels` (one axis) and texts of a legend to it."""
    shown_legends = legends(fig)
    inside = {id(t) for legend in shown_legends for t in [*legend.get_texts(), legend.get_title()]}
    tick_texts = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for tick in
                  axis.get_major_ticks() + axis.get_minor_ticks() for t in (tick.label1, tick.label2)}
    items = [(f"text {_short(t)}", t.get_window_extent(renderer)) for t in _texts(fig)
             if id(t) not in inside and id(t) not in tick_texts]
    items += [(f"the legend ({_short(legend.get_texts()[0]) if legend.get_texts() else 'empty'}, …)",
               legend.get_window_extent(renderer)) for legend in shown_legends]
    return [f"{a} and {b} overlap" for i, (a, box_a) in enumerate(items) for b, box_b in items[i + 1:]
            if _overlap(box_a, box_b)]


def _short(text: Text) -> str:
    s = " ".join(text.get_text().split())
    return repr(s if len(s) <= 60 else s[:57] + "...")


def _overlap(a: Bbox, b: Bbox) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > PIXEL and min(a.y1, b.y1) - max(a.y0, b.y0) > PIXEL


def _overlapping_tick_labels(axis: XAxis | YAxis, renderer) -> list[str]:
    labels = [(text, text.get_window_extent(renderer)) for _, text in drawn_tick_labels(axis)]
    return [f"{axis.axis_name} tick labels {_short(a)} and {_short(b)} overlap"
            for i, (a, box_a) in enumerate(labels) for b, box_b in labels[i + 1:] if _overlap(box_a, box_b)]


def data_lines(ax: Axes) -> list[Line2D]:
    """The visible lines of ``ax`` drawn in data coordinates with at least one finite point."""
    lines = []
    for line in ax.get_lines():
        if not line.get_visible() or not line.get_transform().contains_branch(ax.transData):
            continue
        xy = np.asarray(line.get_xydata(), np.float64)
        if np.isfinite(xy).all(axis=1).any():
            lines.append(line)
    return lines


def integer_data(ax: Axes, axis: Axis) -> bool:
    """Whether ``axis`` is linear and every finite value plotted along it is an integer (≥ 2 distinct)."""
    if axis.get_scale() != "linear":
        return False
    column = 0 if axis is ax.xaxis else 1
    values = [np.asarray(line.get_xydata(), np.float64)[:, column] for line in data_lines(ax) if line.get_gid() != FIT]
    values = np.concatenate(values) if values else np.empty(0)
    values = values[np.isfinite(values)]
    return np.unique(values).size >= 2 and bool(np.all(values == np.round(values)))


def _fractional_ticks(ax: Axes, axis: XAxis | YAxis) -> list[str]:
    if not integer_data(ax, axis):
        return []
    fractional = [loc for loc, _ in drawn_tick_labels(axis) if abs(loc - round(loc)) > 1e-9 * max(1.0, abs(loc))]
    if not fractional:
        return []
    return [f"{axis.axis_name} axis plots integers ({axis.get_label_text() or 'unlabelled'}) but has ticks at "
            + ", ".join(f"{v:g}" for v in fractional)]


def line_style(line: Line2D) -> tuple:
    """What tells two lines apart besides colour: dash pattern (with offset) and marker."""
    dashes = line._unscaled_dash_pattern if line.get_linestyle() not in ("None", " ", "") else None  # pyright: ignore[reportAttributeAccessIssue]  # private: the pattern as drawn
    return dashes, line.get_marker() if line.get_marker() not in (None, "None", " ", "") else None


def coincide(a: Line2D, b: Line2D, pixels: float = PIXEL) -> bool:
    """Whether two lines pass through the same points, within ``pixels`` on screen."""
    xa, xb = np.asarray(a.get_xydata()), np.asarray(b.get_xydata())
    if xa.shape != xb.shape:
        return False
    da, db = a.get_transform().transform(xa), b.get_transform().transform(xb)
    finite = np.isfinite(da).all(1) & np.isfinite(db).all(1)
    same_gaps = np.array_equal(np.isfinite(da).all(1), np.isfinite(db).all(1))
    return same_gaps and bool(finite.any()) and bool(np.all(np.abs(da[finite] - db[finite]) <= pixels))


def _hidden_lines(ax: Axes) -> list[str]:
    lines = sorted((line for line in data_lines(ax) if line.get_gid() != THEORY),  # equal theories may coincide
                   key=lambda line: line.get_zorder())  # draw order (stable)
    out = []
    for i, under in enumerate(lines):
        for over in lines[i + 1:]:
            if line_style(under) == line_style(over) and coincide(under, over):
                out.append(f"line {_line_name(under)} is hidden under {_line_name(over)} "
                           "(same points, same style and marker)")
                break
    return out


def line_label(line: Line2D) -> str:
    """The label of ``line``: matplotlib stores labels as str (its stub says object); ntkpipe sets them all."""
    return cast(str, line.get_label())


def _line_name(line: Line2D) -> str:
    label = line.get_label()
    shown = isinstance(label, str) and label and not label.startswith("_")
    return repr(label) if shown else f"({len(np.asarray(line.get_xydata()))} points)"


def legend_covers(ax: Axes, renderer) -> list[Line2D]:
    """The data lines of ``ax`` that pass through its legend's box (marker-only lines: a point inside)."""
    legend = ax.get_legend()
    if legend is None or not legend.get_visible() or not legend.get_texts():
        return []
    box = legend.get_window_extent(renderer)
    inner = Bbox.from_extents(box.x0 + PIXEL, box.y0 + PIXEL, box.x1 - PIXEL, box.y1 - PIXEL)
    covered = []
    for line in data_lines(ax):
        xy = line.get_transform().transform(line.get_xydata())
        xy = xy[np.isfinite(xy).all(1)]
        if line_style(line)[0] is not None and len(xy) > 1:
            hit = Path(xy).intersects_bbox(inner, filled=False)
        else:
            hit = bool(((xy[:, 0] > inner.x0) & (xy[:, 0] < inner.x1)
                        & (xy[:, 1] > inner.y0) & (xy[:, 1] < inner.y1)).any())
        if hit:
            covered.append(line)
    return covered


def _legend_over_data(ax: Axes, renderer) -> list[str]:
    covered = legend_covers(ax, renderer)
    return [f"legend covers data ({', '.join(_line_name(line) for line in covered[:3])})"] if covered else []


def legends(fig: Figure) -> list:
    """The visible legends of ``fig``: its own and its axes'."""
    found = list(fig.legends) + [legend for ax in fig.axes if (legend := ax.get_legend()) is not None]
    return [legend for legend in found if legend.get_visible()]


def _unlisted_lines(fig: Figure) -> list[str]:
    shown = legends(fig)
    if not shown:
        return []
    listed = {" ".join(text.get_text().split()) for legend in shown for text in legend.get_texts()}
    return [f"{name}: line {_line_name(line)} is not in any legend" for name, ax in _named_axes(fig)
            for line in data_lines(ax) if not str(line.get_label()).startswith("_")
            and not {" ".join(line_label(line).split()), " ".join(as_math(line_label(line)).split())} & listed]


def dashed(line: Line2D) -> bool:
    """Whether ``line`` is drawn with dashes (or dots): any line style but solid or none."""
    return line.get_linestyle() not in ("-", "solid", "None", "none", " ", "")


def _dashes_not_theory(ax: Axes) -> list[str]:
    out = []
    for line in data_lines(ax):
        theory = line.get_gid() == THEORY
        if dashed(line) != theory:
            what = "theory line" if theory else "data line"
            out.append(f"{what} {_line_name(line)} is {'solid' if theory else 'dashed'}: dashes mean theory, only theory")
    return out


def _markup(fig: Figure) -> list[str]:
    """Texts showing raw markup or ids, and mathtext that does not parse (each text once)."""
    out = []
    for text in dict.fromkeys(_texts(fig)):
        label = text.get_text()
        if words := raw_markup(label):
            out.append(f"text {_short(text)} shows raw markup or ids ({', '.join(words)}): write it as math or a display name")
        if error := math_error(label):
            out.append(f"text {_short(text)} is mathtext matplotlib cannot render ({error})")
    return out


def _legend_count(fig: Figure) -> list[str]:
    n = len(legends(fig))
    return [f"{n} legends: one legend per figure lists every line"] if n > 1 else []


THEORY_SLACK = 0.25
"""How far (a share of the data's span, in the axis' scale) theory may widen an axis beyond the data."""


def data_span(ax: Axes, axis: str = "y") -> tuple[float, float] | None:
    """The (low, high) of the drawable points of the data lines of ``ax`` (theory and fits left out)."""
    column = 0 if axis == "x" else 1
    scale = ax.get_xscale() if axis == "x" else ax.get_yscale()
    values = []
    for line in data_lines(ax):
        if line.get_gid() in (THEORY, FIT):
            continue
        v = np.asarray(line.get_xydata(), np.float64)[:, column]
        values.append(v[np.isfinite(v) & ((v > 0) if scale == "log" else True)])
    values = np.concatenate(values) if values else np.empty(0)
    return (float(values.min()), float(values.max())) if values.size else None


def theory_range(ax: Axes) -> str | None:
    """What is wrong when the y view reaches beyond the data by more than :data:`THEORY_SLACK` of
    their span (in the axis' scale) -- theory or a reference widened it -- else None."""
    span = data_span(ax)
    if span is None or not any(line.get_gid() == THEORY for line in data_lines(ax)):
        return None
    scale = ax.yaxis.get_transform()
    lo, hi = scale.transform(np.asarray(span))
    view_lo, view_hi = sorted(scale.transform(np.asarray(ax.get_ylim(), np.float64)))
    width = max(hi - lo, 1e-12 * max(abs(lo), abs(hi), 1.0), 0.3 if ax.get_yscale() == "log" else 0.0)
    if lo - view_lo > (THEORY_SLACK + 0.1) * width or view_hi - hi > (THEORY_SLACK + 0.1) * width:
        return f"the data span {span[0]:.3g}…{span[1]:.3g}, the axis {ax.get_ylim()[0]:.3g}…{ax.get_ylim()[1]:.3g}"
    return None


FITTED = re.compile(r"(exponent|slope in ln \S+) −?-?\d")
"""A legend's fitted exponent or slope with its value (a note saying why there is no fit has none)."""


def _fit_without_line(fig: Figure) -> list[str]:
    texts = [t.get_text() for legend in legends(fig) for t in legend.get_texts() if FITTED.search(t.get_text())]
    fitted = any(line.get_gid() == FIT for ax in fig.axes for line in ax.get_lines())
    return [f"legend gives a fit ({_short_text(texts[0])}) but no fitted curve is drawn"] if texts and not fitted else []


def _short_text(s: str) -> str:
    s = " ".join(s.split())
    return repr(s if len(s) <= 60 else s[:57] + "...")


LEGEND_COLOURS = 12
"""Lines of at most this many colours are told apart by a legend, not a colour bar."""


def _colour_bar_for_few(fig: Figure) -> list[str]:
    bars = [ax for ax in fig.axes if hasattr(ax, "_colorbar")]
    if not bars:
        return []
    colours = {to_hex(line.get_color()) for ax in fig.axes if ax not in bars for line in data_lines(ax)
               if line.get_gid() not in (THEORY, FIT) and str(line.get_label()).startswith("_")}
    if 2 <= len(colours) <= LEGEND_COLOURS:
        return [f"a colour bar tells {len(colours)} unlabelled line colours apart: list them in a legend "
                f"(a colour bar is for more than {LEGEND_COLOURS} ordered values)"]
    return []
