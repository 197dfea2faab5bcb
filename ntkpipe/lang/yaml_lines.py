"""YAML reading that keeps the line of every key and reads numbers the YAML 1.2 way.

PyYAML implements YAML 1.1, where ``1e-3`` (no dot) is a *string*; :class:`Loader` adds the 1.2
float pattern so that ``lr: 1e-3`` is the float 0.001.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

KeyPath = tuple[str | int, ...]


class Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats (``1e-3``, ``1E+5``, ``.5``) and no duplicate keys."""


_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _first in "-+0123456789.":
    Loader.yaml_implicit_resolvers[_first] = [
        (tag, regexp) for tag, regexp in Loader.yaml_implicit_resolvers.get(_first, [])
        if tag != "tag:yaml.org,2002:float"
    ]
Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


class LibyamlLoader(yaml.CSafeLoader):
    """:class:`Loader`'s resolvers over libyaml's parser (tens of times faster than PyYAML's own), used
    to compose a document that parses; a syntax error is reported by :class:`Loader`, in its words."""


LibyamlLoader.yaml_implicit_resolvers = Loader.yaml_implicit_resolvers


class YamlSyntaxError(ValueError):
    """The file is not UTF-8 text or not valid YAML; ``line`` is 1-based, ``key_path`` the key being
    read there (``()``: the top level)."""

    def __init__(self, message: str, line: int | None, key_path: KeyPath = ()):
        super().__init__(message)
        self.line = line
        self.key_path = key_path


def load_with_lines(path: str | Path) -> tuple[object, dict[KeyPath, int]]:
    """Parse ``path``; return the data and a map from key path to its 1-based line. An empty file (or
    one of comments only) is ``(None, {})``."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        readable = raw.decode("utf-8", errors="replace")
        raise YamlSyntaxError(f"the file is not UTF-8 text (byte 0x{raw[err.start]:02x} cannot be decoded); "
                              "save it as UTF-8", line, _key_path_at(readable, line)) from None
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else None
        raise YamlSyntaxError(f"YAML syntax error: {err.problem or err}", line, _key_path_at(text, line)) from None
    if node is None:
        return None, {}
    lines: dict[KeyPath, int] = {(): node.start_mark.line + 1}
    _record_lines(node, (), lines)
    loader = Loader(text)
    try:
        data = loader.construct_document(node)
    finally:
        loader.dispose()
    return data, lines


def _compose(text: str):
    """The document's node tree: by libyaml where PyYAML has it, else (or on an error) by :class:`Loader`."""
    if hasattr(yaml, "CSafeLoader"):
        try:
            return yaml.compose(text, Loader=LibyamlLoader)
        except yaml.YAMLError:
            pass  # the same error, with the line and words of PyYAML's parser, below
    return yaml.compose(text, Loader=Loader)


def _record_lines(node, prefix: KeyPath, lines: dict[KeyPath, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise YamlSyntaxError(f"YAML syntax error: duplicate key {key!r}; write each key once",
                                      key_node.start_mark.line + 1, prefix + (key,))
            seen.add(key)
            lines[prefix + (key,)] = key_node.start_mark.line + 1
            _record_lines(value_node, prefix + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[prefix + (i,)] = item.start_mark.line + 1
            _record_lines(item, prefix + (i,), lines)


def _key_path_at(text: str, line: int | None) -> KeyPath:
    """The key path being read at 1-based ``line`` (through its last key), from the YAML events up to
    there or up to a syntax error, whichever comes first."""
    frames: list[list] = []  # [is_mapping, key or index, expecting a key]

    def enter_item() -> None:
        if frames and frames[-1][0]:
            frames[-1][2] = not frames[-1][2]
        elif frames:
            frames[-1][1] = 0 if frames[-1][1] is None else frames[-1][1] + 1

    try:
        for event in yaml.parse(text, Loader=Loader):
            if line is not None and event.start_mark.line + 1 > line:
                break
            if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
                if frames and frames[-1][0] and frames[-1][2]:
                    frames[-1][1] = getattr(event, "value", None)
                enter_item()
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if frames and not frames[-1][0]:
                    enter_item()
                frames.append([isinstance(event, yaml.MappingStartEvent), None, True])
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                frames.pop()
                if frames and frames[-1][0]:
                    frames[-1][2] = True
    except yaml.YAMLError:
        pass
    return tuple(f[1] for f in frames if f[1] is not None)


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """Line of ``path`` or of its nearest recorded ancestor."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None
