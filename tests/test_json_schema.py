"""The JSON Schema of a study (``ntkpipe schema``, committed as schema/study.schema.json) against the
validator: every spec ``ntkpipe validate`` accepts passes the schema (shipped specs, each of their
variants, generated studies); specs with an unknown key, a wrong measurement option or an unknown
figure kind fail both."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkpipe.cli import main
from ntkpipe.errors import SpecError
from ntkpipe.lang.yaml_lines import load_with_lines
from ntkpipe.study.checks import SKIP_CHECKSUMS
from ntkpipe.study.json_schema import SCHEMA_LINE, SCHEMA_PATH, schema_text, study_schema
from ntkpipe.study.load import _merge_variant, load_study, variant_names
from tests.conftest import REPO
from tests.strategies import valid_studies
from tests.test_generated_studies import write_fake_image_data

SPECS = sorted((REPO / "specs").glob("*.yaml"))
VALIDATOR = jsonschema.Draft202012Validator(study_schema(), format_checker=jsonschema.FormatChecker())


def schema_errors(raw) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message[:300]}"
            for e in VALIDATOR.iter_errors(raw)]


def merged_variants(path: Path) -> dict[str, dict]:
    """Each variant of a spec as the loader merges it (the variant's overrides over the spec)."""
    raw, lines = load_with_lines(path)
    out = {}
    for variant in variant_names(path):
        merged, _ = _merge_variant(raw, lines, variant, [])
        out[variant] = merged
    return out


def test_the_committed_schema_is_the_generated_one():
    committed = (REPO / SCHEMA_PATH).read_text(encoding="utf-8")
    assert committed == schema_text(), f"{SCHEMA_PATH} is out of date; regenerate it: ntkpipe schema > {SCHEMA_PATH}"


def test_the_schema_is_a_draft_2020_12_schema(capsys):
    jsonschema.Draft202012Validator.check_schema(study_schema())
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == schema_text()


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_every_shipped_spec_names_the_schema_and_passes_it(spec):
    first = spec.read_text(encoding="utf-8").splitlines()[0]
    assert first == SCHEMA_LINE, f"{spec.name}: the first line must be {SCHEMA_LINE!r}"
    target = first.split("$schema=", 1)[1]
    assert (spec.parent / target).resolve() == (REPO / SCHEMA_PATH).resolve()
    for variant, merged in merged_variants(spec).items():
        assert schema_errors(merged) == [], f"{spec.name} [{variant}]"


@pytest.fixture(scope="module")
def image_dirs(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SKIP_CHECKSUMS, "1")  # the fake files are not the official ones
        yield write_fake_image_data(tmp_path_factory.mktemp("image-data"))


@settings(max_examples=settings().max_examples // 2)  # no training, a few validations each (ci: 25)
@given(data=st.data())
def test_a_generated_study_that_validates_passes_the_schema(data, image_dirs, tmp_path_factory):
    """validate accepts ⇒ the schema accepts: the file as written and each of its variants merged."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    drawn = data.draw(valid_studies(directory, image_dirs, name="gen"), label="valid study")
    path = directory / "gen.yaml"
    path.write_text(yaml.safe_dump(drawn.spec, sort_keys=False))
    load_study(path)  # the strategy drew it valid
    raw, _ = load_with_lines(path)
    assert schema_errors(raw) == []
    for variant, merged in merged_variants(path).items():
        assert schema_errors(merged) == [], variant


def _unknown_key(spec: dict) -> None:
    spec["train"]["optimizer"]["learning_rate"] = 0.1


def _wrong_option(spec: dict) -> None:
    spec["measure"].append({"name": "energy_concentration", "top": 10})


def _option_out_of_range(spec: dict) -> None:
    spec["measure"].append({"name": "t_align", "threshold": 2.0})


def _unknown_figure_kind(spec: dict) -> None:
    spec["figures"] = [{"name": "curves", "kind": "line", "variables": ["loss"]}]


def _unknown_sweep_axis(spec: dict) -> None:
    spec["sweep"] = {"sigmaa": [0.1, 1.0]}


def _key_of_another_source(spec: dict) -> None:
    spec["data"]["image_size"] = 4


@pytest.mark.parametrize("mutate", [_unknown_key, _wrong_option, _option_out_of_range, _unknown_figure_kind,
                                    _unknown_sweep_axis, _key_of_another_source], ids=lambda f: f.__name__[1:])
def test_invalid_specs_are_refused_by_both(mutate, tmp_path):
    raw, _ = load_with_lines(REPO / "specs" / "two_layer_dynamics.yaml")
    spec = copy.deepcopy(raw)
    mutate(spec)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(SpecError):
        load_study(path)
    assert schema_errors(spec), "the schema accepted it"


def test_yaml_quirks_the_loader_accepts_pass_the_schema_as_an_editor_reads_them(tmp_path):
    """ntkpipe reads ``1e-3`` as a float (YAML 1.2) and ``off`` as a boolean (YAML 1.1); an editor reads
    YAML 1.2, where ``off`` is a string: the schema takes both readings."""
    text = (REPO / "specs" / "two_layer_dynamics.yaml").read_text(encoding="utf-8")
    text = text.replace("model:\n", "model:\n  bias: off\n", 1).replace("lr: 0.005", "lr: 1e-3", 1)
    path = tmp_path / "quirks.yaml"
    path.write_text(text, encoding="utf-8")
    load_study(path)
    raw, _ = load_with_lines(path)
    assert raw["model"]["bias"] is False and raw["train"]["optimizer"]["lr"] == 0.001
    assert schema_errors(raw) == []
    as_an_editor_reads_it = copy.deepcopy(raw)
    as_an_editor_reads_it["model"]["bias"] = "off"
    assert schema_errors(as_an_editor_reads_it) == []
    as_an_editor_reads_it["model"]["bias"] = "maybe"
    assert schema_errors(as_an_editor_reads_it)


def test_extension_keys_and_yaml_booleans_in_a_sweep(tmp_path):
    """Top-level ``x-…`` keys (YAML anchors) are ignored by the loader and allowed by the schema; a sweep
    over a boolean axis takes the YAML 1.1 words as an editor reads them."""
    text = (REPO / "specs" / "two_layer_dynamics.yaml").read_text(encoding="utf-8")
    text += "\nx-shared: &shared {lr: 0.005}\n"
    path = tmp_path / "extended.yaml"
    path.write_text(text, encoding="utf-8")
    load_study(path)
    raw, _ = load_with_lines(path)
    assert schema_errors(raw) == []
    raw["sweep"] = {"bias": ["off", "on"]}
    assert schema_errors(raw) == []
    raw["sweep"] = {"bias": ["maybe"]}
    assert schema_errors(raw)
