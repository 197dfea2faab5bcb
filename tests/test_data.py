"""Synthetic teachers, whitening, digits and label construction."""

from __future__ import annotations

import numpy as np
import pytest

from ntkpipe.data import class_targets, eigenvector_sign_targets, load_dataset, output_count, partial_whitening_map
from ntkpipe.spec.schema import DataSpec


def teacher(**kw) -> DataSpec:
    return DataSpec.model_validate({"source": "linear_teacher", "dim": 6, "n_train": 20, "n_test": 5, **kw})


def test_exact_whitening_and_teacher():
    data = load_dataset(teacher(gamma=0.0, teacher_scale=2.0))
    np.testing.assert_allclose(data.x_train.T @ data.x_train / 20, np.eye(6), atol=1e-12)
    assert np.linalg.norm(data.beta) == pytest.approx(1.0)
    np.testing.assert_allclose(data.y_train[:, 0], 2.0 * data.x_train @ data.beta)
    np.testing.assert_allclose(data.y_test[:, 0], 2.0 * data.x_test @ data.beta)


def test_whitening_on_the_span_when_p_below_d():
    x = np.random.default_rng(0).standard_normal((4, 10))
    xw = x @ partial_whitening_map(x, 0.0)
    cov = xw.T @ xw / 4
    np.testing.assert_allclose(cov @ cov, cov, atol=1e-12)  # a projector
    assert np.trace(cov) == pytest.approx(4.0)


@pytest.mark.parametrize("gamma", [0.25, 0.5, 1.0])
def test_partial_whitening_raises_singular_values_to_gamma(gamma):
    x = np.random.default_rng(1).standard_normal((30, 5)) * np.array([5.0, 2.0, 1.0, 0.5, 0.1])
    s = np.linalg.svd(x, compute_uv=False)
    s_gamma = np.linalg.svd(x @ partial_whitening_map(x, gamma), compute_uv=False)
    np.testing.assert_allclose(s_gamma / s_gamma[0], (s / s[0]) ** gamma, rtol=1e-10)
    assert np.mean(s_gamma**2 / 30) == pytest.approx(1.0)  # eigenvalues of XᵀX/P average 1


def test_same_seed_same_data_and_new_seed_new_data():
    a, b, c = load_dataset(teacher()), load_dataset(teacher()), load_dataset(teacher(seed=1))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert not np.allclose(a.x_train, c.x_train)


def test_two_class_digits():
    spec = DataSpec.model_validate({"source": "digits", "n_train": 100, "n_test": 50, "classes": [0, 1]})
    data = load_dataset(spec)
    assert data.x_train.shape == (100, 8, 8, 1) and data.y_test.shape == (50, 1)
    assert set(np.unique(data.y_train)) == {-1.0, 1.0}
    assert abs(data.x_train.mean(0)).max() < 1e-12  # train pixel means removed
    assert np.mean(data.x_train**2) == pytest.approx(1.0)  # unit per-coordinate variance on average
    assert output_count(spec) == 1


def test_ten_class_digits_are_one_hot():
    spec = DataSpec.model_validate({"source": "digits", "n_train": 200, "n_test": 0})
    data = load_dataset(spec)
    assert data.y_train.shape == (200, 10) and np.all(data.y_train.sum(1) == 1)
    assert output_count(spec) == 10


def test_digits_too_many_points_is_a_clear_error():
    spec = DataSpec.model_validate({"source": "digits", "n_train": 300, "n_test": 100, "classes": [0, 1]})
    with pytest.raises(ValueError, match="exceeds the 360 digits"):
        load_dataset(spec)


def test_class_targets_order():
    np.testing.assert_array_equal(class_targets(np.array([3, 7, 3]), [3, 7])[:, 0], [-1, 1, -1])


def test_eigenvector_sign_targets():
    vectors = np.array([[0.5, -0.2], [0.5, 0.0], [0.5, 0.9]])
    np.testing.assert_array_equal(eigenvector_sign_targets(vectors, 2)[:, 0], [-1, 1, 1])


def test_local_mnist_and_cifar_through_a_spec(tmp_path, monkeypatch):
    """Tiny files in the official formats: validated before running, then loaded, class-filtered,
    standardized and whitened like the built-in data."""
    from ntkpipe.data.file_checks import clear_data_file_cache
    from ntkpipe.errors import SpecError
    from ntkpipe.study.load import load_study
    from tests.test_data_files import mnist_arrays, write_cifar, write_mnist

    arrays = mnist_arrays(n_train=40, n_test=20)
    arrays["y_train"][:] = np.arange(40) % 2
    arrays["y_test"][:] = np.arange(20) % 2
    write_mnist(tmp_path / "mnist", arrays, gz=True)
    write_cifar(tmp_path / "cifar10", sizes=(8, 8, 8, 8, 8), n_test=10)
    monkeypatch.setenv("NTKPIPE_DATA", str(tmp_path))
    clear_data_file_cache()
    spec_path = tmp_path / "local.yaml"
    spec_path.write_text(
        "data: {source: mnist, classes: [0, 1], n_train: 16, n_test: 8, gamma: 0.0}\n"
        "model: {depth: 2, width: 4}\n"
        "train: {optimizer: {name: gd, lr: 0.1}, steps: 1}\n"
        "measure: [loss]\n")
    with pytest.raises(SpecError, match="md5"):  # tiny files are not the official ones
        load_study(spec_path)
    monkeypatch.setenv("NTKPIPE_SKIP_CHECKSUMS", "1")
    run = load_study(spec_path).runs[0]
    data = load_dataset(run.data)
    assert data.x_train.shape == (16, 28, 28, 1) and data.y_test.shape == (8, 1)
    gram = data.flat_train.T @ data.flat_train / 16
    np.testing.assert_allclose(gram @ gram, gram, atol=1e-10)  # whitened on the span (P < D)
    too_many = spec_path.read_text().replace("n_train: 16", "n_train: 45")
    spec_path.write_text(too_many)
    with pytest.raises(SpecError, match="exceeds the 40 train images"):
        load_study(spec_path)
    cifar = load_dataset(DataSpec.model_validate({"source": "cifar10", "n_train": 30, "n_test": 10}))
    assert cifar.x_train.shape == (30, 32, 32, 3) and cifar.y_train.shape == (30, 10)


def test_images_keep_their_shape_and_resize():
    spec = DataSpec.model_validate({"source": "digits", "n_train": 30, "n_test": 10, "image_size": 16,
                                    "classes": [0, 1]})
    data = load_dataset(spec)
    assert data.x_train.shape == (30, 16, 16, 1) and data.input_shape == (16, 16, 1)
    assert data.flat_train.shape == (30, 256)
    from ntkpipe.data.images import grayscale, resize

    rng = np.random.default_rng(0)
    constant = np.full((2, 8, 8, 3), 0.25)
    np.testing.assert_allclose(resize(constant, 16), 0.25)  # interpolation keeps a constant image
    ramp = np.broadcast_to(np.arange(8.0)[None, None, :, None], (1, 8, 8, 1))
    assert np.all(np.diff(resize(ramp, 16)[0, 0, :, 0]) >= 0)  # and a monotone ramp monotone
    rgb = rng.random((3, 4, 4, 3))
    np.testing.assert_allclose(grayscale(rgb)[..., 0], 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2])


def test_two_group_labels():
    """Classes 0 and 1 are +1 and class 7 is −1: about two thirds of the ~540 such digits are +1."""
    spec = DataSpec.model_validate({"source": "digits", "n_train": 300, "n_test": 200,
                                    "labels": {"kind": "two_groups", "groups": [[0, 1], [7]]}})
    data = load_dataset(spec)
    y = np.concatenate([data.y_train, data.y_test])[:, 0]
    assert set(np.unique(y)) == {-1.0, 1.0} and output_count(spec) == 1
    assert np.mean(y == 1.0) == pytest.approx(2 / 3, abs=0.05)
    with pytest.raises(ValueError, match=r"exceeds the 539 digits of classes \[0, 1, 7\]"):  # only those are kept
        load_dataset(spec.model_copy(update={"n_train": 400, "n_test": 200}))
