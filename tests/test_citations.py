"""Every citation of a document in the project points to a document, and a section, in the repository.

A citation is a path to a document (``docs/papers.md``, ``benchmarks/README.md``, ``report/caption.rst``),
optionally followed by a section (``docs/papers.md §3.2``), or a bare capitalized document name with a
section (``README §2``, which means ``README.md``). The document must exist (relative to the repository
root or to the citing file), and a cited section must be a heading of it (``### §3.2 ...``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# where the project cites documents: code, specs, rules, tests, docs and the top-level documents
PLACES = ("ntkpipe", "specs", "rules", "tests", "benchmarks", "docs", "tools", "Snakefile")
SUFFIXES = {".py", ".yaml", ".yml", ".smk", ".md", ".rst", ".cff", ""}
SECTION = r"§(\d+(?:\.\d+)*)"
PATH_CITATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:md|rst))\b(?:\s+" + SECTION + ")?")
NAME_CITATION = re.compile(r"\b([A-Z][A-Z_]{2,})(?:\.md)?\s+" + SECTION)
# this test and the tool that rewrites the old citations name them on purpose
SKIP = {Path(__file__).resolve()}


def cited_files() -> list[Path]:
    out = [p for p in ROOT.glob("*") if p.is_file() and p.suffix in {".md", ".cff"}]
    for place in PLACES:
        path = ROOT / place
        out += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sorted(p for p in out
                  if p.suffix in SUFFIXES and p.resolve() not in SKIP and "__pycache__" not in p.parts)


def headings(document: Path) -> set[str]:
    """The section numbers "N" / "N.M" of the document's headings (lines "#… §N.M title")."""
    found = re.findall(r"^#{1,6}\s+" + SECTION, document.read_text(encoding="utf-8"), flags=re.M)
    return set(found)


STUDY_OUTPUTS = {"index.md"}
"""Documents a study writes under results/<study>/ (named, not cited)."""


def resolve(name: str, citing: Path) -> Path | None:
    for base in (ROOT, citing.parent):
        if (base / name).is_file():
            return base / name
    return None


def dangling(text: str, citing: Path) -> list[str]:
    """"line N: what" for each citation in ``text`` that points outside the repository."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        cites = [(m.group(0), m.group(1), m.group(2)) for m in PATH_CITATION.finditer(line)]
        cites += [(m.group(0), m.group(1) + ".md", m.group(2)) for m in NAME_CITATION.finditer(line)]
        for text_, name, section in cites:
            if Path(name).name in STUDY_OUTPUTS:
                continue
            document = resolve(name, citing)
            if document is None:
                problems.append(f"line {number}: {text_!r} cites {name}, not a file of the repository")
            elif section is not None and section not in headings(document):
                problems.append(f"line {number}: {text_!r}: {name} has no heading §{section}")
    return problems


def test_every_cited_document_and_section_exists():
    problems = []
    for path in cited_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems += [f"{path.relative_to(ROOT)}:{p.removeprefix('line ')}" for p in dangling(text, path)]
    assert not problems, ("citations of documents not in the repository (the papers' notes are in "
                          "docs/papers.md; cite a heading of docs/papers.md):\n"
                          + "\n".join(problems))


def test_the_checker_catches_what_it_should(tmp_path):
    citing = ROOT / "ntkpipe" / "theory" / "solvable.py"
    assert dangling("closed form (docs/papers.md §6.2)", citing) == []
    assert dangling("see benchmarks/README.md", citing) == []
    assert dangling("the ODE (STUDIES §3)", citing) == [
        "line 1: 'STUDIES §3' cites STUDIES.md, not a file of the repository"]
    assert dangling("x\nsee docs/papers.md §99.1", citing) == [
        "line 2: 'docs/papers.md §99.1': docs/papers.md has no heading §99.1"]
    assert dangling("see docs/nowhere.md", citing) == [
        "line 1: 'docs/nowhere.md' cites docs/nowhere.md, not a file of the repository"]
    # §6.2 must not be satisfied by a heading §6.20, nor §6 by §6.2
    doc = tmp_path / "d.md"
    doc.write_text("# T\n## §6.20 x\n### §60 y\n")
    assert headings(doc) == {"6.20", "60"}


def test_citation_cff_matches_the_package_and_the_papers():
    """CITATION.cff carries pyproject's version and the four papers of docs/papers.md §1, by arXiv id."""
    import tomllib

    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert (cff["cff-version"], cff["title"], cff["version"]) == ("1.2.0", project["name"], project["version"])
    assert cff["license"] == project["license"]
    papers = (ROOT / "docs" / "papers.md").read_text(encoding="utf-8")
    references = papers[papers.index("## §1 "):papers.index("## §2 ")]
    in_docs = set(re.findall(r"arXiv:(\d{4}\.\d{4,5})", references))
    in_cff = {i["value"].removeprefix("arXiv:") for r in cff["references"] for i in r["identifiers"]}
    assert len(in_docs) == len(cff["references"]) == 4
    assert in_cff == in_docs
    for r in cff["references"]:
        assert r["title"].rstrip("?") in references.replace("*", "").replace("\n", " ")
