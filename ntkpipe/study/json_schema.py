"""The JSON Schema (Draft 2020-12) of a study file, generated from the language itself.

pydantic writes the schema of :class:`~ntkpipe.lang.schema.StudySpec` (every field with its type,
default, range, allowed values and description); what the models leave open is filled in from the
records: each measurement of :data:`~ntkpipe.measure.registry.REGISTRY` with its own options, the
keys each data source takes (:data:`~ntkpipe.data.sources.SOURCES`), the sweep grammar
(:mod:`ntkpipe.lang.sweep`: axes of :data:`~ntkpipe.lang.axes.AXES`, value generators, ``zip``,
``union``, ``product``, ``cases``), variants and case overrides (partial studies: every key
optional), and the top-level ``x-…`` keys the loader ignores.

The schema checks what one file says, key by key; ``ntkpipe validate`` checks more (rules across keys,
the sweep's runs, the registries' requirements, data files). It is never stricter than the validator:
a spec the validator accepts passes the schema (tests/test_json_schema.py). Editors with the YAML
language server read it through the first line of a spec, ``# yaml-language-server: $schema=…``.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from ntkpipe.data.sources import SOURCES
from ntkpipe.lang import sweep
from ntkpipe.lang.axes import AXES, SWEEPABLE_SECTIONS, models_in
from ntkpipe.lang.scaling import field_kind
from ntkpipe.lang.schema import StudySpec
from ntkpipe.measure.options import Option
from ntkpipe.measure.registry import REGISTRY, Measurement
from ntkpipe.study.load import EXTENSION_PREFIX, NAME_PATTERN
from ntkpipe.summaries import SUMMARY_KINDS

SCHEMA_PATH = "schema/study.schema.json"
"""The committed copy, relative to the repository root (``ntkpipe schema > schema/study.schema.json``)."""
SCHEMA_LINE = "# yaml-language-server: $schema=../schema/study.schema.json"
"""The first line of a spec in ``specs/``: editors with the YAML language server check and complete its keys."""
DIALECT = "https://json-schema.org/draft/2020-12/schema"
ROOT_DESCRIPTION = ("An ntkpipe study, specs/<name>.yaml: data, model, train and measure make each run; sweep and "
                    "scaling say which runs; stages, summaries and figures what is made from them; variants are "
                    "named overrides. Key by key: docs/language.md, or ntkpipe explain KEY.")
REF = "#/$defs/"
OVERRIDE = "Override"
"""Suffix of the partial copy of a model's schema (every key optional) that variants and cases use."""
OWN = ("Measurement", "SweepNode", "Variant")
"""The definitions this module adds (a reference to one stays as it is in a partial copy)."""
OPTION_TYPES = {int: "integer", float: "number", str: "string"}


YAML11_BOOLEANS = {"enum": ["yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"],
                   "description": "a YAML 1.1 boolean, as ntkpipe's loader reads it (an editor reads YAML 1.2: a string)"}
"""Booleans in YAML 1.1 (PyYAML, ntkpipe's loader) that YAML 1.2 (the YAML language server) reads as strings."""


class StudyJsonSchema(GenerateJsonSchema):
    """pydantic's generator without the titles it derives from field names ("N Train"): an editor
    shows a key's description instead; a boolean also takes the YAML 1.1 words ntkpipe reads as one."""

    def field_title_should_be_set(self, schema) -> bool:
        return False

    def bool_schema(self, schema) -> dict:
        return boolean()


def boolean() -> dict:
    """A boolean, written as YAML 1.2 does or as YAML 1.1 does (``yes``, ``off``, …)."""
    return {"anyOf": [{"type": "boolean"}, copy.deepcopy(YAML11_BOOLEANS)]}


def study_schema() -> dict[str, Any]:
    """The JSON Schema of a study file."""
    schema = StudySpec.model_json_schema(schema_generator=StudyJsonSchema)
    defs = schema.pop("$defs")
    defs["Study"] = schema
    for name in list(defs):
        defs[name + OVERRIDE] = _partial(defs[name])
    root = defs.pop("Study")
    defs.pop("Study" + OVERRIDE)
    defs.pop("MeasureItem")
    defs.pop("MeasureItem" + OVERRIDE)
    props = root["properties"]
    props["measure"]["items"] = {"$ref": REF + "Measurement"}
    props["sweep"] = {**_described(props["sweep"]), "$ref": REF + "SweepNode"}
    props["variants"] = {**_described(props["variants"]), "type": "object", "default": {},
                         "propertyNames": {"pattern": NAME_PATTERN.pattern, "not": {"const": "default"}},
                         "additionalProperties": {"$ref": REF + "Variant"}}
    defs["Variant"] = {"description": "keys of the study to override in this variant (every key optional): "
                                      "mappings merge key by key, lists, values and the sweep are replaced",
                       "type": "object", "additionalProperties": False,
                       "properties": {key: _partial(value) for key, value in props.items()}}
    defs["Measurement"] = _measurement_schema(defs)
    defs["SummarySpec"] = defs["SummarySpec" + OVERRIDE] = _summary_schema(defs)
    defs.update(_sweep_defs(props))
    _source_rules(defs["DataSpec"])
    return _plain_descriptions({"$schema": DIALECT, "title": "ntkpipe study",
            **{k: v for k, v in root.items() if k != "title"}, "description": ROOT_DESCRIPTION,
            "patternProperties": {f"^{EXTENSION_PREFIX}": {"description": "ignored by ntkpipe: a place for YAML "
                                                                          "anchors used elsewhere in the file"}},
            "$defs": dict(sorted(defs.items()))})


def plain(text: str) -> str:
    """Docstring markup as plain text: Sphinx roles (``:mod:`ntkpipe.x```) and double backquotes to `x`."""
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")


def _plain_descriptions(node: Any) -> Any:
    """Every ``description`` of a schema as plain text (what an editor shows on hover)."""
    if isinstance(node, list):
        return [_plain_descriptions(v) for v in node]
    if not isinstance(node, dict):
        return node
    return {k: plain(inspect.cleandoc(v)) if k == "description" and isinstance(v, str) else _plain_descriptions(v)
            for k, v in node.items()}


def schema_text() -> str:
    """The schema as the committed file holds it (sorted keys, two-space indent, a final newline)."""
    return json.dumps(study_schema(), indent=2, ensure_ascii=False) + "\n"


def _described(schema: dict) -> dict:
    return {k: schema[k] for k in ("description", "default") if k in schema}


def _partial(node: Any) -> Any:
    """A copy of a schema with no required keys (and ``anyOf`` for ``oneOf``, since several members may
    match a partial mapping), its model references pointing at the models' partial copies."""
    if isinstance(node, list):
        return [_partial(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("required", "discriminator"):
            continue
        if key == "$ref" and value.removeprefix(REF) not in OWN:
            out[key] = value + OVERRIDE
        elif key == "properties":
            out[key] = {name: _partial(v) for name, v in value.items()}
        else:
            out["anyOf" if key == "oneOf" else key] = _partial(value)
    return out


# ------------------------------------------------------------------ measurements


def option_schema(option: Option) -> dict:
    kind = boolean() if option.kind is bool else {"type": OPTION_TYPES[option.kind]}
    out: dict[str, Any] = {"description": option.doc, **kind, "default": option.default}
    if option.low is not None:
        out["exclusiveMinimum" if option.open_low else "minimum"] = option.low
    if option.high is not None:
        out["exclusiveMaximum" if option.open_high else "maximum"] = option.high
    return out


def measurement_description(m: Measurement) -> str:
    """A measurement's doc, when it is taken and the variables it stores (for editors)."""
    variables = ", ".join(f"{v.name}({', '.join(v.dims)})" if v.dims else v.name for v in m.variables)
    return f"{m.doc} [{m.when}; stores {variables}]"


def _measurement_schema(defs: dict) -> dict:
    """A measure entry: a measurement's name, or a mapping of its name and its own options."""
    for m in REGISTRY.values():
        defs[f"measure.{m.name}"] = {
            "description": measurement_description(m), "type": "object", "additionalProperties": False,
            "required": ["name"],
            "properties": {"name": {"const": m.name}, **{o.name: option_schema(o) for o in m.options}}}
    names = {"anyOf": [{"const": m.name, "description": measurement_description(m)} for m in REGISTRY.values()]}
    by_name = [{"if": {"properties": {"name": {"const": m}}}, "then": {"$ref": f"{REF}measure.{m}"}} for m in REGISTRY]
    return {"description": "a measurement: its name, or {name: …, option: value} (ntkpipe measurements; "
                           "ntkpipe explain measure.NAME)",
            "anyOf": [{"type": "string", **names},
                      {"type": "object", "required": ["name"], "properties": {"name": names}, "allOf": by_name}]}


# ------------------------------------------------------------------ summaries


def _summary_schema(defs: dict) -> dict:
    """A summaries entry: its kind's own keys (the options model of its :data:`SUMMARY_KINDS` record)."""
    for name, record in SUMMARY_KINDS.items():
        node = record.options.model_json_schema(schema_generator=StudyJsonSchema)
        node.pop("title", None)
        node["properties"]["kind"] = {"const": name, "description": f"the summary kind: {name}"}
        defs[f"summary.{name}"] = node
    kinds = {"anyOf": [{"const": name, "description": summary_description(name)} for name in SUMMARY_KINDS]}
    by_kind = [{"if": {"properties": {"kind": {"const": k}}}, "then": {"$ref": f"{REF}summary.{k}"}}
               for k in SUMMARY_KINDS]
    return {"description": "a study-level summary: its name, kind and that kind's keys (ntkpipe explain "
                           "summaries.KIND)",
            "type": "object", "required": ["name", "kind"], "properties": {"kind": {"type": "string", **kinds}},
            "allOf": by_kind}


def summary_description(kind: str) -> str:
    """A summary kind's meaning: its options model's docstring."""
    return inspect.cleandoc(SUMMARY_KINDS[kind].options.__doc__ or "")


# ------------------------------------------------------------------ data sources


def _source_rules(data: dict) -> None:
    """Each ``source`` named with its doc; a key another source takes must stay at its default there."""
    data["properties"]["source"] = {
        "description": data["properties"]["source"]["description"], "type": "string",
        "anyOf": [{"const": name, "description": inspect.cleandoc(s.options.__doc__ or name)}
                  for name, s in SOURCES.items()]}
    data["allOf"] = [
        {"if": {"properties": {"source": {"const": name}}, "required": ["source"]},
         "then": {"properties": {key: {"const": info.default} for key, info in data_fields().items()
                                 if key not in s.keys and key in _source_keys()}}}
        for name, s in SOURCES.items()]


def data_fields() -> dict:
    return SWEEPABLE_SECTIONS["data"].model_fields


def _source_keys() -> set[str]:
    return {key for s in SOURCES.values() for key in s.keys}


# ------------------------------------------------------------------ sweeps


def _generator_schema() -> dict:
    number = {"type": "number"}
    three = {"type": "array", "prefixItems": [number, number, {"type": "integer", "minimum": 1}],
             "minItems": 3, "maxItems": 3}
    forms = {name: {"description": f"numpy.{name}(start, stop, count)" + (" (10^start … 10^stop)" if name == "logspace"
                                                                             else ""), **three}
             for name in ("logspace", "geomspace", "linspace")}
    forms["range"] = {"description": "integers start, start + step, … below stop", "type": "array",
                      "prefixItems": [{"type": "integer"}] * 3, "minItems": 3, "maxItems": 3}
    return {"description": "values made by a generator: {logspace: [e0, e1, n]} (10^e), {geomspace: [a, b, n]}, "
                           "{linspace: [a, b, n]} or {range: [start, stop, step]}",
            "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
            "properties": forms}


def _axis_item(path: tuple[str, ...]) -> dict:
    """What one value of the axis at ``path`` may be: a number for numeric keys (a scaling may still
    derive it), else the key's own type."""
    annotations = []
    candidates = [SWEEPABLE_SECTIONS[path[0]]] if path[0] != "seed" else []
    for key in path[1:]:
        found = [model.model_fields[key] for a in candidates for model in models_in(a) if key in model.model_fields]
        annotations = [f.annotation for f in found]
        candidates = annotations
    kind = field_kind(path)
    if kind in ("int", "float"):
        nullable = any(_admits_none(a) for a in annotations)
        return {"type": ["number", "null"] if nullable else "number"}
    if kind == "list":
        return {"type": ["array", "null"], "items": {"type": "number"}}
    schemas = [TypeAdapter(a).json_schema(schema_generator=StudyJsonSchema) for a in annotations]
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def _admits_none(annotation) -> bool:
    try:
        TypeAdapter(annotation).validate_python(None)
    except Exception:
        return False
    return True


def _field_description(path: tuple[str, ...]) -> str | None:
    if path == ("seed",):
        return StudySpec.model_fields["seed"].description
    candidates = [SWEEPABLE_SECTIONS[path[0]]]
    description = ""
    for key in path[1:]:
        found = [model.model_fields[key] for a in candidates for model in models_in(a) if key in model.model_fields]
        description = found[0].description if found else ""
        candidates = [f.annotation for f in found]
    return description


def _sweep_defs(props: dict) -> dict[str, dict]:
    """The sweep grammar: a node maps axes to values and combines sub-nodes."""
    generator = {"$ref": REF + "SweepGenerator"}
    axes = {name: {"description": f"{'.'.join(path)} ({_field_description(path)}): its values",
                   "anyOf": [{"type": "array", "minItems": 1, "items": _axis_item(path)}, generator]}
            for name, path in AXES.items()}
    axes["d"] = {"description": "the scale parameter d of the study's scaling: values for this sub-grid",
                 "anyOf": [{"type": "array", "minItems": 1, "items": {"type": "number"}}, generator]}
    nodes = {"type": "array", "minItems": 1, "items": {"$ref": REF + "SweepNode"}}
    overrides = {key: {"$ref": REF + "Variant/properties/" + key} for key in sweep.OVERRIDABLE}
    cases = {"description": "new axes whose values are labels, each a set of overrides: {axis: {label: {data: …, "
                            "model: …}}}; an axis named like a spec axis also sets it to the label",
             "type": "object", "minProperties": 1,
             "propertyNames": {"pattern": sweep.CASE_NAME.pattern, "not": {"enum": list(sweep.RESERVED_NAMES)}},
             "additionalProperties": {"type": "object", "minProperties": 1, "additionalProperties": {
                 "description": f"the keys this case overrides ({', '.join(sweep.OVERRIDABLE)})", "type": "object",
                 "additionalProperties": False, "properties": overrides}}}
    sweep_doc = inspect.getdoc(sweep)
    assert sweep_doc is not None, "ntkpipe.lang.sweep documents the sweep grammar"
    node_doc = sweep_doc.split("\n\n")[1]
    return {
        "SweepGenerator": _generator_schema(),
        "SweepNode": {
            "description": props["sweep"].get("description", "") + "\n\n" + node_doc,
            "type": "object", "additionalProperties": False,
            "properties": {
                **axes,
                "zip": {"description": "axes varied together, {axis: values} of equal lengths", "type": "object",
                        "minProperties": 1, "additionalProperties": False, "properties": copy.deepcopy(axes)},
                "union": {"description": "the concatenation of sub-grids (e.g. a σ range per depth)", **nodes},
                "product": {"description": "the product of sub-nodes", **nodes},
                "cases": cases}},
    }
