"""The language reference: every key of a study, generated from the JSON Schema and the records.

One :class:`Entry` per key a spec may write (``train.optimizer.lr``), per value that selects a record
(``data.source.mnist``, ``model.kind.ofe``, ``measure.energy_concentration`` and its options,
``stages.nad``, ``summaries.power_law``, ``figures.sweep`` and their keys) and per sweep form
(``sweep.zip``, ``sweep.logspace``). Types, defaults, allowed values, units and meanings come from
:func:`~ntkpipe.study.json_schema.study_schema` (the models' fields and docstrings); formulas and
variables from the measurement records; examples from the shipped specs. ``docs/language.md`` is
:func:`markdown` (``ntkpipe reference`` writes it); ``ntkpipe explain KEY`` prints :func:`explain`.
"""

from __future__ import annotations

import difflib
import inspect
import re
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

import yaml

from ntkpipe.claims.relations import RELATIONS
from ntkpipe.data.sources import SOURCES
from ntkpipe.lang import sweep
from ntkpipe.lang.axes import AXES
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import FIGURE_KINDS
from ntkpipe.lang.yaml_lines import load_with_lines
from ntkpipe.measure.registry import REGISTRY
from ntkpipe.stages import STAGES
from ntkpipe.study.json_schema import REF, YAML11_BOOLEANS, option_schema, plain, study_schema, summary_description
from ntkpipe.study.reference_examples import figure_example, summary_example
from ntkpipe.summaries import SUMMARY_KINDS

REFERENCE_PATH = "docs/language.md"
"""The generated reference, relative to the repository root (``ntkpipe reference`` writes it)."""
REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"
PAPERS = {"silent-alignment": "docs/papers.md §3", "silent alignment": "docs/papers.md §3",
          "kernel-alignment": "docs/papers.md §4", "kernel alignment": "docs/papers.md §4",
          "linearized-networks": "docs/papers.md §5", "linearized networks": "docs/papers.md §5",
          "solvable-model": "docs/papers.md §6", "solvable model": "docs/papers.md §6"}
"""The papers' short names (docs/papers.md §1) and the section of docs/papers.md on each."""
CITATION = re.compile(r"(silent[- ]alignment|kernel[- ]alignment(?:-theory)?|linearized[- ]networks|solvable[- ]model)"
                      r"((?:[ ,]+(?:Sec|Eq|Fig|Figs|App|Table|Theorem|Cor|Corollary)s?\.?\s*[\w.–-]+)*)", re.I)
SECTIONS = ("description", "seed", "data", "model", "train", "measure", "stages", "sweep", "scaling", "summaries",
            "figures", "claims", "variants")


@dataclass(frozen=True)
class Entry:
    """One key of the language (or one value of it that selects a record)."""

    key: str
    what: str
    meaning: str
    type: str = ""
    default: str = ""
    allowed: str = ""
    units: str = ""
    example: str = ""
    details: tuple[str, ...] = ()
    figure: str = ""
    """an example figure (a kind of figures:), relative to the repository"""
    table: str = ""
    """an example table (a kind of summaries:), Markdown"""

    @property
    def sources(self) -> str:
        """The papers (and their sections) the meaning cites, with the section of docs/papers.md on each."""
        for text in (self.meaning, " ".join(self.details)):  # the details only where the meaning cites none
            found = dict.fromkeys(f"{m.group(1)}{m.group(2)}".strip(" ,") + f" ({PAPERS[_paper(m.group(1))]})"
                                  for m in CITATION.finditer(text))
            if found:
                return "; ".join(found)
        return "ntkpipe's own (no paper)"

    def lines(self) -> list[str]:
        """The entry as terminal text."""
        out = [f"{self.key}  ({self.what})", *_wrap(self.meaning, "  ")]
        out += [line for label, value in (("type", self.type), ("default", self.default), ("allowed", self.allowed),
                                          ("units", self.units), ("source", self.sources)) if value
                for line in _wrap(f"{label}: {value}", "  ", "      ")]
        out += [line for detail in self.details for line in _wrap(detail, "  ", "      ")]
        if self.example:
            out += ["  example:", *(f"    {line}" for line in self.example.splitlines())]
        if self.figure:
            out.append(f"  example figure: {self.figure}")
        if self.table:
            out += ["  example table:", *(f"    {line}" for line in self.table.splitlines() if line)]
        return out


def _wrap(text: str, indent: str, rest: str | None = None) -> list[str]:
    """``text`` on lines of at most 110 characters, whitespace normalized, double backquotes made single."""
    return textwrap.wrap(" ".join(plain(text).split()), 110, initial_indent=indent,
                         subsequent_indent=indent if rest is None else rest) or [indent]


def _paper(name: str) -> str:
    return name.lower().replace("-theory", "")


# ------------------------------------------------------------------ reading the schema


def _resolve(node: dict, defs: dict) -> dict:
    while "$ref" in node:
        node = {**_def(node["$ref"], defs), **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _def(ref: str, defs: dict) -> dict:
    name = ref.removeprefix(REF)
    return defs[name]


def _members(node: dict, defs: dict) -> list[dict]:
    """The alternatives of a union (null and the YAML 1.1 spellings of booleans left out), each resolved."""
    node = _resolve(node, defs)
    for key in ("anyOf", "oneOf"):
        if key in node and not ("type" in node and key == "anyOf" and all("const" in m for m in node[key])):
            return [m for alt in node[key] for m in _members(alt, defs)
                    if m.get("type") != "null" and m.get("enum") != YAML11_BOOLEANS["enum"]]
    return [node]


def _nullable(node: dict, defs: dict) -> bool:
    node = _resolve(node, defs)
    return any(_resolve(m, defs).get("type") == "null" for m in node.get("anyOf", [])) or node.get("type") == "null"


def _bounds(node: dict) -> str:
    parts = [f"{sign} {node[key]:g}" for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                                          ("maximum", "≤"), ("exclusiveMaximum", "<"))
             if node.get(key) is not None]
    return ", ".join(parts)


def type_text(node: dict, defs: dict) -> str:
    """A short type: ``integer ≥ 1``, ``number > 0 or null``, ``list of integer``, ``mapping``, ``one of …``."""
    parts = []
    for member in _members(node, defs):
        if "const" in member or "enum" in member or ("anyOf" in member and "type" in member):
            parts.append("string" if member.get("type") == "string" or "anyOf" in member else "value")
            continue
        kind = member.get("type", "any")
        if kind == "array":
            items = member.get("prefixItems")
            text = (f"list of {len(items)}" if items else
                    f"list of {type_text(member['items'], defs)}" if "items" in member else "list")
        elif kind == "object":
            text = "mapping" + (f" ({member['title']})" if "title" in member and "properties" in member else "")
        else:
            text = kind if isinstance(kind, str) else " or ".join(kind)
        bounds = _bounds(member)
        parts.append(f"{text} {bounds}" if bounds else text)
    if _nullable(node, defs):
        parts.append("null")
    return " or ".join(dict.fromkeys(parts))


def allowed_text(node: dict, defs: dict) -> str:
    """The allowed values of an enumeration (``a | b | c``), else an empty string."""
    values = []
    for member in _members(node, defs):
        if "enum" in member:
            values += member["enum"]
        elif "const" in member:
            values.append(member["const"])
        elif "anyOf" in member:
            values += [m["const"] for m in member["anyOf"] if "const" in m]
    values += [None] if values and _nullable(node, defs) else []
    return " | ".join(_yaml_scalar(v) for v in values)


def _yaml_scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6).strip().removesuffix("...").strip()


def _default_text(node: dict, required: bool) -> str:
    if required:
        return "required"
    return _yaml_scalar(node["default"]) if "default" in node else ""


# ------------------------------------------------------------------ examples from the shipped specs


@cache
def shipped_specs() -> dict[str, dict]:
    """Every shipped spec's parsed mapping, by study name."""
    return {path.stem: cast(dict, load_with_lines(path)[0])  # each shipped spec is a mapping
            for path in sorted(SPECS.glob("*.yaml"))}


def _snippet(path: tuple[str, ...], value: Any, where: str) -> str:
    """``value`` at ``path`` as nested YAML (collections of scalars inline), with the spec it is taken from."""
    lines = [f"{'  ' * depth}{key}:" for depth, key in enumerate(path[:-1])]
    indent = "  " * (len(path) - 1)
    body = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100).rstrip()
    if isinstance(value, (dict, list)) and value and "\n" in body:
        lines += [f"{indent}{path[-1]}:", *(f"{indent}  {line}" for line in body.splitlines())]
    else:
        lines.append(f"{indent}{path[-1]}: {_yaml_scalar(value)}")
    return "\n".join(lines + ([f"# {where}"] if where else []))


def _find(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


_MISSING = object()


def _spec_value(path: tuple[str, ...]) -> tuple[Any, str] | None:
    """The first shipped spec (then variant, then case override) that sets ``path``: (value, where)."""
    for name, spec in shipped_specs().items():
        for where, mapping in _places(name, spec):
            if (value := _find(mapping, path)) is not _MISSING:
                return value, where
    return None


def _places(name: str, spec: dict):
    yield f"specs/{name}.yaml", spec
    for variant, override in (spec.get("variants") or {}).items():
        yield f"specs/{name}.yaml, variant {variant}", override
    for axis_name, labels in sweep.case_overrides(spec.get("sweep")).items():
        for label, (_, override) in labels.items():
            yield f"specs/{name}.yaml, case {axis_name}={label}", override


def _items(section: str, field: str, value: str) -> list[tuple[dict, str]]:
    """Shipped list items (figures, summaries) whose ``field`` is ``value``, with where they are."""
    out = []
    for name, spec in shipped_specs().items():
        for where, mapping in _places(name, spec):
            for item in mapping.get(section) or []:
                if isinstance(item, dict) and item.get(field) == value:
                    out.append((item, where))
    return out


def _example(path: tuple[str, ...], node: dict, defs: dict) -> str:
    found = _spec_value(path)
    if found is not None:
        return _snippet(path, *found)
    value = node.get("default")
    if value is None:
        allowed = [m.get("const") for m in _members(node, defs) if "const" in m]
        value = allowed[0] if allowed else _sample(_members(node, defs)[0])
    return _snippet(path, value, "not set by a shipped study")


def _sample(member: dict) -> Any:
    kind = member.get("type")
    if "enum" in member:
        return member["enum"][0]
    low = member.get("minimum", member.get("exclusiveMinimum"))
    return {"integer": int(low or 0) + 1, "number": (low or 0) + 0.5, "boolean": True, "string": "name",
            "array": [], "object": {}}.get(kind if isinstance(kind, str) else "string")


# ------------------------------------------------------------------ the entries


def _field_entries(prefix: str, model: dict, defs: dict, what: str, label: str = "") -> list[Entry]:
    """An entry per property of ``model`` (and of the models nested in it)."""
    out = []
    required = set(model.get("required", ()))
    for name, node in model.get("properties", {}).items():
        key = f"{prefix}.{name}"
        path = tuple(key.split("."))
        meaning = node.get("description", "") or _resolve(node, defs).get("description", "")
        out.append(Entry(key, what + (f" ({label})" if label else ""), meaning, type_text(node, defs),
                         _default_text(node, name in required), allowed_text(node, defs),
                         _resolve(node, defs).get("units", ""), _example(path, node, defs)))
        for member in _members(node, defs):
            nested = _resolve(member.get("items", {}), defs) if member.get("type") == "array" else member
            if "properties" in nested and name not in ("model",):
                out += _field_entries(key, nested, defs, what, label)
    return out


def _merge(entries: list[Entry]) -> dict[str, Entry]:
    """One entry per key: a key several architectures (or kinds) share lists each one's meaning once."""
    merged: dict[str, list[Entry]] = {}
    for entry in entries:
        merged.setdefault(entry.key, []).append(entry)
    out = {}
    for key, group in merged.items():
        first = group[0]
        if len(group) == 1:
            out[key] = first
            continue
        owners = [re.sub(r".*\((.*)\)", r"\1", e.what) for e in group]
        what = re.sub(r" \(.*\)", "", first.what) + f" ({', '.join(owners)})"
        meanings = dict.fromkeys(e.meaning for e in group)
        types = dict.fromkeys(e.type for e in group)
        defaults = dict.fromkeys(e.default for e in group)
        if len(meanings) == 1 and len(types) == 1 and len(defaults) == 1:
            out[key] = Entry(key, what, first.meaning, first.type, first.default, first.allowed, first.units,
                             first.example)
            continue
        per = [f"{owner}: {e.meaning} ({e.type}; default {e.default or 'none'})" for owner, e in zip(owners, group)]
        out[key] = Entry(key, what, " / ".join(meanings), " | ".join(types), " | ".join(defaults),
                         first.allowed, first.units, first.example, tuple(per))
    return out


def _model_entries(defs: dict, root: dict) -> list[Entry]:
    out = [Entry("model", "section", root["properties"]["model"]["description"], "mapping", "required",
                 example=_snippet(("model",), shipped_specs()["depth_scaling"]["model"], "specs/depth_scaling.yaml"))]
    for member in _members(root["properties"]["model"], defs):
        arch = member["properties"]["architecture"]
        name = arch.get("const", arch.get("default"))
        out.append(Entry(f"model.architecture.{name}", "architecture", inspect.cleandoc(member["description"]),
                         example=_example(("model", "architecture"), {"const": name}, defs)
                         if name != "mlp" else _snippet(("model",), {"depth": 3, "width": 100}, "")))
        out += _field_entries("model", member, defs, "key", name)
    for kind in MODEL_KINDS.values():
        found = _spec_value(("model", "kind"))
        example = _snippet(("model", "kind"), kind.name, "") if found is None or found[0] != kind.name else \
            _snippet(("model", "kind"), *found)
        out.append(Entry(f"model.kind.{kind.name}", "model kind", kind.doc, example=example,
                         details=tuple(f"{flag}" for flag in ("kernel", "linearized") if getattr(kind, flag))))
    return out


def _data_entries(defs: dict, root: dict) -> list[Entry]:
    data = defs["DataSpec"]
    out = [Entry("data", "section", root["properties"]["data"]["description"], "mapping", "required",
                 example=_snippet(("data",), shipped_specs()["silent_alignment"]["data"], "specs/silent_alignment.yaml"))]
    out += _field_entries("data", data, defs, "key")
    for name, source in SOURCES.items():
        keys = ", ".join(source.keys) or "none"
        out.append(Entry(f"data.source.{name}", "data source", inspect.cleandoc(source.options.__doc__ or ""),
                         details=(f"its own keys: {keys}",),
                         example=_snippet(("data",), {"source": name, **source.example}, "")))
    by_key = {e.key: e for e in out}
    for key, owners in _source_owners().items():
        entry = by_key[f"data.{key}"]
        out[out.index(entry)] = Entry(entry.key, f"key (sources {', '.join(owners)})", entry.meaning, entry.type,
                                      entry.default, entry.allowed, entry.units, entry.example, entry.details)
    return out


def _source_owners() -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for name, source in SOURCES.items():
        for key in source.keys:
            owners.setdefault(key, []).append(name)
    return owners


def _measure_entries(root: dict) -> list[Entry]:
    out = [Entry("measure", "section", root["properties"]["measure"]["description"], "list", "required",
                 example=_snippet(("measure",), shipped_specs()["kernel_rotation"]["measure"],
                                  "specs/kernel_rotation.yaml"))]
    for m in REGISTRY.values():
        variables = tuple(f"stores {v.name}({', '.join(v.dims) or 'scalar'})" + (f" [{v.units}]" if v.units else "")
                          + f": {v.label}" + (f" — {v.description}" if v.description else "") for v in m.variables)
        needs = (f"taken {'at every checkpoint (a series over time)' if m.when == 'checkpoint' else 'once per run'}",)
        needs += (f"architectures: {', '.join(m.architectures)}",) if m.architectures else ()
        needs += ("also for the kernel model kinds (kgd, akgd, ofe, ofe_fit)",) if m.kernel_models else ()
        needs += (f"reads the series of {', '.join(m.depends_on)}",) if m.depends_on else ()
        needs += (f"assumptions: {m.assumptions}",) if m.assumptions else ()
        users = [s for s, spec in shipped_specs().items() if m.name in _measure_names(spec)]
        needs += (f"measured by {', '.join(f'specs/{s}.yaml' for s in users)}",) if users else ()
        item = next((i for s in users for i in shipped_specs()[s]["measure"]
                     if isinstance(i, dict) and i.get("name") == m.name), None)
        example = _snippet(("measure",), [item or m.name], "")
        out.append(Entry(f"measure.{m.name}", "measurement", m.doc, "name, or a mapping with name and options",
                         example=example, details=needs + variables))
        for o in m.options:
            given = next((i[o.name] for s in users for i in shipped_specs()[s]["measure"]
                          if isinstance(i, dict) and i.get("name") == m.name and o.name in i), o.default)
            schema = option_schema(o)
            out.append(Entry(f"measure.{m.name}.{o.name}", f"option of {m.name}", o.doc, type_text(schema, {}),
                             _yaml_scalar(o.default),
                             example=_snippet(("measure",), [{"name": m.name, o.name: given}], "")))
    return out


def _measure_names(spec: dict) -> set[str]:
    return {i if isinstance(i, str) else i.get("name") for i in spec.get("measure") or []}


def _stage_entries(defs: dict, root: dict) -> list[Entry]:
    out = [Entry("stages", "section", root["properties"]["stages"]["description"], "mapping of name to stage", "{}",
                 example=_example(("stages",), {}, defs))]
    for member in _members(root["properties"]["stages"]["additionalProperties"], defs):
        compute = member["properties"]["compute"]["const"]
        users = [(s, name, stage) for s, spec in shipped_specs().items()
                 for name, stage in (spec.get("stages") or {}).items() if stage.get("compute") == compute]
        example = (_snippet(("stages",), {users[0][1]: users[0][2]}, f"specs/{users[0][0]}.yaml") if users
                   else _snippet(("stages",), {compute: {"compute": compute}}, "not used by a shipped study"))
        provides = STAGES[compute].provides
        out.append(Entry(f"stages.{compute}", "stage kind", inspect.cleandoc(member["description"]), example=example,
                         details=(f"provides: {provides}",) if provides else ()))
        out += [Entry(e.key, e.what, e.meaning, e.type, e.default, e.allowed, e.units,
                      _snippet(("stages",), {compute: {"compute": compute, e.key.rsplit(".", 1)[1]: _first_value(
                          users, e.key.rsplit(".", 1)[1], e.default)}}, ""))
                for e in _field_entries(f"stages.{compute}", member, defs, "key", compute)]
    return out


def _first_value(users: list, key: str, default: str) -> Any:
    for _, _, stage in users:
        if key in stage:
            return stage[key]
    return yaml.safe_load(default) if default and default != "required" else "name"


def _list_kind_entries(section: str, field: str, kinds: dict[str, tuple[dict, str]], defs: dict,
                       what: str) -> list[Entry]:
    """Entries of the kinds of a list section (figures, summaries): the kind, then its keys."""
    out = []
    for kind, (model, meaning) in kinds.items():
        uses = _items(section, field, kind)
        shown = [f"{where}: {item.get('name')}" + (f" → results/{_tag(where)}/figures/{item.get('name')}.png"
                                                   if section == "figures" else "") for item, where in uses[:4]]
        example = (_snippet((section,), [uses[0][0]], uses[0][1]) if uses
                   else _snippet((section,), [{"name": kind, field: kind}], "not used by a shipped study"))
        figure, table = REPO / figure_example(kind), REPO / summary_example(kind)
        out.append(Entry(f"{section}.{kind}", what, meaning, example=example,
                         details=tuple(f"used in {s}" for s in shown),
                         figure=str(figure_example(kind)) if section == "figures" and figure.is_file() else "",
                         table=table.read_text(encoding="utf-8") if section == "summaries" and table.is_file()
                         else ""))
        if section in ("figures", "summaries"):
            for e in _field_entries(f"{section}.{kind}", model, defs, "key", kind):
                name = e.key.rsplit(".", 1)[1]
                item = next((i for i, _ in uses if name in i), None)
                value = item[name] if item else (yaml.safe_load(e.default) if e.default not in ("", "required")
                                                 else "name")
                out.append(Entry(e.key, e.what, e.meaning, e.type, e.default, e.allowed, e.units,
                                 _snippet((section,), [{"name": "example", field: kind, name: value}], "")))
    return out


def first_uses() -> dict[str, dict[str, tuple[dict, str]]]:
    """Each figure and summary kind's first use by a shipped study's default variant: the item and its spec
    (where :mod:`~ntkpipe.study.reference_examples` takes the kind's example from)."""
    kinds = {"figures": list(FIGURE_KINDS), "summaries": list(SUMMARY_KINDS)}
    return {section: {kind: uses[0] for kind in names
                      if (uses := [(item, where) for item, where in _items(section, "kind", kind)
                                   if ", variant " not in where])}
            for section, names in kinds.items()}


def _tag(where: str) -> str:
    """The results directory of a place ``specs/<study>.yaml[, variant <v>]``: ``<study>[-<v>]``."""
    study, _, variant = where.removeprefix("specs/").partition(", variant ")
    return study.removesuffix(".yaml") + (f"-{variant}" if variant else "")


def _summary_entries(defs: dict, root: dict) -> list[Entry]:
    kinds = {kind: (defs[f"summary.{kind}"], summary_description(kind)) for kind in SUMMARY_KINDS}
    out = [Entry("summaries", "section", root["properties"]["summaries"]["description"], "list", "[]",
                 example=_example(("summaries",), {}, defs))]
    return out + _list_kind_entries("summaries", "kind", kinds, defs, "summary kind")


def _figure_entries(defs: dict, root: dict) -> list[Entry]:
    kinds = {}
    for kind, model in FIGURE_KINDS.items():
        node = defs[model.__name__]
        kinds[kind] = (node, inspect.cleandoc(node["description"]))
    out = [Entry("figures", "section", root["properties"]["figures"]["description"], "list", "[]",
                 example=_example(("figures",), {}, defs))]
    return out + _list_kind_entries("figures", "kind", kinds, defs, "figure kind")


def _claim_entries(defs: dict, root: dict) -> list[Entry]:
    """The claims section, a claim's keys (its quantity's and tolerance's), and each relation kind with its keys."""
    claim = defs["ClaimSpec"]
    out = [Entry("claims", "section", root["properties"]["claims"]["description"], "list", "[]",
                 example=_example(("claims",), {}, defs), details=(inspect.cleandoc(claim["description"]),))]
    own = {**claim, "properties": {k: v for k, v in claim["properties"].items() if k != "relation"}}
    out += _field_entries("claims", own, defs, "key")
    relation = claim["properties"]["relation"]
    out.append(Entry("claims.relation", "key", relation.get("description", ""), "mapping (a relation)", "required",
                     allowed_text({"anyOf": [{"const": k} for k in RELATIONS]}, defs),
                     example=_example(("claims",), {}, defs)))
    for kind, record in RELATIONS.items():
        node = defs[record.options.__name__]
        uses = [(item, where) for name, spec in shipped_specs().items() for where, mapping in _places(name, spec)
                for item in mapping.get("claims") or [] if (item.get("relation") or {}).get("kind") == kind]
        example = (_snippet(("claims",), [uses[0][0]], uses[0][1]) if uses else
                   _snippet(("claims", "relation"), {"kind": kind}, "not used by a shipped study"))
        out.append(Entry(f"claims.relation.{kind}", "claim relation", inspect.cleandoc(record.options.__doc__ or ""),
                         example=example))
        out += [Entry(e.key, e.what, e.meaning, e.type, e.default, e.allowed, e.units,
                      _snippet(("claims", "relation"), {"kind": kind}, ""))
                for e in _field_entries(f"claims.relation.{kind}", node, defs, "key", kind)]
    return out


def _sweep_entries(defs: dict, root: dict) -> list[Entry]:
    node = defs["SweepNode"]
    depth_scaling = shipped_specs()["depth_scaling"]["sweep"]
    out = [Entry("sweep", "section", node["description"].split("\n\n")[0], "mapping (a sweep node)", "{}",
                 example=_snippet(("sweep",), depth_scaling, "specs/depth_scaling.yaml"),
                 details=("axes: " + ", ".join(AXES) + " (and d, with a scaling)",))]
    forms = {"zip": None, "union": None, "product": None, "cases": None}
    for form in forms:
        uses = [(value, name) for name, spec in shipped_specs().items()
                if (value := _find_form(spec.get("sweep"), form)) is not None]
        example = (_snippet(("sweep",), {form: uses[0][0]}, f"specs/{uses[0][1]}.yaml") if uses else
                   _snippet(("sweep",), {form: [{"seed": [0, 1]}, {"zip": {"depth": [2, 3], "width": [50, 100]}}]},
                            "not used by a shipped study"))
        out.append(Entry(f"sweep.{form}", "sweep form", node["properties"][form]["description"],
                         type_text(node["properties"][form], defs), example=example))
    generators = defs["SweepGenerator"]["properties"]
    for name, gen in generators.items():
        uses = [(value, spec_name) for spec_name, spec in shipped_specs().items()
                if (value := _find_generator(spec.get("sweep"), name)) is not None]
        example = (_snippet(("sweep",), uses[0][0], f"specs/{uses[0][1]}.yaml") if uses
                   else _snippet(("sweep", "sigma"), {name: [0, 10, 2] if name == "range" else [-2, 0, 5]}, ""))
        out.append(Entry(f"sweep.{name}", "sweep values", gen["description"], "list of 3", example=example))
    return out


def _find_form(node: Any, form: str) -> Any:
    if isinstance(node, dict):
        if form in node:
            return node[form]
        for value in node.values():
            if (found := _find_form(value, form)) is not None:
                return found
    elif isinstance(node, list):
        for value in node:
            if (found := _find_form(value, form)) is not None:
                return found
    return None


def _find_generator(node: Any, name: str) -> dict | None:
    """A sweep entry ``{axis: {name: [...]}}`` in a shipped sweep."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and list(value) == [name]:
                return {key: value}
            if (found := _find_generator(value, name)) is not None:
                return found
    elif isinstance(node, list):
        for value in node:
            if (found := _find_generator(value, name)) is not None:
                return found
    return None


@cache
def entries() -> dict[str, Entry]:
    """Every entry of the reference, by key, in the reference's order."""
    schema = study_schema()
    defs = schema["$defs"]
    root = schema
    out: list[Entry] = []
    for section in SECTIONS:
        node = root["properties"][section]
        if section == "data":
            out += _data_entries(defs, root)
        elif section == "model":
            out += _model_entries(defs, root)
        elif section == "measure":
            out += _measure_entries(root)
        elif section == "stages":
            out += _stage_entries(defs, root)
        elif section == "sweep":
            out += _sweep_entries(defs, root)
        elif section == "summaries":
            out += _summary_entries(defs, root)
        elif section == "figures":
            out += _figure_entries(defs, root)
        elif section == "claims":
            out += _claim_entries(defs, root)
        elif section == "variants":
            found = next(((v, f"specs/{n}.yaml") for n, s in shipped_specs().items() if (v := s.get("variants"))), None)
            out.append(Entry("variants", "section", node["description"], type_text(node, defs), "{}",
                             example=_snippet(("variants",), found[0], found[1]) if found else ""))
        elif section == "scaling":
            out.append(Entry("scaling", "section", node["description"], type_text(node, defs), "null",
                             example=_example(("scaling",), node, defs)))
            out += _field_entries("scaling", defs["ScalingSpec"], defs, "key")
        else:
            out.append(Entry(section, "key", node["description"], type_text(node, defs),
                             _default_text(node, section in root.get("required", ())), allowed_text(node, defs),
                             example=_example((section,), node, defs)))
            if section == "train":
                out += _field_entries("train", defs["TrainSpec"], defs, "key")
    return _merge(out)


# ------------------------------------------------------------------ explain and the document


class UnknownKey(LookupError):
    """A key the reference does not know; the message lists close matches."""


def resolve(query: str) -> list[str]:
    """The entries a user's key names: the key itself; a sweep-axis name (``lr``, ``train.lr``); a value
    entry without its field (``data.mnist``, ``model.ofe``); or the keys ending in it (``top_k``)."""
    known = entries()
    key = query.strip().strip(".").lower().replace("-", "_").replace("[]", "")
    key = re.sub(r"\[\d+\]|\.\d+(?=\.|$)", "", key)  # list indices: figures.0.x, figures[0].x → figures.x
    key = re.sub(r"\.{2,}", ".", key)
    if key in known:
        return [key]
    if key.startswith("variants."):  # variants.<name>[.<key>]: the variants, or the key a variant overrides
        parts = key.split(".", 2)
        return resolve(parts[2]) if len(parts) == 3 else ["variants"]
    head, _, last = key.rpartition(".")
    section = head.split(".")[0]
    if last in AXES and (not head or section in (AXES[last][0], "sweep")):
        return [".".join(AXES[last])]
    if key == "sweep.d":
        return ["scaling.d"]
    for field in ("source", "architecture", "kind"):
        if f"{head}.{field}.{last}" in known:
            return [f"{head}.{field}.{last}"]
    first = key.split(".")[0]
    return [k for k in known if k.endswith("." + key) or k.split(".")[-1] == key
            or (head and k.split(".")[0] == first and k.split(".")[-1] == last)]


def explain(query: str) -> str:
    """The terminal text of the entries ``query`` names; :class:`UnknownKey` with close matches otherwise."""
    keys = resolve(query)
    if not keys:
        known = entries()
        close = difflib.get_close_matches(query, list(known), n=5, cutoff=0.6)
        close += [k for k in difflib.get_close_matches(query.rsplit(".", 1)[-1], {k.rsplit(".", 1)[-1]: k for k in known},
                                                       n=3, cutoff=0.7)]
        close = [resolve(c)[0] if c not in known and resolve(c) else c for c in dict.fromkeys(close)]
        hint = f"; did you mean {', '.join(dict.fromkeys(close))}?" if close else ""
        raise UnknownKey(f"unknown key {query!r}{hint} (the sections are {', '.join(SECTIONS)}; "
                         f"docs/language.md lists every key)")
    if len(keys) > 8:
        return f"{query!r} names {len(keys)} keys; give one of:\n" + "\n".join(f"  {k}" for k in keys)
    return "\n\n".join("\n".join(entries()[k].lines()) for k in keys)


def markdown() -> str:
    """docs/language.md: every entry, by section."""
    out = ["# The ntkpipe study language, key by key", "",
           "<!-- generated by `ntkpipe reference` from the language's models, docstrings and records; "
           "do not edit by hand (tests/test_language_reference.py fails when it is out of date) -->", "",
           "A study is one YAML file, `specs/<name>.yaml`; its first line names the JSON Schema "
           "(`# yaml-language-server: $schema=../schema/study.schema.json`), so an editor with the YAML language "
           "server completes and checks every key below. `ntkpipe explain KEY` prints one entry in the terminal, "
           "`ntkpipe new NAME` writes a study to start from, `ntkpipe validate` checks a spec completely. The papers "
           "are cited by short name (silent-alignment, kernel-alignment, linearized-networks, solvable-model); "
           "their references, derivations and the code's departures are in docs/papers.md.", "",
           "Each entry: what it is (in parentheses: the architectures, kinds or sources that take a key), its type, "
           "default, allowed values and units where it has them, its meaning, the paper it comes from and a YAML "
           "example (taken from a shipped spec where one sets it). Figures named "
           "`results/<study>/figures/<name>.png` are made by `snakemake` from the shipped studies.", ""]
    known = entries()
    out += ["## Sections", ""] + [f"- [`{s}`](#{_anchor(s)})" for s in SECTIONS] + [""]
    for section in SECTIONS:
        out += [f"## {section}", ""]
        for key, entry in known.items():
            if key.split(".")[0] == section:
                out += _markdown_entry(entry)
    return "\n".join(out).rstrip() + "\n"


def _anchor(key: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", key.lower().replace(" ", "-"))


def _markdown_entry(entry: Entry) -> list[str]:
    level = "###" if entry.key.count(".") <= 1 else "####"
    out = [f"{level} `{entry.key}`", "", f"*{entry.what}*. {_md(entry.meaning)}", ""]
    rows = [(label, value) for label, value in (("type", entry.type), ("default", entry.default),
                                                ("allowed", entry.allowed), ("units", entry.units),
                                                ("source", entry.sources)) if value]
    out += [f"- {label}: {_md(value) if label != 'allowed' else _code_list(value)}" for label, value in rows]
    out += [f"- {_md(line)}" for line in entry.details]
    if entry.example:
        out += ["", "```yaml", entry.example, "```"]
    if entry.figure:  # docs/language.md links relative to docs/
        out += ["", f"![an example of {entry.key}]({Path(entry.figure).relative_to('docs')})"]
    if entry.table:
        out += ["", entry.table.rstrip()]
    return out + [""]


def _md(text: str) -> str:
    return " ".join(plain(text).split()).replace("|", "\\|")


def _code_list(value: str) -> str:
    return ", ".join(f"`{v}`" for v in value.split(" | "))

