"""The language reference's examples: for each figure kind a figure and for each summary kind a table, taken from
the first shipped study that uses it and committed under ``docs/examples/`` (``ntkpipe reference --examples
RESULTS`` refreshes them from a results directory of the main job), so docs/language.md shows what each kind
draws or computes without running anything."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

EXAMPLES = Path("docs/examples")
"""Where the examples live, relative to the repository (docs/language.md links them relative to docs/)."""
EXAMPLE_WIDTH = 900
"""An example figure's width in pixels (a shipped figure is scaled down to it; its PNG metadata kept)."""
EXAMPLE_ROWS = 8
"""An example table shows its first rows and says how many there are and where the whole table is."""


def figure_example(kind: str) -> Path:
    """The example figure of figure kind ``kind`` (relative to the repository)."""
    return EXAMPLES / "figures" / f"{kind}.png"


def summary_example(kind: str) -> Path:
    """The example table of summary kind ``kind`` (Markdown, relative to the repository)."""
    return EXAMPLES / "summaries" / f"{kind}.md"


def write_figure_example(kind: str, source: Path, where: str, repo: Path) -> Path:
    """``source`` (a figure of a shipped study) scaled to :data:`EXAMPLE_WIDTH` as the example of ``kind``,
    keeping its PNG text (Title, Description, Source) and saying which spec drew it."""
    from PIL import Image, PngImagePlugin

    out = repo / figure_example(kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(source) as image:
        info = PngImagePlugin.PngInfo()
        for key, value in image.text.items():  # type: ignore[attr-defined]  # PngImageFile has .text
            info.add_text(key, value)
        info.add_text("Comment", f"example of figures[].kind: {kind}, drawn by {where}")
        height = round(image.height * EXAMPLE_WIDTH / image.width)
        image.convert("RGB").resize((EXAMPLE_WIDTH, height), Image.Resampling.LANCZOS).save(out, pnginfo=info,
                                                                                            optimize=True)
    return out


def summary_table(ds, name: str, by: list[str]) -> pd.DataFrame:
    """The variables summary ``name`` added to a study dataset (``name`` and ``name_*``), one row per group of
    its ``by`` axes, or per run for a per-run summary without ``by`` (and per value of their other dimensions,
    e.g. checkpoint); one row for a summary of the whole study."""
    from ntkpipe.layout import RUN

    variables = [str(v) for v in ds.data_vars if v == name or str(v).startswith(f"{name}_")]
    if not any(ds[v].dims for v in variables):
        return pd.DataFrame([{v: ds[v].item() for v in variables}])
    frame = ds[variables].to_dataframe().reset_index()
    dims = {d for v in variables for d in ds[v].dims}
    per_run = list(ds.indexes[RUN].names) if RUN in dims and not by else []
    keys = [c for c in frame.columns if c in by or c in per_run or (c in dims and c != RUN)]
    return frame[keys + variables].drop_duplicates().reset_index(drop=True)


def table_markdown(frame: pd.DataFrame, where: str, total_note: str) -> str:
    """The first :data:`EXAMPLE_ROWS` rows of ``frame`` as a Markdown table, numbers to 4 significant digits,
    with where it comes from and how many rows the whole table has."""
    def cell(value) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    head = frame.head(EXAMPLE_ROWS)
    rows = f"{len(frame)} row{'s' if len(frame) != 1 else ''}"
    lines = [f"From {where} ({rows}{'' if len(frame) <= EXAMPLE_ROWS else f'; the first {EXAMPLE_ROWS}'}"
             f"; {total_note}):", "", "| " + " | ".join(map(str, head.columns)) + " |",
             "|" + "---|" * len(head.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in head.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_examples(results: Path, repo: Path, uses: dict[str, dict[str, tuple[dict, str]]]) -> list[Path]:
    """Write every example from ``results`` (the default variant's results of the shipped studies): ``uses``
    maps ``figures``/``summaries`` to each kind's first shipped use (the item and ``specs/<study>.yaml``).
    Raises FileNotFoundError naming what is missing (run the main job first)."""
    from ntkpipe.layout import open_dataset

    written, missing = [], []
    for kind, (item, where) in uses["figures"].items():
        study = Path(where).stem
        source = results / study / "figures" / f"{item['name']}.png"
        if source.is_file():
            written.append(write_figure_example(kind, source, where, repo))
        else:
            missing.append(str(source))
    for kind, (item, where) in uses["summaries"].items():
        study = Path(where).stem
        store = results / study / f"{study}.zarr"
        if not store.exists():
            missing.append(str(store))
            continue
        by = item.get("by") or []
        frame = summary_table(open_dataset(store), item["name"], [by] if isinstance(by, str) else list(by))
        out = repo / summary_example(kind)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table_markdown(frame, f"`{where}`, summary `{item['name']}`",
                                      f"the whole table is in results/{study}/{study}.zarr"), encoding="utf-8")
        written.append(out)
    if missing:
        raise FileNotFoundError("no results to take the examples from: " + ", ".join(missing)
                                + "; run the main job (snakemake --cores 2) into that results directory first")
    return written
