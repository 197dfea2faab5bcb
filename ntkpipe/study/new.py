"""``ntkpipe new NAME [--from STUDY]``: a new study file to edit, valid as written.

Without ``--from`` the file is a small working study (a two-layer ReLU net on two classes of the
built-in digits, its loss, NTK norm and alignment over time, two seeds, one figure), each section
under a comment saying what it is (the section's description in the language); the optional
sections it leaves out are listed as comments with the command that explains them. With ``--from``
it is a copy of a shipped study's file under the new name. Either way its first line names the JSON
Schema, so an editor with the YAML language server checks it as one types.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import yaml

from ntkpipe.errors import NtkpipeError
from ntkpipe.lang.axes import suggest
from ntkpipe.lang.schema import StudySpec
from ntkpipe.study.json_schema import SCHEMA_LINE
from ntkpipe.study.load import NAME_PATTERN, RESERVED_NAMES, SPEC_SUFFIX

STARTER: dict[str, object] = {
    "description": "A two-layer ReLU net on digits 0 vs 1: loss, NTK norm and kernel alignment over training",
    "seed": 0,
    "data": {"source": "digits", "classes": [0, 1], "n_train": 200, "n_test": 100},
    "model": {"depth": 2, "width": 100, "activation": "relu", "sigma": 0.1},
    "train": {"optimizer": {"name": "gd", "lr": 0.05}, "max_time": 20},
    "measure": ["loss", "test_loss", "kernel_norm", "alignment"],
    "sweep": {"seed": [0, 1]},
    "figures": [{"name": "dynamics", "kind": "time_series", "variables": ["loss", "kernel_norm", "alignment"],
                 "where": {"seed": 0}, "title": "Loss, NTK norm and alignment A(t)"}],
}
"""The study ``ntkpipe new`` writes (small: it runs in seconds on a laptop)."""


class NewStudyError(NtkpipeError):
    """A name that cannot be a study, a study that exists, or an unknown ``--from`` study."""


def study_path(name: str, specs: Path) -> Path:
    """``specs/<name>.yaml`` for a valid new study name; NewStudyError otherwise."""
    if not NAME_PATTERN.match(name):
        raise NewStudyError(f"ntkpipe new: {name!r} cannot be a study name (it names results/<name>/): use lowercase "
                            "letters, digits and underscores, starting with a letter, e.g. "
                            f"{_name_like(name)!r}")
    if name in RESERVED_NAMES:
        raise NewStudyError(f"ntkpipe new: {name!r} is reserved for results/{name}/; choose another name")
    path = specs / f"{name}{SPEC_SUFFIX}"
    if path.exists():
        raise NewStudyError(f"ntkpipe new: {path} exists; choose another name or edit it (nothing was written)")
    return path


def _name_like(name: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_").lstrip("0123456789_") or "my_study"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), 100, initial_indent="# ", subsequent_indent="# ")


def starter_text(name: str) -> str:
    """The commented starter study named ``name``."""
    lines = [SCHEMA_LINE,
             f"# {name}: a new ntkpipe study. Every key is explained in docs/language.md and by `ntkpipe explain KEY`",
             f"# (e.g. `ntkpipe explain measure`); check it with `ntkpipe validate specs/{name}.yaml` and run it with",
             f"# `snakemake --cores 2 --config studies={name}`.", ""]
    for section, field in StudySpec.model_fields.items():
        meaning = f"{section}: {field.description}"
        if section in STARTER:
            value = STARTER[section]
            body = yaml.safe_dump({section: value}, sort_keys=False, allow_unicode=True, width=100,
                                  default_flow_style=None if isinstance(value, (dict, list)) else False)
            lines += [*_comment(meaning), *body.rstrip().splitlines(), ""]
        else:
            lines += [*_comment(f"{meaning} (none here; ntkpipe explain {section})"), ""]
    return "\n".join(lines).rstrip() + "\n"


def copied_text(source: Path) -> str:
    """A shipped study's file, its first line the schema line."""
    text = source.read_text(encoding="utf-8")
    return text if text.startswith(SCHEMA_LINE + "\n") else f"{SCHEMA_LINE}\n{text}"


def new_study(name: str, specs: Path, origin: str | None = None) -> Path:
    """Write ``specs/<name>.yaml`` (the starter, or a copy of the study ``origin``); its path."""
    path = study_path(name, specs)
    if origin is None:
        text = starter_text(name)
    else:
        source = Path(origin) if origin.endswith(SPEC_SUFFIX) else specs / f"{origin}{SPEC_SUFFIX}"
        if not source.is_file():
            shipped = sorted(p.stem for p in specs.glob(f"*{SPEC_SUFFIX}"))
            raise NewStudyError(f"ntkpipe new: no study {origin!r} to copy ({source} does not exist)"
                                f"{suggest(origin, shipped)}; the studies in {specs}/ are {', '.join(shipped) or 'none'}")
        text = copied_text(source)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
