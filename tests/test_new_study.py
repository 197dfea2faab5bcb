"""``ntkpipe new NAME [--from STUDY]``: the written study is valid as written (``ntkpipe validate`` and
the JSON Schema), commented section by section; an existing spec is never overwritten; ``--from``
copies a shipped study; a bad name or an unknown study is a clear error."""

from __future__ import annotations

import shutil

import jsonschema
import pytest

from ntkpipe.cli import main
from ntkpipe.lang.schema import StudySpec
from ntkpipe.lang.yaml_lines import load_with_lines
from ntkpipe.study.json_schema import SCHEMA_LINE, study_schema
from ntkpipe.study.load import load_study
from tests.conftest import REPO


def schema_errors(path) -> list[str]:
    raw, _ = load_with_lines(path)
    return [e.message for e in jsonschema.Draft202012Validator(study_schema()).iter_errors(raw)]


def test_a_new_study_is_commented_and_valid_as_written(tmp_path, capsys):
    specs = tmp_path / "specs"
    assert main(["new", "my_study", "--specs", str(specs)]) == 0
    path = specs / "my_study.yaml"
    assert str(path) in capsys.readouterr().out
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == SCHEMA_LINE
    for section in StudySpec.model_fields:
        assert f"\n# {section}: " in text, f"no comment says what {section} is"
    study = load_study(path)
    assert len(study.runs) == 2 and study.name == "my_study"
    assert schema_errors(path) == []
    assert main(["validate", str(path)]) == 0


def test_an_existing_spec_is_not_overwritten(tmp_path, capsys):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "mine.yaml").write_text("# my work\n")
    assert main(["new", "mine", "--specs", str(specs)]) == 1
    err = capsys.readouterr().err
    assert "exists" in err and "nothing was written" in err and "Traceback" not in err
    assert (specs / "mine.yaml").read_text() == "# my work\n"


def test_from_copies_a_shipped_study_under_the_new_name(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(REPO / "specs" / "two_layer_dynamics.yaml", specs)
    assert main(["new", "my_dynamics", "--from", "two_layer_dynamics", "--specs", str(specs)]) == 0
    copy = specs / "my_dynamics.yaml"
    assert copy.read_text() == (specs / "two_layer_dynamics.yaml").read_text()
    assert load_study(copy).name == "my_dynamics"
    assert schema_errors(copy) == []


@pytest.mark.parametrize(("args", "message"), [
    (["new", "My-Study"], "'My-Study' cannot be a study name"),
    (["new", "2nd"], "cannot be a study name"),
    (["new", "runs"], "'runs' is reserved"),
    (["new", "mine", "--from", "depth_scalin"], "no study 'depth_scalin' to copy"),
])
def test_a_bad_name_is_a_clear_error(args, message, tmp_path, capsys):
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(REPO / "specs" / "depth_scaling.yaml", specs)
    assert main([*args, "--specs", str(specs)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert sorted(p.name for p in specs.iterdir()) == ["depth_scaling.yaml"]
    if "--from" in args:
        assert "did you mean 'depth_scaling'?" in err
