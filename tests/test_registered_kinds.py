"""Losses, optimizers, data sources, classification and kernel measurements, multi-output kernel
specialization and the matrix figure, each run through the train job (tiny studies in-process) and
checked against numpy: the forward pass and the NTK of a two-layer net written out by hand
(K = ∂f/∂a·∂f/∂a' + ∂f/∂W·∂f/∂W'), on the stored final parameters and the initial weights."""

from __future__ import annotations

import numpy as np
import pytest

from ntkpipe.jobs import aggregate_study
from ntkpipe.jobs.plot import draw_figure
from ntkpipe.plots.checks import figure_defects
from tests.test_data_files import idx_bytes, write_batch
from tests.test_measurements_pipeline import final_layers, forward, initial_layers, study_runs

CLASSIFY = """\
data: {source: digits, classes: [3, 5], n_train: 16, n_test: 8}
model: {depth: 2, width: 8, activation: tanh}
train:
  optimizer: {name: sgd, lr: 0.5}
  loss: bce
  batch_size: 8
  epochs: 5
  dtype: float64
  checkpoints: {spacing: linear, count: 5}
measure: [loss, test_loss, train_accuracy, test_accuracy, kernel_norm, alignment, param_distance,
          relative_kernel_change, {name: steps_to_threshold, threshold: 0.2}, param_distance_path,
          {name: distance_at_threshold, threshold: 0.2}, {name: energy_concentration, top_k: 3, subset: 10}]
sweep:
  cases:
    training:
      sgd_bce: {}
      adam_mse: {data: {classes: [3, 5, 8]},
                 train: {optimizer: {name: adam, lr: 0.05}, loss: mse, batch_size: null, epochs: null, steps: 20}}
"""
"""Two digit classes (±1, one logit) by minibatch SGD on the logistic loss; three (one-hot, argmax)
by full-batch Adam on the squared error."""

SPECIALIZE = """\
data: {source: gaussian_mixture, dim: 6, clusters: 3, noise: 0.3, n_train: 12}
model: {depth: 2, width: 16, activation: relu}
train:
  optimizer: {name: gd, lr: 0.5}
  dtype: float64
  steps: 60
  checkpoints: {per_decade: 4}
measure: [loss, {name: traced_alignment, every: 2}, kernel_specialization, {name: kernel_components, every: 1},
          component_growth]
figures:
  - {name: ksm, kind: matrix, variable: ksm}
"""


@pytest.fixture(scope="module")
def classify(tmp_path_factory):
    _, runs = study_runs(CLASSIFY, tmp_path_factory.mktemp("classify"))
    return {ctx.spec.train.loss: (ctx, ds) for ctx, ds in runs}


@pytest.fixture(scope="module")
def specialize(tmp_path_factory):
    directory = tmp_path_factory.mktemp("specialize")
    plan, ((ctx, ds),) = study_runs(SPECIALIZE, directory)
    aggregate_study(plan, plan.dataset_path)
    return plan, ctx, ds


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1)


def two_layer_ntk(layers, x, activation) -> tuple[np.ndarray, np.ndarray]:
    """(K_V, K_W), each (P, P, C, C), of f_c = Σ_i a_ci φ(w_i·x) (bias-free, standard parameterization):
    the readout part δ_cd φ(Wx)·φ(Wx') and the hidden part Σ_i a_ci a_di φ'(w_i·x) φ'(w_i·x') x·x'."""
    (w, _), (a, _) = layers
    z = _flat(x) @ w.T
    h, slope = {"tanh": (np.tanh(z), 1 - np.tanh(z) ** 2), "relu": (np.maximum(z, 0), (z > 0) * 1.0)}[activation]
    eye = np.eye(a.shape[0])
    readout = np.einsum("mi,ni,cd->mncd", h, h, eye)
    hidden = np.einsum("ci,di,mi,ni,mn->mncd", a, a, slope, slope, _flat(x) @ _flat(x).T)
    return readout, hidden


def _gram(kernel: np.ndarray) -> np.ndarray:
    """(P·C, P·C) with rows (example μ, output c) at μC + c."""
    p, _, c, _ = kernel.shape
    return kernel.transpose(0, 2, 1, 3).reshape(p * c, p * c)


def _alignment(k: np.ndarray, y: np.ndarray) -> float:
    v = y.reshape(-1)
    return float(v @ k @ v / (np.linalg.norm(k) * (v @ v)))


def _loss(name: str, f: np.ndarray, y: np.ndarray) -> float:
    """mse: (1/2P) Σ|f − y|²; bce: mean log(1 + e^{−y f}) on one logit."""
    if name == "mse":
        return float(0.5 * np.mean(np.sum((f - y) ** 2, axis=1)))
    return float(np.mean(np.log1p(np.exp(-y[:, 0] * f[:, 0]))))


def _accuracy(f: np.ndarray, y: np.ndarray) -> float:
    """sign f (0 → +1) against ±1 labels for one output, argmax against one-hot targets."""
    if f.shape[1] == 1:
        return float(np.mean(np.where(f[:, 0] >= 0, 1, -1) == y[:, 0]))
    return float(np.mean(f.argmax(1) == y.argmax(1)))


def _checkpoints(ctx, ds):
    return ((0, initial_layers(ctx)), (-1, final_layers(ctx, ds)))


@pytest.mark.computes("loss", "test_loss", "train_accuracy", "test_accuracy", "loss:bce", "loss:mse",
                      "optimizer:sgd", "optimizer:adam", "activation:tanh", "source:digits")
def test_losses_and_accuracies_of_the_initial_and_final_networks(classify):
    for name, (ctx, ds) in classify.items():
        data = ctx.data
        for index, layers in _checkpoints(ctx, ds):
            for split, x, y in (("train", data.x_train, data.y_train), ("test", data.x_test, data.y_test)):
                f = forward(layers, _flat(x), "tanh")
                loss = "loss" if split == "train" else "test_loss"
                assert float(ds[loss][index]) == pytest.approx(_loss(name, f, y), rel=1e-9), (name, split)
                assert float(ds[f"{split}_accuracy"][index]) == _accuracy(f, y), (name, split)
        assert float(ds["loss"][-1]) < 0.5 * float(ds["loss"][0])
    assert classify["mse"][1]["train_accuracy"].values[0] < 1  # the accuracies are not trivially 1
    assert classify["mse"][0].data.y_train.shape[1] == 3


@pytest.mark.computes("kernel_norm", "alignment", "relative_kernel_change", "energy_concentration")
def test_kernel_measurements_from_the_hand_written_ntk(classify):
    """‖K‖_F, A(K, y) and ‖Φ₃ᵀy‖/‖y‖ on the first 10 points (top-3 eigenvectors Φ₃) at init and at the
    end (NaN in between: ``every`` 0), and ‖K_T − K_0‖_F/‖K_0‖_F, of K = K_V + K_W written out."""
    for name, (ctx, ds) in classify.items():
        x, y = ctx.data.x_train, ctx.data.y_train
        grams = {}
        for index, layers in _checkpoints(ctx, ds):
            gram = grams[index] = _gram(sum(two_layer_ntk(layers, x, "tanh")))
            assert float(ds["kernel_norm"][index]) == pytest.approx(np.linalg.norm(gram), rel=1e-9), name
            assert float(ds["alignment"][index]) == pytest.approx(_alignment(gram, y), rel=1e-9), name
            sub = gram[: 10 * y.shape[1], : 10 * y.shape[1]]
            top = np.linalg.eigh(sub)[1][:, -3:]
            v = y[:10].reshape(-1)
            energy = np.linalg.norm(top.T @ v) / np.linalg.norm(v)
            assert float(ds["energy_concentration"][index]) == pytest.approx(energy, rel=1e-9), name
        assert np.all(np.isnan(ds["energy_concentration"].values[1:-1]))
        change = np.linalg.norm(grams[-1] - grams[0]) / np.linalg.norm(grams[0])
        assert float(ds["relative_kernel_change"]) == pytest.approx(change, rel=1e-9)


@pytest.mark.computes("param_distance", "steps_to_threshold")
def test_parameter_distance_and_steps_to_threshold(classify):
    """‖θ_T − θ_0‖ and 1 − cos(θ_T, θ_0) of the flat weights; the first optimizer step at which the
    loss reaches 0.2, linear between checkpoints."""
    for name, (ctx, ds) in classify.items():
        theta0 = np.concatenate([w.ravel() for w, _ in initial_layers(ctx)])
        theta = np.concatenate([w.ravel() for w, _ in final_layers(ctx, ds)])
        assert float(ds["param_distance"]) == pytest.approx(np.linalg.norm(theta - theta0), rel=1e-9)
        cosine = theta @ theta0 / (np.linalg.norm(theta) * np.linalg.norm(theta0))
        assert float(ds["param_cosine_distance"]) == pytest.approx(1 - cosine, rel=1e-6)
        steps, loss = ds["step"].values, ds["loss"].values
        k = int(np.argmax(loss <= 0.2))
        assert k > 0, name
        expected = steps[k - 1] + (0.2 - loss[k - 1]) * (steps[k] - steps[k - 1]) / (loss[k] - loss[k - 1])
        assert float(ds["steps_to_threshold"]) == pytest.approx(expected, rel=1e-12), name


@pytest.mark.computes("param_distance_path", "distance_at_threshold")
def test_distance_path_and_distance_at_the_loss_threshold(classify, tmp_path):
    """‖θ_t − θ_0‖ and 1 − cos(θ_t, θ_0) at every checkpoint: 0 at init, the flat weights' numpy values at
    the end, and at step 8 of the 20-step full-batch Adam run the final distances of the same run
    stopped at step 8 (constant rate: its first 8 steps are the longer run's); at the loss threshold 0.2
    both series read linearly at the numpy crossing step."""
    for name, (ctx, ds) in classify.items():
        theta0 = np.concatenate([w.ravel() for w, _ in initial_layers(ctx)])
        theta = np.concatenate([w.ravel() for w, _ in final_layers(ctx, ds)])
        path, cosine_path = ds["param_distance_t"].values, ds["param_cosine_distance_t"].values
        assert path[0] == 0.0 and abs(cosine_path[0]) < 1e-12, name
        assert path[-1] == pytest.approx(np.linalg.norm(theta - theta0), rel=1e-9), name
        cosine = theta @ theta0 / (np.linalg.norm(theta) * np.linalg.norm(theta0))
        assert cosine_path[-1] == pytest.approx(1 - cosine, rel=1e-6), name
        steps, loss = ds["step"].values.astype(float), ds["loss"].values
        k = int(np.argmax(loss <= 0.2))
        assert k > 0, name
        step = steps[k - 1] + (0.2 - loss[k - 1]) * (steps[k] - steps[k - 1]) / (loss[k] - loss[k - 1])
        w = (step - steps[k - 1]) / (steps[k] - steps[k - 1])
        for at, series in (("distance_at_threshold", path), ("cosine_distance_at_threshold", cosine_path)):
            expected = (1 - w) * series[k - 1] + w * series[k]
            assert float(ds[at]) == pytest.approx(expected, rel=1e-12), (name, at)
    _, adam = classify["mse"]
    assert list(adam["step"].values) == [0, 4, 8, 12, 16, 20]
    short = CLASSIFY.replace("steps: 20}}", "steps: 8}}")
    assert short != CLASSIFY
    _, runs = study_runs(short, tmp_path)
    ((_, stopped),) = [(c, d) for c, d in runs if c.spec.train.loss == "mse"]
    assert int(stopped["step"].values[-1]) == 8
    assert float(adam["param_distance_t"][2]) == pytest.approx(float(stopped["param_distance"]), rel=1e-9)
    assert float(adam["param_cosine_distance_t"][2]) == pytest.approx(float(stopped["param_cosine_distance"]),
                                                                       rel=1e-6)


@pytest.mark.computes("traced_alignment", "kernel_components", "kernel_specialization", "component_growth",
                      "source:gaussian_mixture")
def test_multi_output_kernel_measurements_from_the_hand_written_ntk(specialize):
    """With K^{c,c} = K_V^{c,c} + K_W^{c,c} of each output c: y_dᵀK_X^{c,c}y_d/|y_d|² and tr K_X^{c,c}/P
    (X = V, W), A(K_tr, YYᵀ) of K_tr = C⁻¹Σ_c K^{c,c}, KSM(c, d) = A(K^{c,c}, y_dy_dᵀ) / mean_c' A(K^{c',c'},
    y_dy_dᵀ) at init and at the end; the growth ratios from the stored series."""
    _, ctx, ds = specialize
    x, y = ctx.data.x_train, ctx.data.y_train
    assert y.shape == (12, 3) and np.all(y.sum(axis=0) == 4)  # one-hot, balanced classes
    for index, layers in _checkpoints(ctx, ds):
        parts = dict(zip(("kv", "kw"), two_layer_ntk(layers, x, "relu")))
        for key, kernel in parts.items():
            own = np.einsum("mncc->cmn", kernel)
            projection = np.einsum("md,cmn,nd->cd", y, own, y) / np.sum(y**2, axis=0)
            np.testing.assert_allclose(ds[f"{key}_projection"][index], projection, rtol=1e-9)
            np.testing.assert_allclose(ds[f"{key}_trace"][index], np.trace(own, axis1=1, axis2=2) / len(y), rtol=1e-9)
        subkernels = np.einsum("mncc->cmn", parts["kv"] + parts["kw"])
        traced, targets = subkernels.mean(axis=0), y @ y.T
        expected = np.sum(traced * targets) / (np.linalg.norm(traced) * np.linalg.norm(targets))
        assert float(ds["traced_alignment"][index]) == pytest.approx(expected, rel=1e-9)
        alignments = np.einsum("md,cmn,nd->cd", y, subkernels, y) / (
            np.linalg.norm(subkernels, axis=(1, 2))[:, None] * np.sum(y**2, axis=0))
        ksm = ds["ksm_init" if index == 0 else "ksm"].values
        np.testing.assert_allclose(ksm, alignments / alignments.mean(axis=0), rtol=1e-9)
    assert np.isnan(ds["traced_alignment"].values[1])  # every 2nd checkpoint
    np.testing.assert_allclose(ds["subset_outputs"][-1], forward(final_layers(ctx, ds), x, "relu"), rtol=1e-9)
    kw = ds["kw_projection"].values - ds["kw_projection"].values[0]
    own, other = np.einsum("tcc->t", kw) / 3, (kw.sum(axis=(1, 2)) - np.einsum("tcc->t", kw)) / 6
    np.testing.assert_allclose(ds["kw_own_growth"], own, rtol=1e-9, atol=1e-12)
    assert float(ds["kw_specialization_ratio"]) == pytest.approx(own[-1] / other[-1], rel=1e-9)
    assert float(ds["ksm_diagonal_ratio"]) > 1  # each output's subkernel aligned with its own class


@pytest.mark.computes("figure:matrix")
def test_matrix_figure_draws_the_stored_ksm(specialize):
    """The heatmap of the study dataset's KSM: its cells are the stored values, with no figure defects."""
    plan, _, ds = specialize
    fig = draw_figure(plan, "ksm")
    assert figure_defects(fig) == []
    (image,) = fig.axes[0].images
    np.testing.assert_allclose(np.asarray(image.get_array()), ds["ksm"].values, rtol=1e-9)


RANDOM_LABELS = """\
data: {source: random_labels, dim: 5, n_train: 12, n_test: 4}
model: {depth: 2, width: 8, activation: relu}
train:
  optimizer: {name: gd, lr: 0.2}
  dtype: float64
  steps: 20
measure: [loss, test_loss]
"""


def _check_initial_losses(ctx, ds, activation="relu"):
    """The stored initial train and test MSE of the numpy forward pass on the run's data."""
    layers = initial_layers(ctx)
    for loss, x, y in (("loss", ctx.data.x_train, ctx.data.y_train), ("test_loss", ctx.data.x_test, ctx.data.y_test)):
        assert float(ds[loss][0]) == pytest.approx(_loss("mse", forward(layers, _flat(x), activation), y), rel=1e-9)


@pytest.mark.computes("source:random_labels")
def test_random_labels_are_signs_on_the_sphere(tmp_path):
    _, ((ctx, ds),) = study_runs(RANDOM_LABELS, tmp_path)
    for x, y in ((ctx.data.x_train, ctx.data.y_train), (ctx.data.x_test, ctx.data.y_test)):
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-12)
        assert set(np.unique(y)) == {-1.0, 1.0}
    _check_initial_losses(ctx, ds)


def _standardized(images: np.ndarray) -> np.ndarray:
    """Pixels in [0, 1] minus their mean over the images, over the RMS of what is left."""
    x = images.astype(np.float64) / 255.0
    centred = x - x.mean(axis=0)
    return centred / np.sqrt(np.mean(centred**2))


def _image_study(source: str, path) -> str:
    return f"""\
data: {{source: {source}, path: {path}, classes: [3, 7], n_train: 6, n_test: 2}}
model: {{depth: 2, width: 8, activation: relu}}
train:
  optimizer: {{name: gd, lr: 0.1}}
  dtype: float64
  steps: 5
measure: [loss, test_loss]
"""


def _check_image_run(ctx, ds, images: np.ndarray, labels: np.ndarray):
    """All 6 training images of classes 3 and 7 (n_train = their count): the run's inputs are the
    standardized images (NHWC) in some order, with targets −1 for 3 and +1 for 7."""
    keep = np.isin(labels, [3, 7])
    expected, targets = _standardized(images[keep]), np.where(labels[keep] == 7, 1.0, -1.0)
    got = ctx.data.x_train
    assert got.shape == expected.shape
    order = [int(np.argmin(np.abs(expected - row).reshape(len(expected), -1).sum(axis=1))) for row in got]
    assert sorted(order) == list(range(len(expected)))
    np.testing.assert_allclose(got, expected[order], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ctx.data.y_train[:, 0], targets[order])
    _check_initial_losses(ctx, ds)


def _labels(n: int, rng) -> np.ndarray:
    """n labels with exactly three 3s and three 7s among the first training labels, others elsewhere."""
    labels = rng.choice([0, 1, 2, 4, 5, 6, 8, 9], size=n)
    labels[[0, 2, 4]], labels[[1, 3, 5]] = 3, 7
    return labels.astype(np.uint8)


@pytest.mark.computes("source:mnist")
def test_mnist_files_through_the_train_job(tmp_path, monkeypatch):
    """IDX files written here (not the official ones: checksums skipped) feed the run."""
    monkeypatch.setenv("NTKPIPE_SKIP_CHECKSUMS", "1")
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.integers(0, 256, (9, 28, 28), dtype=np.uint8), "y_train": _labels(9, rng),
              "x_test": rng.integers(0, 256, (4, 28, 28), dtype=np.uint8),
              "y_test": np.array([3, 7, 1, 2], dtype=np.uint8)}
    names = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
             "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}
    (tmp_path / "mnist").mkdir()
    for key, name in names.items():
        (tmp_path / "mnist" / name).write_bytes(idx_bytes(arrays[key]))
    _, ((ctx, ds),) = study_runs(_image_study("mnist", tmp_path / "mnist"), tmp_path)
    _check_image_run(ctx, ds, arrays["x_train"][..., None], arrays["y_train"])


@pytest.mark.computes("source:cifar10")
def test_cifar10_batches_through_the_train_job(tmp_path, monkeypatch):
    """Python batches written here: rows are channel-major (c·1024 + h·32 + w), the run's images NHWC."""
    monkeypatch.setenv("NTKPIPE_SKIP_CHECKSUMS", "1")
    rng = np.random.default_rng(1)
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    rows, labels = [], []
    for i in range(1, 6):
        batch_rows = rng.integers(0, 256, (2, 3072), dtype=np.uint8)
        batch_labels = [3, 7] if i <= 3 else [1, 2]
        write_batch(root / f"data_batch_{i}", batch_rows, batch_labels)
        rows.append(batch_rows)
        labels += batch_labels
    write_batch(root / "test_batch", rng.integers(0, 256, (2, 3072), dtype=np.uint8), [3, 7])
    images = np.concatenate(rows).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    _, ((ctx, ds),) = study_runs(_image_study("cifar10", tmp_path), tmp_path)
    _check_image_run(ctx, ds, images, np.array(labels))


RELU_COMPONENTS = """\
data: {source: random_labels, dim: 400, n_train: 20}
model: {depth: 2, width: 512, activation: relu}
train:
  optimizer: {name: gd, lr: 0.1}
  dtype: float64
  max_time: 100
  checkpoints: {per_decade: 10}
measure: [loss, kernel_components, component_growth, component_theory]
"""
"""Kernel-alignment App. E.4 at a smaller size: P = 20 ±1 labels on unit inputs in D = 400 (nearly
orthogonal), a scalar two-layer ReLU net trained by GD to zero loss."""


@pytest.mark.computes("component_theory", "source:random_labels")
def test_component_theory_integrates_eq16_with_the_measured_outputs(tmp_path):
    """From the initial values, the rates of Eq. 16 / Eqs. 76–86 at the stored outputs f(t), r = y − f,
    ẑ = y/|y|: d(ŷᵀK_Vŷ)/dt = (Σ_μ r_μf_μẑ_μ² + (r·ẑ)(f·ẑ))/P, d(tr K_V/P)/dt = 2 r·f/P² and
    d(ŷᵀK_Wŷ)/dt = (Σ_μ r_μf_μẑ_μ² + r·f)/P, by the trapezoid rule over the checkpoints. The trace needs
    no ansatz: its predicted growth is within 15% of the measured one (measured 8% at width 512)."""
    _, ((ctx, ds),) = study_runs(RELU_COMPONENTS, tmp_path)
    t, f, y = ds["time"].values, ds["subset_outputs"].values[:, :, 0], ctx.data.y_train[:, 0]
    p, z, r = len(y), y / np.linalg.norm(y), y - f
    rates = {"kv_projection": ((r * f) @ z**2 + (r @ z) * (f @ z)) / p, "kv_trace": 2 * np.sum(r * f, axis=1) / p**2,
             "kw_projection": ((r * f) @ z**2 + np.sum(r * f, axis=1)) / p}
    for name, rate in rates.items():
        measured = ds[name].values.reshape(len(t), -1)[:, 0]
        integral = np.concatenate([[0.0], np.cumsum(np.diff(t) * (rate[1:] + rate[:-1]) / 2)])
        np.testing.assert_allclose(ds[f"{name}_theory"], measured[0] + integral, rtol=1e-9, err_msg=name)
    measured, theory = (ds[name].values.reshape(len(t), -1)[:, 0] for name in ("kv_trace", "kv_trace_theory"))
    assert abs((theory[-1] - theory[0]) - (measured[-1] - measured[0])) < 0.15 * (measured[-1] - measured[0])
    growth, predicted = (ds[name].values.reshape(len(t), -1)[:, 0] for name in ("kv_projection", "kv_projection_theory"))
    relerr = abs((predicted[-1] - growth[0]) - (growth[-1] - growth[0])) / abs(growth[-1] - growth[0])
    assert float(ds["kv_growth_theory_relerr"]) == pytest.approx(relerr, rel=1e-9)
    assert float(ds["loss"][-1]) < 1e-6 * float(ds["loss"][0])
