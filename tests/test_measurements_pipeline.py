"""Measurements computed by the train job (tiny studies planned and trained in-process), each checked
against numpy on the stored final parameters, the initial weights and the data, or against the theory
it implements (silent-alignment App. C, E, H; kernel-alignment Eq. 7; solvable-model Fig. 2)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.jobs import aggregate_study
from ntkpipe.measure.layers import gram_alignment, layer_alignment
from ntkpipe.stages import run_context
from ntkpipe.store import read_store
from tests.conftest import run_study_jobs

TWO_LAYER = """\
data: {source: linear_teacher, dim: 4, n_train: 20, gamma: 0.0}
model: {depth: 2, width: 16, activation: linear, sigma: 0.01}
train:
  optimizer: {name: gd, lr: 0.01}
  dtype: float64
  max_time: 12
  checkpoints: {per_decade: 20}
measure: [loss, alignment, readout_norm_sq, teacher_overlaps, two_layer_theory, alignment_after_half, gamma_hat,
          first_layer_alignment, {name: t_align, threshold: 0.9}, t_half, alignment_theory,
          {name: alignment_lead, threshold: 0.9}, kernel_norm, alignment_growth_times]
"""
"""A two-layer linear net from small init on whitened data (P = 20 > D = 4, s = 1) under GD with a
small step (gradient flow up to Euler's error): the setting of silent-alignment App. C."""

MODES = """\
data: {source: linear_teacher, dim: 4, n_train: 20, gamma: 0.0, teachers: 2, teacher_scale: 2.0}
model: {depth: 2, width: 16, activation: linear, sigma: 0.01}
train:
  optimizer: {name: gd, lr: 0.005}
  dtype: float64
  max_time: 12
  checkpoints: {per_decade: 20}
measure: [loss, mode_strength, mode_half_time, mode_strength_theory]
"""
"""Two outputs, so two target modes s₁ > s₂ learned one after the other (silent-alignment App. H)."""

MIN_NORM = """\
data: {source: linear_teacher, dim: 12, n_train: 6, gamma: 0.0}
model: {depth: 2, width: 16, activation: linear}
train:
  optimizer: {name: gd, lr: 0.05}
  dtype: float64
  max_time: 60
  checkpoints: {per_decade: 10}
measure: [loss, final_ntk, final_ntk_gram, min_norm_error, min_norm_theory]
sweep:
  union:
    - {depth: [2], sigma: [0.005, 0.01, 0.02]}
    - {depth: [3], sigma: [0.05]}
summaries:
  - {name: relerr_exponent, kind: power_law, x: sigma, y: min_norm_relerr, by: depth}
  - {name: relerr_slope, kind: log_law, x: sigma, y: min_norm_relerr, by: depth}
"""
"""Deep linear nets from small init trained to convergence on P = 6 < D = 12 points: an interpolant
exists, and the min-norm one is reached up to the O(σ) frozen off the data's span (App. E.3, G.1)."""

RELU = """\
data: {source: linear_teacher, dim: 4, n_train: 200, gamma: 0.0}
model: {depth: 2, width: 64, activation: relu, sigma: 0.01}
train:
  optimizer: {name: gd, lr: 0.05}
  dtype: float64
  max_time: 40
  checkpoints: {per_decade: 8}
measure: [loss, alignment, alignment_theory, relu_alignment_theory]
"""
"""A bias-free two-layer ReLU net from small init on whitened Gaussian inputs with a linear teacher
(P = 200 ≫ D = 4), trained to a small loss: the setting of docs/papers.md §3.8."""

MIRRORED = """\
data: {source: linear_teacher, dim: 5, n_train: 12}
model: {depth: 3, width: 8, activation: relu, bias: true}
train:
  optimizer: {name: gd, lr: 0.1}
  dtype: float64
  steps: 100
  checkpoints: {per_decade: 5}
measure: [loss, weight_norm, readout_alignment]
sweep: {init: [gaussian, mirrored]}
"""


def study_runs(text, directory):
    """Run ``text`` in-process in ``directory``; returns the plan and [(run context, run store)] in plan order."""
    plan, stores = run_study_jobs(text, directory)
    return plan, [(run_context(job.spec, job.stage_paths), stores[tuple(point.values())])
                  for job, point in zip(plan.runs, plan.study.points)]


def _study(text, tmp_path_factory, name):
    return study_runs(text, tmp_path_factory.mktemp(name))[1]


@pytest.fixture(scope="module")
def two_layer(tmp_path_factory):
    ((ctx, ds),) = _study(TWO_LAYER, tmp_path_factory, "two_layer")
    return ctx, ds


@pytest.fixture(scope="module")
def rescaled(tmp_path_factory):
    """The two-layer study with feature-learning rate γ = 2: it trains g = f/γ with η₀γ²."""
    text = re.sub(r"measure: \[.*?\]\n", "measure: [loss, alignment, gamma_hat]\n", TWO_LAYER, flags=re.S)
    ((ctx, ds),) = _study(text.replace("sigma: 0.01}", "sigma: 0.01, gamma: 2.0}"), tmp_path_factory, "rescaled")
    return ctx, ds


@pytest.fixture(scope="module")
def modes(tmp_path_factory):
    ((ctx, ds),) = _study(MODES, tmp_path_factory, "modes")
    return ctx, ds


@pytest.fixture(scope="module")
def min_norm_study(tmp_path_factory):
    directory = tmp_path_factory.mktemp("min_norm")
    plan, runs = study_runs(MIN_NORM, directory)
    return runs, read_store(aggregate_study(plan, directory / "study.zarr")).load()


@pytest.fixture(scope="module")
def min_norm(min_norm_study):
    return min_norm_study[0]


@pytest.fixture(scope="module")
def relu(tmp_path_factory):
    ((ctx, ds),) = _study(RELU, tmp_path_factory, "relu")
    return ctx, ds


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    return {ctx.spec.model.init: (ctx, ds) for ctx, ds in _study(MIRRORED, tmp_path_factory, "mirrored")}


# --- numpy on the stored parameters ----------------------------------------------------------------


def initial_layers(ctx) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(W_ℓ, b_ℓ) of the run's initial network in float64."""
    net = ctx.model0
    biases = net.biases or (None,) * len(net.weights)
    return [(np.asarray(w, np.float64), None if b is None else np.asarray(b, np.float64))
            for w, b in zip(net.weights, biases)]


def final_layers(ctx, ds) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(W_ℓ, b_ℓ) of the trained network, cut from the stored flat ``final_params``: the weights
    W_1 … W_L, then the biases b_1 … b_L (equinox's field order), each row-major."""
    shapes = [w.shape for w, _ in initial_layers(ctx)]
    shapes += [(w[0],) for w in shapes] if ctx.model0.biases is not None else []
    params = ds["final_params"].values.astype(np.float64)
    assert params.size == sum(int(np.prod(s)) for s in shapes)
    parts = np.split(params, np.cumsum([int(np.prod(s)) for s in shapes])[:-1])
    arrays = [p.reshape(s) for p, s in zip(parts, shapes)]
    depth = len(initial_layers(ctx))
    return [(arrays[ell], arrays[depth + ell] if len(arrays) > depth else None) for ell in range(depth)]


def forward(layers, x, activation) -> np.ndarray:
    """Outputs (P, C) of a standard-parameterization MLP (multipliers 1, output scale 1)."""
    phi = {"linear": lambda z: z, "relu": lambda z: np.maximum(z, 0.0), "tanh": np.tanh}[activation]
    h = x
    for ell, (w, b) in enumerate(layers):
        z = h @ w.T + (0.0 if b is None else b)
        h = z if ell == len(layers) - 1 else phi(z)
    return h


def end_to_end(layers) -> np.ndarray:
    """W_L ⋯ W_1 of a bias-free linear net, (C, D)."""
    m = layers[0][0]
    for w, _ in layers[1:]:
        m = w @ m
    return m


def linear_ntk_matrix(layers) -> np.ndarray:
    """M of K(x, x') = xᵀMx' for a one-output bias-free linear net: ∂f/∂W_ℓ = B_ℓᵀ(A_ℓx)ᵀ with
    A_ℓ = W_{ℓ−1}⋯W_1 and B_ℓ = W_L⋯W_{ℓ+1}, so M = Σ_ℓ |B_ℓ|² A_ℓᵀA_ℓ."""
    weights = [w for w, _ in layers]
    m = np.zeros((weights[0].shape[1],) * 2)
    for ell in range(len(weights)):
        a = end_to_end([(w, None) for w in weights[:ell]]) if ell else np.eye(weights[0].shape[1])
        b = end_to_end([(w, None) for w in weights[ell + 1:]]) if ell < len(weights) - 1 else np.ones((1, 1))
        m += np.sum(b**2) * a.T @ a
    return m


def _alignment(k: np.ndarray, y: np.ndarray) -> float:
    """A = yᵀKy / (‖K‖_F |y|²)."""
    return float(y @ k @ y / (np.linalg.norm(k) * (y @ y)))


def _teacher(ctx) -> tuple[np.ndarray, float]:
    """(β, s): w* = sβ the least-squares map of the (whitened) inputs to the targets."""
    w = np.linalg.pinv(ctx.data.flat_train) @ ctx.data.y_train[:, 0]
    return w / np.linalg.norm(w), float(np.linalg.norm(w))


@pytest.mark.computes("loss", "loss:mse", "optimizer:gd", "architecture:mlp", "model_kind:network",
                       "source:linear_teacher", "activation:linear", "activation:relu")
def test_stored_loss_is_the_mse_of_the_initial_and_final_weights(two_layer, min_norm, mirrored):
    """L = (1/2P) Σ_μ |f(x_μ) − y_μ|² of the numpy forward pass with the initial weights and with the
    stored final parameters (which also checks the layout the other tests cut ``final_params`` by)."""
    for ctx, ds in [two_layer, *min_norm, *mirrored.values()]:
        for index, layers in ((0, initial_layers(ctx)), (-1, final_layers(ctx, ds))):
            f = forward(layers, ctx.data.flat_train, ctx.spec.model.activation)
            loss = 0.5 * np.mean(np.sum((f - ctx.data.y_train) ** 2, axis=1))
            assert float(ds["loss"][index]) == pytest.approx(loss, rel=1e-9, abs=1e-20)
        assert float(ds["loss"][-1]) < float(ds["loss"][0])


@pytest.mark.computes("init:gaussian", "parameterization:standard")
def test_gaussian_init_draws_weights_of_variance_sigma_squared_over_fan_in(two_layer, min_norm):
    """W_ℓ ~ N(0, σ²/fan_in) entrywise: the sample variance of every layer of 64 or more entries is
    within 40% of σ²/fan_in and its mean within 4 standard errors of 0."""
    for ctx, _ in [two_layer, *min_norm]:
        sigma = ctx.spec.model.sigma
        for w, _ in initial_layers(ctx):
            if w.size >= 64:
                variance = sigma**2 / w.shape[1]
                assert 0.6 < np.var(w) / variance < 1.4
                assert abs(np.mean(w)) < 4 * np.sqrt(variance / w.size)


# --- two-layer overlaps and their theory (silent-alignment App. C) ---------------------------------


@pytest.mark.computes("teacher_overlaps", "readout_norm_sq")
def test_overlaps_and_readout_norm_from_the_weights(two_layer):
    """q = ½(|a|² + βᵀWᵀWβ), r = aᵀWβ and u² = |a|² at init (the initial weights) and at the end
    (the stored final parameters), β the least-squares direction of the data."""
    ctx, ds = two_layer
    beta, _ = _teacher(ctx)
    for index, layers in ((0, initial_layers(ctx)), (-1, final_layers(ctx, ds))):
        (w, _), (a, _) = layers
        a, wb = a[0], w @ beta
        assert float(ds["q"][index]) == pytest.approx(0.5 * (a @ a + wb @ wb), rel=1e-10)
        assert float(ds["r"][index]) == pytest.approx(a @ wb, rel=1e-10)
        assert float(ds["readout_norm_sq"][index]) == pytest.approx(a @ a, rel=1e-10)


@pytest.mark.computes("two_layer_theory")
def test_two_layer_theory_matches_the_simulated_overlaps(two_layer):
    """Eq. 50–51 with the measured (q₀, r₀), q = (q₀ cosh 2st + r₀ sinh 2st)/S, r = (r₀ cosh 2st +
    q₀ sinh 2st)/S, S = 1 + (q₀ + r₀)(e^{2st} − 1)/2s, and u² = q + u₀² − q₀ from the measured
    u₀² = |a₀|² (docs/papers.md §3.3), recomputed here; the per-time errors recomputed by hand. The
    simulation follows q and u² within 0.1 in log at every time and r within 0.1 q: Euler's step η = 0.01
    lags the growth e^{2st} by ≈ 2s²η·t in log, ≈ 0.09 at the transition t ≈ 4.5, and σ = 0.01 adds O(σ²)."""
    ctx, ds = two_layer
    _, s = _teacher(ctx)
    t = ds["time"].values
    q0, r0, u0_sq = float(ds["q"][0]), float(ds["r"][0]), float(ds["readout_norm_sq"][0])
    e = np.exp(2 * s * t)
    saturation = 1 + (q0 + r0) * (e - 1) / (2 * s)
    q_theory = (q0 * np.cosh(2 * s * t) + r0 * np.sinh(2 * s * t)) / saturation
    np.testing.assert_allclose(ds["q_theory"], q_theory, rtol=1e-9)
    np.testing.assert_allclose(ds["r_theory"], (r0 * np.cosh(2 * s * t) + q0 * np.sinh(2 * s * t)) / saturation,
                               rtol=1e-9)
    np.testing.assert_allclose(ds["readout_norm_sq_theory"], q_theory + u0_sq - q0, rtol=1e-9)
    assert float(ds["readout_norm_sq_theory"][0]) == pytest.approx(u0_sq, rel=1e-9)
    for name in ("q", "readout_norm_sq"):
        simulated, theory = ds[name].values, ds[f"{name}_theory"].values
        error = np.max(np.abs(np.log(simulated / theory)))
        assert float(ds[f"{name}_max_logerr"]) == pytest.approx(error, rel=1e-9)
        assert error < 0.1, (name, error)
        assert simulated[-1] == pytest.approx(s, rel=1e-3)  # converged: q, u² → s
    error = np.max(np.abs(ds["r"].values - ds["r_theory"].values) / q_theory)
    assert float(ds["r_max_relerr_q"]) == pytest.approx(error, rel=1e-9)
    assert error < 0.1
    assert float(ds["r"][-1]) == pytest.approx(s, rel=1e-3)


@pytest.mark.computes("alignment_after_half")
def test_alignment_after_half_from_the_stored_series(two_layer):
    """The share Σ|ΔA| over the checkpoint intervals ending after t½ over the total Σ|ΔA|, t½ the
    interpolated first time the loss reaches half its initial value; ≈ 0 here: from small init the
    kernel aligns before the loss falls (silent alignment, Fig. 4)."""
    _, ds = two_layer
    t, loss, a = ds["time"].values, ds["loss"].values, ds["alignment"].values
    k = int(np.argmax(loss <= loss[0] / 2))
    t_half = t[k - 1] + (loss[0] / 2 - loss[k - 1]) * (t[k] - t[k - 1]) / (loss[k] - loss[k - 1])
    steps = np.abs(np.diff(a))
    share = steps[t[1:] > t_half].sum() / steps.sum()
    assert float(ds["alignment_after_half"]) == pytest.approx(share, rel=1e-12)
    assert 0.0 <= share < 0.05
    assert a[-1] - a[0] > 0.02  # the kernel did align


def _crossing(t, values, level):
    """First t where ``values`` reaches ``level`` (from the side it starts on), linear between checkpoints."""
    k = int(np.argmax((values - level) * np.sign(level - values[0]) >= 0))
    return t[k - 1] + (level - values[k - 1]) * (t[k] - t[k - 1]) / (values[k] - values[k - 1])


@pytest.mark.computes("first_layer_alignment", "t_align", "t_half")
def test_first_layer_alignment_and_crossing_times(two_layer):
    """cos(W₁ᵀW₁, ββᵀ) = βᵀW₁ᵀW₁β / ‖W₁ᵀW₁‖_F at init and at the end (≈ 1: W₁ ends rank one along β,
    up to O(σ)); t_align and t½ the interpolated first crossings of 0.9 and of half the initial loss."""
    ctx, ds = two_layer
    beta, _ = _teacher(ctx)
    for index, layers in ((0, initial_layers(ctx)), (-1, final_layers(ctx, ds))):
        gram = layers[0][0].T @ layers[0][0]
        assert float(ds["first_layer_alignment"][index]) == pytest.approx(beta @ gram @ beta / np.linalg.norm(gram),
                                                                          rel=1e-9)
    alignment, t = ds["first_layer_alignment"].values, ds["time"].values
    assert alignment[0] < 0.9 < alignment[-1] and alignment[-1] > 0.99
    assert float(ds["t_align"]) == pytest.approx(_crossing(t, alignment, 0.9), rel=1e-12)
    loss = ds["loss"].values
    assert float(ds["t_half"]) == pytest.approx(_crossing(t, loss, loss[0] / 2), rel=1e-12)


@pytest.mark.computes("alignment_lead", "alignment_growth_times")
def test_alignment_lead_and_growth_times(two_layer):
    """t½/t_align (t_align at the spec's threshold 0.9); t_A where A(t) has covered 90 % of its change,
    t_K where ‖K‖ first reaches 10 % of its final value (both interpolated), and t_K / t_A. From small
    init the first layer aligns before the loss halves, and the kernel aligns before it grows
    (silent-alignment Sec. 3): both ratios exceed 1."""
    _, ds = two_layer
    t, loss = ds["time"].values, ds["loss"].values
    t_align = _crossing(t, ds["first_layer_alignment"].values, 0.9)
    lead = _crossing(t, loss, loss[0] / 2) / t_align
    assert float(ds["alignment_lead"]) == pytest.approx(lead, rel=1e-12)
    a, norm = ds["alignment"].values, ds["kernel_norm"].values
    t_rise = _crossing(t, a, a[0] + 0.9 * (a[-1] - a[0]))
    t_growth = _crossing(t, norm, 0.1 * norm[-1])
    assert float(ds["t_alignment_rise"]) == pytest.approx(t_rise, rel=1e-12)
    assert float(ds["t_kernel_growth"]) == pytest.approx(t_growth, rel=1e-12)
    assert float(ds["growth_over_alignment"]) == pytest.approx(t_growth / t_rise, rel=1e-12)
    assert lead > 1 and t_growth / t_rise > 1


@pytest.mark.computes("relu_alignment_theory")
def test_relu_alignment_theory_is_reached_by_the_relu_net(relu):
    """A(K∞, y) with K∞ = s·1(zz' > 0)(zz' + xᵀx'), z = βᵀx (docs/papers.md §3.8), from numpy on the
    data; the trained ReLU net's final alignment lies within 5 % of it, while the linear net's theory
    (Eq. 63) lies above both."""
    ctx, ds = relu
    x, y = ctx.data.flat_train, ctx.data.y_train[:, 0]
    beta, s = _teacher(ctx)
    z = x @ beta
    gram = s * (np.outer(z, z) + x @ x.T) * (np.outer(z, z) > 0)
    theory = float(ds["relu_alignment_theory"])
    assert theory == pytest.approx(_alignment(gram, y), rel=1e-10)
    assert float(ds["loss"][-1]) < 1e-2 * float(ds["loss"][0])
    assert float(ds["alignment"][-1]) == pytest.approx(theory, rel=0.05)
    assert float(ds["alignment_theory"]) > 1.1 * theory


@pytest.mark.computes("alignment_theory")
def test_alignment_theory_is_the_final_alignment_of_the_linear_net(two_layer):
    """A(X M∞ Xᵀ, y) = L/√(L² + D − 1) for whitened X and y = sXβ (M∞ of Eq. 63), reached by the net."""
    ctx, ds = two_layer
    depth, dim = ctx.spec.model.depth, ctx.spec.data.dim
    assert float(ds["alignment_theory"]) == pytest.approx(depth / np.sqrt(depth**2 + dim - 1), rel=1e-10)
    assert float(ds["alignment"][-1]) == pytest.approx(float(ds["alignment_theory"]), rel=1e-3)


@pytest.mark.computes("gamma_hat")
@pytest.mark.parametrize("study", ["two_layer", "rescaled"])
def test_gamma_hat_gives_the_networks_final_alignment(study, request):
    """A(K₀ + γ̂yyᵀ, y) equals the network's final alignment (kernel-alignment Eq. 7, Fig. 2C–D),
    with K₀ = X M₀ Xᵀ the initial NTK of the unscaled linear net f (from its initial weights; for
    γ = 2 the network trains g = f/γ, whose NTK is K_f/γ²); the stored alignments (scale-free) are
    those of X M Xᵀ at init and at the end."""
    ctx, ds = request.getfixturevalue(study)
    x, y = ctx.data.flat_train, ctx.data.y_train[:, 0]
    k0 = x @ linear_ntk_matrix(initial_layers(ctx)) @ x.T
    k_final = x @ linear_ntk_matrix(final_layers(ctx, ds)) @ x.T
    assert float(ds["alignment"][0]) == pytest.approx(_alignment(k0, y), rel=1e-9)
    assert float(ds["alignment"][-1]) == pytest.approx(_alignment(k_final, y), rel=1e-9)
    gamma = float(ds["gamma_hat"])
    assert gamma > 0  # the alignment grew
    assert _alignment(k0 + gamma * np.outer(y, y), y) == pytest.approx(float(ds["alignment"][-1]), rel=1e-6)


# --- target modes (silent-alignment App. H) --------------------------------------------------------


def _modes(ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVD Σ_yx = Yᵀx/P = Σ_k s_k u_k v_kᵀ: (u (C, K), s (K,), v (D, K))."""
    x, y = ctx.data.flat_train, ctx.data.y_train
    u, s, vt = np.linalg.svd(y.T @ x / len(x), full_matrices=False)
    return u, s, vt.T


@pytest.mark.computes("mode_strength")
def test_mode_strength_projects_the_learned_map(modes):
    """m_k = u_kᵀ Σ_fx v_k, Σ_fx = Fᵀx/P, with F the outputs of the initial and the trained network."""
    ctx, ds = modes
    u, s, v = _modes(ctx)
    x = ctx.data.flat_train
    np.testing.assert_allclose(ds["mode_target"], s, rtol=1e-10)
    for index, layers in ((0, initial_layers(ctx)), (-1, final_layers(ctx, ds))):
        f = forward(layers, x, "linear")
        expected = np.einsum("ck,cd,dk->k", u, f.T @ x / len(x), v)
        np.testing.assert_allclose(ds["mode_strength"][index], expected, rtol=1e-8, atol=1e-12)


@pytest.mark.computes("mode_strength_theory")
def test_mode_strength_theory_follows_the_simulated_modes(modes):
    """Each mode's theory is the two-layer logistic ċ = 2c(s_k − c) (closed form here, from its own
    c₀); the simulated m_k(t) follows it within 3% of s_k and both end at s_k. What remains is Euler's
    lag ≈ 2s_k²η·t in log (≈ 0.15 for mode 1 at its transition t ≈ 2, η = 0.005; measured 1.3% of s₁)
    and the modes' coupling at σ = 0.01."""
    _, ds = modes
    t, s = ds["time"].values, ds["mode_target"].values
    theory, measured = ds["mode_strength_theory"].values, ds["mode_strength"].values
    assert s[0] > 2 * s[1]  # two well separated modes
    for k, sk in enumerate(s):
        c0, e = theory[0, k], np.exp(2 * sk * t)
        np.testing.assert_allclose(theory[:, k], sk * c0 * e / (sk - c0 + c0 * e), rtol=1e-6)
        assert np.max(np.abs(measured[:, k] - theory[:, k])) < 3e-2 * sk, k
        assert measured[-1, k] == pytest.approx(sk, rel=1e-2)


@pytest.mark.computes("mode_half_time")
def test_mode_half_time_by_hand_and_against_the_ode(modes):
    """t_k by hand: the checkpoints bracketing m_k = s_k/2, linearly interpolated; the ODE's time is
    (1/2s_k) ln(s_k/c₀ − 1) (Eq. C.4 at c = s_k/2) from the theory's c₀. The network is later by Euler's
    lag: measured (t_ODE − t)/t = −0.62 % (mode 1, s = 2) and −0.07 % (mode 2) at η = 0.005; bound 2 %."""
    _, ds = modes
    t, s = ds["time"].values, ds["mode_target"].values
    measured = ds["mode_strength"].values
    for k, sk in enumerate(s):
        i = int(np.argmax(measured[:, k] >= sk / 2))
        t0, t1, m0, m1 = t[i - 1], t[i], measured[i - 1, k], measured[i, k]
        by_hand = t0 + (sk / 2 - m0) * (t1 - t0) / (m1 - m0)
        assert float(ds["mode_half_time"][k]) == pytest.approx(by_hand, rel=1e-12)
        c0 = float(ds["mode_strength_theory"][0, k])
        ode = np.log(sk / c0 - 1) / (2 * sk)
        assert float(ds["mode_half_time_theory"][k]) == pytest.approx(ode, rel=1e-7)
        assert ode == pytest.approx(by_hand, rel=2e-2), (ode, by_hand)
    assert float(ds["mode_half_time"][0]) < float(ds["mode_half_time"][1])  # the stronger mode first


# --- deep linear nets at convergence (silent-alignment App. E.2–E.3, G.1) --------------------------


@pytest.mark.computes("final_ntk")
def test_final_ntk_ratio_is_the_depth(min_norm):
    """The final NTK matrix M (numpy from the stored weights) has ratio βᵀMβ(D − 1)/(tr M − βᵀMβ) ≈ L
    and lies within σ of M∞ = s^{2(L−1)/L}[(L − 1)ββᵀ + I] (Eq. 63)."""
    for ctx, ds in min_norm:
        depth, sigma = ctx.spec.model.depth, ctx.spec.model.sigma
        beta, s = _teacher(ctx)
        m = linear_ntk_matrix(final_layers(ctx, ds))
        along = beta @ m @ beta
        ratio = along * (len(beta) - 1) / (np.trace(m) - along)
        theory = s ** (2 * (depth - 1) / depth) * ((depth - 1) * np.outer(beta, beta) + np.eye(len(beta)))
        relerr = np.linalg.norm(m - theory) / np.linalg.norm(theory)
        assert float(ds["final_ntk_ratio"]) == pytest.approx(ratio, rel=1e-8)
        assert float(ds["final_ntk_relerr"]) == pytest.approx(relerr, rel=1e-6)
        assert float(ds["final_ntk_ratio_theory"]) == depth
        assert ratio == pytest.approx(depth, rel=1e-2)
        assert relerr < sigma


@pytest.mark.computes("final_ntk_gram")
def test_final_ntk_gram_is_the_jacobian_gram(min_norm_study):
    """The stored final Gram equals J Jᵀ of jax.jacobian of the trained network's outputs on the
    training points (weights cut from the stored parameters), its theory X M∞ Xᵀ (Eq. 63) in numpy, and
    the study's residual the relative Frobenius distance, within σ for converged nets from small init."""
    runs, study = min_norm_study
    for (ctx, ds), run_id in zip(runs, study["run_id"].values):
        depth, x = ctx.spec.model.depth, ctx.data.flat_train
        weights = [jnp.asarray(w) for w, _ in final_layers(ctx, ds)]

        def outputs(params):
            h = jnp.asarray(x)
            for w in params:
                h = h @ w.T
            return h[:, 0]

        jac = jax.jacobian(outputs)(weights)
        j = np.concatenate([np.asarray(block, np.float64).reshape(len(x), -1) for block in jac], axis=1)
        gram = ds["final_ntk_gram"].values
        assert gram.shape == (len(x), len(x)) and ds["final_ntk_gram"].dims == ("train_point", "train_point_nu")
        np.testing.assert_allclose(gram, j @ j.T, rtol=1e-9, atol=1e-12 * np.abs(gram).max())
        beta, s = _teacher(ctx)
        theory = s ** (2 * (depth - 1) / depth) * x @ ((depth - 1) * np.outer(beta, beta) + np.eye(len(beta))) @ x.T
        np.testing.assert_allclose(ds["final_ntk_gram_theory"].values, theory, rtol=1e-9)
        residual = study["final_ntk_gram_theory_residual"].where(study["run_id"] == run_id, drop=True).item()
        assert residual == pytest.approx(np.linalg.norm(theory - j @ j.T) / np.linalg.norm(j @ j.T), rel=1e-9)
        assert residual < ctx.spec.model.sigma


@pytest.mark.computes("min_norm_error")
def test_min_norm_error_of_converged_deep_linear_nets(min_norm):
    """|w − w_min|/|w_min| with w = W_L⋯W_1 of the stored weights and w_min = X⁺y; below 2σ, the bound
    of the part of W₁ frozen off the data's span (tests/test_linear_theory.py)."""
    for ctx, ds in min_norm:
        x, y = ctx.data.flat_train, ctx.data.y_train[:, 0]
        w = end_to_end(final_layers(ctx, ds))[0]
        w_min = np.linalg.pinv(x) @ y
        np.testing.assert_allclose(x @ w, y, atol=1e-8)  # an interpolant
        relerr = np.linalg.norm(w - w_min) / np.linalg.norm(w_min)
        assert float(ds["min_norm_relerr"]) == pytest.approx(relerr, rel=1e-8)
        assert relerr < 2 * ctx.spec.model.sigma


@pytest.mark.computes("min_norm_theory")
def test_min_norm_theory_is_the_frozen_part_of_the_first_layer(min_norm):
    """W₁P⊥ (P⊥ off the row space of X) never moves, so w − w_min = W_L⋯W_2 W₁(0)P⊥ at convergence
    (checked on the stored weights), and the theory ‖W₁(0)P⊥‖_F/(√N|w_min|^{1/L}) is its expected
    size for a direction W_L⋯W_2 independent of W₁(0)P⊥ (docs/papers.md §3.7). The error is one draw
    of χ with D − P = 6 degrees of freedom over its RMS (0.90 ± 0.32 in 40 numpy gradient-flow runs
    of this setting, lowest 0.31); the L = 2 run here draws 0.39."""
    for ctx, ds in min_norm:
        x, y = ctx.data.flat_train, ctx.data.y_train[:, 0]
        depth = ctx.spec.model.depth
        w0 = initial_layers(ctx)[0][0]
        off_span = np.eye(x.shape[1]) - np.linalg.pinv(x) @ x
        w_min = np.linalg.pinv(x) @ y
        theory = np.linalg.norm(w0 @ off_span) / np.sqrt(w0.shape[0]) / np.linalg.norm(w_min) ** (1 / depth)
        assert float(ds["min_norm_relerr_theory"]) == pytest.approx(theory, rel=1e-10)
        layers = final_layers(ctx, ds)
        above = end_to_end(layers[1:])[0]
        w = end_to_end(layers)[0]
        np.testing.assert_allclose(w - w_min, above @ w0 @ off_span, atol=1e-8)
        assert np.linalg.norm(above) == pytest.approx(np.linalg.norm(w_min) ** ((depth - 1) / depth), rel=1e-2)
        assert 0.25 < float(ds["min_norm_relerr"]) / theory < 2


@pytest.mark.computes("summary:power_law", "summary:log_law")
def test_fits_of_the_min_norm_error_over_sigma(min_norm_study):
    """Per depth, least squares of ln y (power law) and of y (log law) on [1, ln σ]: for L = 2 the
    distance from the min-norm interpolant is the part of W₁ frozen off the span, ∝ σ (exponent ≈ 1);
    one σ at L = 3 is too few points for a fit (NaN)."""
    runs, study = min_norm_study
    depth = study["depth"].values
    two = [(ctx.spec.model.sigma, float(ds["min_norm_relerr"])) for ctx, ds in runs if ctx.spec.model.depth == 2]
    sigma, relerr = np.array(two).T
    design = np.stack([np.ones_like(sigma), np.log(sigma)], axis=1)
    for name, y in (("relerr_exponent", np.log(relerr)), ("relerr_slope", relerr)):
        slope = np.linalg.lstsq(design, y, rcond=None)[0][1]
        np.testing.assert_allclose(study[name].values[depth == 2], slope, rtol=1e-9)
        assert np.all(np.isnan(study[name].values[depth == 3]))
    assert float(study["relerr_exponent"].values[depth == 2][0]) == pytest.approx(1.0, abs=0.1)


# --- weight norms and the mirrored init (solvable-model Sec. 3.2, Fig. 2) --------------------------


def _layer_norm_sum(layers) -> float:
    """Σ_ℓ √(‖W_ℓ‖² + ‖b_ℓ‖²)."""
    return float(sum(np.sqrt(np.sum(w**2) + (0.0 if b is None else np.sum(b**2))) for w, b in layers))


@pytest.mark.computes("weight_norm")
def test_weight_norm_sums_the_layer_norms(mirrored):
    """Σ_ℓ ‖θ_ℓ‖ over the layers' weights and biases, at init and after training."""
    for ctx, ds in mirrored.values():
        assert float(ds["weight_norm_init"]) == pytest.approx(_layer_norm_sum(initial_layers(ctx)), rel=1e-12)
        assert float(ds["weight_norm"]) == pytest.approx(_layer_norm_sum(final_layers(ctx, ds)), rel=1e-12)
        assert float(ds["weight_norm"]) != pytest.approx(float(ds["weight_norm_init"]), rel=1e-3)  # it trained


def _gram_cos(a: np.ndarray, b: np.ndarray) -> float:
    """cos(AᵀA, BBᵀ) by the flattened Grams' dot product."""
    g, h = (a.T @ a).ravel(), (b @ b.T).ravel()
    return float(g @ h / np.sqrt((g @ g) * (h @ h)))


@pytest.mark.computes("readout_alignment")
def test_readout_alignment_is_the_gram_cosine_of_the_top_two_layers(mirrored):
    """cos(W_LᵀW_L, W_{L−1}W_{L−1}ᵀ) of the readout and the layer below, at init and after training, against
    numpy on the stored weights; with one input dimension it is the solvable model's cos²θ, 1 for balanced
    rank-one layers and unchanged by rescaling a layer."""
    for ctx, ds in mirrored.values():
        (w, _), (u, _) = initial_layers(ctx)[-2:]
        assert float(ds["readout_alignment_init"]) == pytest.approx(_gram_cos(u, w), rel=1e-10)
        (w, _), (u, _) = final_layers(ctx, ds)[-2:]
        assert float(ds["readout_alignment"]) == pytest.approx(_gram_cos(u, w), rel=1e-10)
    rng = np.random.default_rng(0)
    u, w = rng.standard_normal(7), rng.standard_normal(7)
    cos = layer_alignment(w[:, None], u, np.ones(1))[0]
    assert gram_alignment(u[None, :], w[:, None]) == pytest.approx(cos**2, rel=1e-12)
    a, b, c = rng.standard_normal(3), rng.standard_normal(7), rng.standard_normal(5)
    assert gram_alignment(np.outer(a, b), np.outer(b, c)) == pytest.approx(1.0, rel=1e-12)
    upper, lower = rng.standard_normal((3, 7)), rng.standard_normal((7, 5))
    assert gram_alignment(10 * upper, 0.1 * lower) == pytest.approx(gram_alignment(upper, lower), rel=1e-12)


@pytest.mark.computes("init:mirrored")
def test_mirrored_init_starts_at_zero_output(mirrored):
    """``init: mirrored``: the last hidden layer's units N/2 … N − 1 (weights and biases) are copies of
    0 … N/2 − 1 and their readout weights negated, so f₀ = 0: the stored initial loss is ½ mean |y|²
    (a Gaussian init's is not), and the pairs cancel in the numpy forward pass up to rounding."""
    ctx, ds = mirrored["mirrored"]
    layers = initial_layers(ctx)
    (w, b), (u, _) = layers[-2], layers[-1]
    half = w.shape[0] // 2
    np.testing.assert_array_equal(w[half:], w[:half])
    np.testing.assert_array_equal(b[half:], b[:half])
    np.testing.assert_array_equal(u[:, half:], -u[:, :half])
    x, y = ctx.data.flat_train, ctx.data.y_train
    hidden = forward(layers[:-1] + [(np.eye(w.shape[0]), None)], x, "relu")
    assert np.any(hidden > 0)  # the units are active: f₀ = 0 by cancellation, not by dead units
    np.testing.assert_array_equal(hidden[:, :half] @ u[:, :half].T + hidden[:, half:] @ u[:, half:].T, 0.0)
    assert np.max(np.abs(forward(layers, x, "relu"))) <= 1e-14 * np.max(np.abs(hidden) @ np.abs(u).T)
    initial_target_loss = 0.5 * np.mean(np.sum(y**2, axis=1))
    assert float(ds["loss"][0]) == pytest.approx(initial_target_loss, rel=1e-14)
    gaussian = mirrored["gaussian"][1]
    assert float(gaussian["loss"][0]) != pytest.approx(initial_target_loss, rel=1e-3)
    assert float(ds["loss"][-1]) < 0.5 * float(ds["loss"][0])  # and it trains
