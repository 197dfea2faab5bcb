"""Synthetic teachers, whitening, digits and label construction."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ntkpipe.data import class_targets, eigenvector_sign_targets, load_dataset, output_count, partial_whitening_map
from ntkpipe.lang.schema import DataSpec


def teacher(**kw) -> DataSpec:
    return DataSpec.model_validate({"source": "linear_teacher", "dim": 6, "n_train": 20, "n_test": 5, **kw})


def test_exact_whitening_and_teacher():
    data = load_dataset(teacher(gamma=0.0, teacher_scale=2.0))
    np.testing.assert_allclose(data.x_train.T @ data.x_train / 20, np.eye(6), atol=1e-12)
    assert data.beta.shape == (6, 1) and np.linalg.norm(data.beta) == pytest.approx(1.0)
    np.testing.assert_allclose(data.y_train, 2.0 * data.x_train @ data.beta)
    np.testing.assert_allclose(data.y_test, 2.0 * data.x_test @ data.beta)


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


def test_digits_pool_is_scikit_learns_load_digits():
    """The pool read from scikit-learn's bundled file is ``load_digits()``: images / 16, integer targets."""
    from sklearn.datasets import load_digits

    from ntkpipe.data.digits import digits_pool

    x, labels = digits_pool()
    bunch = load_digits()
    np.testing.assert_array_equal(x[..., 0] * 16.0, bunch.images)
    np.testing.assert_array_equal(labels, bunch.target)
    assert x.dtype == np.float64 and x.shape == (1797, 8, 8, 1) and not x.flags.writeable


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
    assert set(np.unique(data.y_train)) == {0.0, 1.0}  # "10-hot" targets (kernel-alignment App. E.2)
    assert output_count(spec) == 10


def test_few_digits_have_a_target_column_per_output():
    """11 digits (seed 2) hold 9 of the 10 classes: the targets are still one-hot over all 10 classes,
    one column per network output, with class c in column c (found by tests/test_generated_studies.py)."""
    spec = DataSpec.model_validate({"source": "digits", "n_train": 11, "n_test": 6, "seed": 2})
    data = load_dataset(spec)
    labels = np.concatenate([data.y_train, data.y_test]).argmax(1)
    assert len(set(labels.tolist())) < 10  # the case: a class is missing from the draw
    assert data.y_train.shape == (11, output_count(spec)) == (11, 10)
    assert data.class_labels == {"classes": list(range(10))}


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


# --- kernel-alignment synthetic tasks ----------------------------------------------------------

def synthetic(source: str, **kw) -> DataSpec:
    return DataSpec.model_validate({"source": source, **kw})


def test_random_labels_on_the_sphere():
    """Unit-norm inputs, isotropic (E xxᵀ = I/D), with i.i.d. fair ±1 labels (App. E.4)."""
    spec = synthetic("random_labels", dim=10, n_train=4000, n_test=1000)
    data = load_dataset(spec)
    assert data.x_train.shape == (4000, 10) and data.y_test.shape == (1000, 1) and output_count(spec) == 1
    np.testing.assert_allclose(np.linalg.norm(data.x_all, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(data.x_all.T @ data.x_all / 5000, np.eye(10) / 10, atol=0.01)
    y = np.concatenate([data.y_train, data.y_test])[:, 0]
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert abs(y.mean()) < 3 / np.sqrt(5000)  # fair coins: within 3 sd of 0
    assert abs(np.mean(y[1:] * y[:-1])) < 3 / np.sqrt(5000)  # and independent of their neighbours


def test_gaussian_mixture_centres_classes_and_noise():
    """x = μ_c + σξ with orthonormal μ_c, P/C points per class, one-hot 0/1 targets (App. E.5)."""
    spec = synthetic("gaussian_mixture", dim=20, clusters=4, noise=0.3, n_train=4000, n_test=400)
    data = load_dataset(spec)
    assert data.y_train.shape == (4000, 4) and data.y_test.shape == (400, 4) and output_count(spec) == 4
    assert set(np.unique(data.y_train)) == {0.0, 1.0} and np.all(data.y_train.sum(1) == 1)
    np.testing.assert_array_equal(data.y_train.sum(0), [1000] * 4)  # balanced, exactly
    np.testing.assert_array_equal(data.y_test.sum(0), [100] * 4)
    labels = data.y_train.argmax(1)
    means = np.stack([data.x_train[labels == c].mean(0) for c in range(4)])
    np.testing.assert_allclose(means @ means.T, np.eye(4), atol=0.08)  # ≈ orthonormal centres (sd 0.02)
    residual = data.x_train - means[labels]
    assert residual.var(axis=0).min() > 0.085 and residual.var(axis=0).max() < 0.095  # σ² = 0.09 per coordinate
    assert residual.var() == pytest.approx(0.09, rel=0.02)
    test_labels = data.y_test.argmax(1)
    nearest = np.argmin(((data.x_test[:, None] - means[None]) ** 2).sum(-1), axis=1)
    assert np.mean(nearest == test_labels) > 0.9  # test points come from the same centres (~3% errors)


def test_orthonormal_centres():
    from ntkpipe.data.synthetic import orthonormal_centres

    centres = orthonormal_centres(10, 12, np.random.default_rng(3))
    assert centres.shape == (10, 12)
    np.testing.assert_allclose(centres @ centres.T, np.eye(10), atol=1e-12)


def test_two_cluster_mixture_keeps_two_one_hot_outputs():
    spec = synthetic("gaussian_mixture", dim=3, clusters=2, n_train=10)
    data = load_dataset(spec)
    assert output_count(spec) == 2 and data.y_train.shape == (10, 2)
    np.testing.assert_array_equal(data.y_train.sum(0), [5, 5])


def test_linear_teachers_on_the_sphere():
    """C teachers β_c ~ N(0, I_D) on sphere inputs: y_c = s β_cᵀx exactly, y_c ~ N(0, s²) (Sec. 5.2)."""
    spec = teacher(inputs="sphere", teachers=10, dim=50, n_train=400, n_test=100, teacher_scale=2.0)
    data = load_dataset(spec)
    assert output_count(spec) == 10 and data.beta.shape == (50, 10)
    assert data.y_train.shape == (400, 10) and data.y_test.shape == (100, 10)
    np.testing.assert_allclose(np.linalg.norm(data.x_all, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(data.y_train, 2.0 * (data.x_train @ data.beta))
    np.testing.assert_array_equal(data.y_test, 2.0 * (data.x_test @ data.beta))
    assert data.beta.mean() == pytest.approx(0.0, abs=0.1) and data.beta.var() == pytest.approx(1.0, rel=0.1)
    assert np.mean(data.y_train**2) == pytest.approx(4.0 * np.mean(data.beta**2), rel=0.1)  # E(βᵀx)² = |β|²/D


def test_gaussian_teachers_extend_the_single_teacher():
    """The first of several unit teachers on Gaussian inputs is the single teacher of the same seed."""
    one, three = load_dataset(teacher()), load_dataset(teacher(teachers=3))
    np.testing.assert_array_equal(one.x_train, three.x_train)
    np.testing.assert_allclose(one.y_train[:, 0], three.y_train[:, 0], rtol=1e-13)
    np.testing.assert_allclose(np.linalg.norm(three.beta, axis=0), 1.0)


@pytest.mark.parametrize("spec", [
    {"source": "random_labels", "dim": 5, "n_train": 12, "n_test": 6},
    {"source": "gaussian_mixture", "dim": 5, "clusters": 3, "n_train": 12, "n_test": 6},
    {"source": "linear_teacher", "inputs": "sphere", "teachers": 2, "dim": 5, "n_train": 12, "n_test": 6},
])
def test_new_sources_are_reproducible_from_the_data_seed(spec):
    a, b = load_dataset(DataSpec.model_validate(spec)), load_dataset(DataSpec.model_validate(spec))
    c = load_dataset(DataSpec.model_validate({**spec, "seed": 1}))
    for split in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, split), getattr(b, split))
    assert not np.allclose(a.x_train, c.x_train) and not np.allclose(a.x_test, c.x_test)
    assert a.x_test.shape == (6, 5) and not np.isin(a.x_test, a.x_train).any()  # a separate test split


@pytest.mark.parametrize("spec,message", [
    ({"source": "random_labels", "n_train": 4}, "source 'random_labels' needs 'dim'"),
    ({"source": "gaussian_mixture", "dim": 4, "n_train": 4}, "needs 'clusters' (the number of classes C >= 2)"),
    ({"source": "gaussian_mixture", "dim": 4, "clusters": 5, "n_train": 5},
     "'clusters' = 5 orthonormal centres do not fit in dim = 4; use clusters <= dim"),
    ({"source": "gaussian_mixture", "dim": 4, "clusters": 3, "n_train": 10},
     "'n_train' = 10 is not a multiple of clusters = 3 (classes are balanced, n/C points each); use e.g. n_train: 9"),
    ({"source": "gaussian_mixture", "dim": 4, "clusters": 3, "n_train": 9, "n_test": 4},
     "'n_test' = 4 is not a multiple of clusters = 3"),
    ({"source": "gaussian_mixture", "dim": 4, "clusters": 2, "n_train": 4, "teachers": 2},
     "'teachers' does not apply to source 'gaussian_mixture'; remove it"),
    ({"source": "linear_teacher", "dim": 4, "n_train": 4, "clusters": 2}, "'clusters' does not apply"),
    ({"source": "linear_teacher", "dim": 4, "n_train": 4, "noise": 0.1}, "'noise' does not apply"),
    ({"source": "random_labels", "dim": 4, "n_train": 4, "inputs": "sphere"}, "'inputs' does not apply"),
    ({"source": "random_labels", "dim": 4, "n_train": 4, "teacher_scale": 2.0}, "'teacher_scale' does not apply"),
    ({"source": "digits", "n_train": 4, "dim": 4}, "'dim' does not apply to source 'digits'"),
    ({"source": "random_labels", "dim": 4, "n_train": 4, "labels": {"kind": "two_groups"}},
     "'two_groups' needs a source with class labels (digits, mnist, cifar10)"),
])
def test_synthetic_source_errors(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DataSpec.model_validate(spec)


def test_new_fields_stay_out_of_a_config_at_their_defaults():
    """Run ids hash the dumped config: specs written before ``inputs``/``teachers``/``clusters``
    existed dump exactly as before, so their run ids do not change."""
    before = teacher().model_dump(mode="json")
    assert not {"inputs", "teachers", "clusters"} & set(before)
    assert DataSpec.model_validate(before) == teacher()
    after = teacher(inputs="sphere", teachers=3).model_dump(mode="json")
    assert after["inputs"] == "sphere" and after["teachers"] == 3
    mixture = synthetic("gaussian_mixture", dim=3, clusters=3, n_train=3).model_dump(mode="json")
    assert mixture["clusters"] == 3


def test_mnist_odd_even_and_ten_class_from_local_files(tmp_path, monkeypatch):
    """MNIST odd (+1) vs even (−1) as two groups with one output; ten classes as 10-hot targets."""
    from ntkpipe.data.file_checks import clear_data_file_cache
    from tests.test_data_files import mnist_arrays, write_mnist

    arrays = mnist_arrays(n_train=60, n_test=30)
    arrays["y_train"][:] = np.arange(60) % 10
    arrays["y_test"][:] = np.arange(30) % 10
    write_mnist(tmp_path / "mnist", arrays)
    monkeypatch.setenv("NTKPIPE_DATA", str(tmp_path))
    clear_data_file_cache()
    odd_even = DataSpec.model_validate({"source": "mnist", "n_train": 60, "n_test": 30, "labels": {
        "kind": "two_groups", "groups": [[1, 3, 5, 7, 9], [0, 2, 4, 6, 8]]}})
    data = load_dataset(odd_even)
    assert output_count(odd_even) == 1 and data.y_train.shape == (60, 1)
    assert np.mean(data.y_train == 1.0) == 0.5 and np.mean(data.y_test == 1.0) == 0.5
    centred = data.x_train.reshape(60, -1)
    raw = arrays["x_train"].reshape(60, -1).astype(np.float64)  # recover each image's label from its pixels
    match = np.array([np.argmax(np.corrcoef(row, raw)[0, 1:]) for row in centred])
    np.testing.assert_array_equal(data.y_train[:, 0], np.where(match % 2 == 1, 1.0, -1.0))
    ten = DataSpec.model_validate({"source": "mnist", "n_train": 60, "n_test": 30})
    data = load_dataset(ten)
    assert output_count(ten) == 10 and data.y_train.shape == (60, 10) and data.y_test.shape == (30, 10)
    assert set(np.unique(data.y_train)) == {0.0, 1.0} and np.all(data.y_train.sum(1) == 1)
    np.testing.assert_array_equal(data.y_train.sum(0), [6] * 10)
