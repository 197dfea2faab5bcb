"""The data-source registry: every record agrees with the data it loads, and the ``data:`` section of the
language is composed from the records without changing a run's config."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from ntkpipe.data import input_shape, load_dataset, output_count
from ntkpipe.data.arrays import class_targets
from ntkpipe.data.dataset import output_classes
from ntkpipe.data.file_checks import data_file_problems
from ntkpipe.data.sources import SOURCES, Source
from ntkpipe.data.sources.linear_teacher import LinearTeacherOptions
from ntkpipe.lang import schema
from ntkpipe.lang.schema import DataSpec
from ntkpipe.strict import Strict
from tests.test_data_files import mnist_arrays, write_cifar, write_mnist


@pytest.fixture(scope="module")
def image_dirs(tmp_path_factory) -> dict[str, str]:
    """Tiny MNIST and CIFAR-10 directories in the official formats: source → directory."""
    root = tmp_path_factory.mktemp("images")
    write_mnist(root / "mnist", mnist_arrays(n_train=20, n_test=10))
    write_cifar(root / "cifar10", sizes=(4, 4, 4, 4, 4), n_test=6)
    return {"mnist": str(root / "mnist"), "cifar10": str(root / "cifar10")}


def example(name: str, image_dirs: dict[str, str], **extra) -> DataSpec:
    record = SOURCES[name]
    path = {"path": image_dirs[record.files.name]} if record.files is not None else {}
    return DataSpec.model_validate({"source": name, **record.example, **path, **extra})


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_record_agrees_with_the_data_it_loads(name, image_dirs):
    """The shape and outputs a record declares (used without loading: resources, model building,
    validation) are those of the arrays it loads; its example is valid and its files pass their checks."""
    record = SOURCES[name]
    spec = example(name, image_dirs)
    shape = record.input_shape(spec)
    direction = np.random.default_rng(0).standard_normal(shape) if name == "nad" else None
    data = load_dataset(spec, direction)
    assert data.x_train.shape == (spec.n_train, *shape) and data.x_test.shape == (spec.n_test, *shape)
    assert input_shape(spec) == data.input_shape == tuple(shape)
    assert data.y_train.shape == (spec.n_train, output_count(spec)) and data.y_test.shape[1] == output_count(spec)
    assert data.x_train.dtype == data.y_train.dtype == np.float64
    assert np.isfinite(data.x_all).all()
    assert data_file_problems(spec, verify_checksums=False) == []
    if record.class_count:
        assert data.class_labels == {"classes": list(range(record.class_count))}
    if record.files is not None:
        native = record.input_shape(spec.model_copy(update={"image_size": None}))
        assert native == record.files.image == load_dataset(spec.model_copy(update={"image_size": None})).input_shape


def test_outputs_that_stand_for_classes_are_named_by_them(image_dirs):
    """One-hot outputs of the digit sources are digit k for class k (the kept classes in order), of
    CIFAR-10 its class names; ±1 labels (two classes, two groups), teachers and mixture clusters none.
    Output c's name is that of the class whose examples have target 1 in column c."""
    spec = example("digits", image_dirs, classes=[7, 2, 4], n_train=30)
    assert output_classes(spec) == ["digit 7", "digit 2", "digit 4"]
    assert load_dataset(spec).class_labels == {"classes": [7, 2, 4]}
    np.testing.assert_array_equal(class_targets(np.array([7, 2, 4]), [7, 2, 4]), np.eye(3))
    assert output_classes(spec.model_copy(update={"classes": None}))[3] == "digit 3"
    assert output_classes(example("cifar10", image_dirs, classes=[0, 3, 9])) == ["airplane", "cat", "truck"]
    assert output_classes(example("mnist", image_dirs, classes=[1, 2, 3])) == ["digit 1", "digit 2", "digit 3"]
    assert output_classes(example("digits", image_dirs, classes=[0, 1])) == []
    assert output_classes(example("digits", image_dirs, labels={"kind": "two_groups"})) == []
    assert output_classes(example("gaussian_mixture", image_dirs)) == []
    assert output_classes(example("linear_teacher", image_dirs, teachers=3)) == []


@pytest.mark.parametrize("name", [n for n, s in SOURCES.items() if "image_size" in s.keys])
def test_image_size_and_grayscale_set_the_declared_shape(name, image_dirs):
    spec = example(name, image_dirs, image_size=5, **({"grayscale": True} if "grayscale" in SOURCES[name].keys else {}))
    assert load_dataset(spec).input_shape == input_shape(spec) == (5, 5, 1)


def test_a_run_config_keeps_its_data_keys():
    """Run ids hash the dumped config, so composing DataSpec from the records keeps exactly the keys it had;
    an option added later must be left out at its default (``exclude_if``), or every run id changes."""
    dumped = DataSpec.model_validate({"source": "linear_teacher", "dim": 2, "n_train": 1}).model_dump()
    assert set(dumped) == {"source", "n_train", "n_test", "dim", "teacher_scale", "classes", "gamma", "path",
                           "image_size", "grayscale", "shape", "directions", "margin", "noise", "half_margin",
                           "seed", "labels"}


def test_a_key_only_applies_to_the_sources_that_declare_it():
    for key, sources in schema.SOURCE_FIELDS.items():
        assert sources == tuple(n for n, s in SOURCES.items() if key in s.keys)
    with pytest.raises(ValidationError, match="'gamma' does not apply to source 'nad'"):
        DataSpec.model_validate({"source": "nad", "shape": [3], "directions": {"stage": "s", "nad_index": 1},
                                 "n_train": 2, "gamma": 0.5})


def test_options_that_sources_share_are_declared_alike(monkeypatch):
    class OtherDim(Strict):
        dim: int | None = None  # no ge=1: not the shared declaration

    class TakesNTrain(Strict):
        n_train: int = 3

    base = SOURCES["linear_teacher"]
    assert base.options is LinearTeacherOptions
    monkeypatch.setitem(SOURCES, "other", Source("other", OtherDim, base.load, base.input_shape, base.outputs, {}))
    with pytest.raises(TypeError, match="sources 'linear_teacher' and 'other' declare the data key 'dim' differently"):
        schema._source_options()
    monkeypatch.setitem(SOURCES, "other", Source("other", TakesNTrain, base.load, base.input_shape, base.outputs, {}))
    with pytest.raises(TypeError, match="source 'other' declares 'n_train', which every source takes"):
        schema._source_options()


def test_linear_teacher_singular_values_are_those_of_the_target_map():
    """``singular_values``: orthonormal β_c and y_c = s·s_c β_cᵀx, so on whitened inputs Σ_yx = Yᵀx/P
    has singular values s·s_c exactly (silent-alignment App. H); the rules name the key to fix."""
    spec = DataSpec.model_validate({"source": "linear_teacher", "dim": 6, "n_train": 40, "gamma": 0.0, "teachers": 3,
                                    "teacher_scale": 2.0, "singular_values": [1.0, 0.5, 0.25]})
    data = load_dataset(spec)
    x, y = data.flat_train, data.y_train
    np.testing.assert_allclose(x.T @ x / len(x), np.eye(6), atol=1e-10)
    np.testing.assert_allclose(np.linalg.svd(y.T @ x / len(x), compute_uv=False), [2.0, 1.0, 0.5], rtol=1e-10)
    np.testing.assert_allclose(data.beta.T @ data.beta, np.diag([1.0, 0.25, 0.0625]), atol=1e-12)
    assert "singular_values" not in DataSpec.model_validate({"source": "linear_teacher", "dim": 2,
                                                             "n_train": 1}).model_dump()
    for extra, match in (({"singular_values": [1.0, 0.5]}, "one per teacher"),
                         ({"inputs": "line"}, "inputs: line"),
                         ({"dim": 2}, "do not fit in dim"),
                         ({"singular_values": [1.0, 0.0, 0.5]}, "positive")):
        with pytest.raises(ValidationError, match=match):
            DataSpec.model_validate({"source": "linear_teacher", "dim": 6, "n_train": 4, "teachers": 3,
                                     "singular_values": [1.0, 0.5, 0.25], **extra})
