"""Rewrite citations of the out-of-repository notes "STUDIES §N" to their docs/papers.md sections.

    python tools/retarget_citations.py [--check] [ROOT]

The notes the project started from (STUDIES.md, kept outside the repository) had one section per
paper; docs/papers.md now holds their content. Each "STUDIES §N" (or "STUDIES.md §N") in the
project's code, specs, tests and docs becomes "docs/papers.md §M" by the table ``MAPPING``; a
section number not in the table stops the script with the file and line. ``--check`` only lists
what would change (exit 1 if anything would).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# STUDIES §N -> docs/papers.md §M. Every citation of STUDIES §3 in the code is of the solvable
# model's closed form, which docs/papers.md §6.2 re-derives (the phase diagram is §6.4).
MAPPING = {
    "1": "3",     # silent alignment
    "2": "4",     # kernel alignment theory
    "3": "6.2",   # solvable two-layer linear model: its re-derived exact solution
    "4": "5",     # linearized networks
}
TARGET = "docs/papers.md"
CITATION = re.compile(r"\bSTUDIES(?:\.md)? §(\d+(?:\.\d+)*)")
# what the project's citations live in (relative to the repository root)
PLACES = ("ntkpipe", "specs", "rules", "tests", "benchmarks", "docs", "Snakefile", "README.md",
          "CONTRIBUTING.md")
SUFFIXES = {".py", ".yaml", ".yml", ".smk", ".md", ".rst", ".txt", ""}
SKIP = {Path("tools/retarget_citations.py"), Path("tests/test_citations.py")}


def files(root: Path):
    """Text files under PLACES, in a stable order, without SKIP."""
    for place in PLACES:
        path = root / place
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in candidates:
            if p.suffix in SUFFIXES and p.relative_to(root) not in SKIP and "__pycache__" not in p.parts:
                yield p


def retarget(text: str, where: str) -> tuple[str, list[str]]:
    """``text`` with every STUDIES §N replaced, and one "file:line: old -> new" note per change."""
    notes: list[str] = []
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        def replace(m: re.Match) -> str:
            section = m.group(1)
            if section not in MAPPING:
                raise SystemExit(f"{where}:{i + 1}: {m.group(0)!r} has no entry in MAPPING "
                                 f"(known: {', '.join('§' + k for k in MAPPING)}); add it to tools/retarget_citations.py")
            new = f"{TARGET} §{MAPPING[section]}"
            notes.append(f"{where}:{i + 1}: {m.group(0)} -> {new}")
            return new
        lines[i] = CITATION.sub(replace, line)
    return "".join(lines), notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=Path(__file__).resolve().parents[1], type=Path)
    parser.add_argument("--check", action="store_true", help="list the changes, write nothing")
    args = parser.parse_args(argv)
    changed = []
    for path in files(args.root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new, notes = retarget(text, str(path.relative_to(args.root)))
        if notes:
            changed.extend(notes)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    print("\n".join(changed) if changed else "no STUDIES citations left")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
