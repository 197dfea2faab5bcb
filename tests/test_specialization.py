"""Multi-output kernel measurements (kernel-alignment Secs. 4.3, 6) against planted kernels, brute-force
Jacobians and the two-layer ReLU theory of Eq. 16."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from ntkpipe.data import Dataset
from ntkpipe.lang.schema import RunSpec
from ntkpipe.measure import requirements as req
from ntkpipe.measure.context import ModelView, RunContext
from ntkpipe.measure.registry import REGISTRY, VARIABLES
from ntkpipe.measure.specialization import (
    diagonal_ratio,
    kernel_specialization_matrix,
    subkernel,
    target_projections,
    trace_per_point,
    traced_alignment,
    traced_kernel,
)
from ntkpipe.models import CNN, MLP, ConvLayer, Linearized, trainable
from ntkpipe.ntk import component_grams, empirical_ntk
from ntkpipe.theory.relu_components import component_rates
from ntkpipe.train.driver import Trajectory
from ntkpipe.train.loop import train

RNG = np.random.default_rng(7)


def _one_hot(classes: int, per_class: int) -> np.ndarray:
    return np.repeat(np.eye(classes), per_class, axis=0)


def _planted(y: np.ndarray, eps: float) -> np.ndarray:
    """K^{c,c} = y_c y_cᵀ + εI, random off-diagonal subkernels (which the KSM must ignore)."""
    p, c = y.shape
    kernel = RNG.standard_normal((p, p, c, c))
    for k in range(c):
        kernel[:, :, k, k] = np.outer(y[:, k], y[:, k]) + eps * np.eye(p)
    return kernel


def test_subkernels_traced_kernel_and_its_alignment():
    y = _one_hot(3, 4)
    kernel = _planted(y, 0.5)
    np.testing.assert_array_equal(subkernel(kernel, 0, 2), kernel[:, :, 0, 2])
    expected = sum(np.outer(y[:, k], y[:, k]) for k in range(3)) / 3 + 0.5 * np.eye(12)
    np.testing.assert_allclose(traced_kernel(kernel), expected, rtol=1e-14)
    yy = y @ y.T  # K_tr = YYᵀ/3 + ½I: ⟨K_tr, YYᵀ⟩ = ‖YYᵀ‖²/3 + ½ tr YYᵀ, YYᵀ = three 4×4 blocks of ones
    inner, norm_k = 48 / 3 + 0.5 * 12, np.sqrt(48 / 9 + 2 * 0.5 * 12 / 3 + 0.25 * 12)
    assert traced_alignment(kernel, y) == pytest.approx(inner / (norm_k * np.sqrt(48)), rel=1e-13)
    assert traced_alignment(np.repeat(yy[:, :, None, None], 3, axis=2).repeat(3, axis=3), y) == pytest.approx(1.0)


@pytest.mark.parametrize("eps", [0.01, 1.0])
def test_ksm_of_perfectly_specialized_one_hot_subkernels(eps):
    """One-hot classes of m points: y_c·y_d = m δ_cd, so A(K^{c,c}, y_d) ∝ (m² δ_cd + ε m) with a
    c-independent norm, KSM(c, c) = C(m + ε)/(m + Cε) and KSM(c ≠ d) = Cε/(m + Cε)."""
    c, m = 4, 5
    ksm = kernel_specialization_matrix(_planted(_one_hot(c, m), eps), _one_hot(c, m))
    off = ~np.eye(c, dtype=bool)
    np.testing.assert_allclose(np.diagonal(ksm), c * (m + eps) / (m + c * eps), rtol=1e-12)
    np.testing.assert_allclose(ksm[off], c * eps / (m + c * eps), rtol=1e-12)
    np.testing.assert_allclose(ksm.mean(axis=0), 1.0, rtol=1e-12)
    assert diagonal_ratio(ksm) == pytest.approx((m + eps) / eps, rel=1e-12)


def test_ksm_of_specialized_plus_minus_one_labels():
    """One-vs-rest ±1 labels, C = 3 classes of m = 4 (P = 12): y_c·y_d = P − 4m = −4 for c ≠ d and
    |y|² = P, so A(c, d) ∝ (y_c·y_d)² + εP and KSM(c, c) = C(P² + εP) / (P² + εP + (C − 1)(16 + εP))."""
    y, eps, p = 2.0 * _one_hot(3, 4) - 1.0, 0.3, 12
    ksm = kernel_specialization_matrix(_planted(y, eps), y)
    diag, other = p**2 + eps * p, 16 + eps * p
    np.testing.assert_allclose(np.diagonal(ksm), 3 * diag / (diag + 2 * other), rtol=1e-12)
    np.testing.assert_allclose(ksm[~np.eye(3, dtype=bool)], 3 * other / (diag + 2 * other), rtol=1e-12)


def test_ksm_is_one_when_all_subkernels_are_equal():
    a = RNG.standard_normal((15, 15))
    kernel = RNG.standard_normal((15, 15, 3, 3))
    for k in range(3):
        kernel[:, :, k, k] = a @ a.T
    for y in (_one_hot(3, 5), RNG.choice([-1.0, 1.0], size=(15, 3))):
        np.testing.assert_allclose(kernel_specialization_matrix(kernel, y), 1.0, rtol=1e-12)


def test_projections_and_traces_against_loops():
    kernel, y = RNG.standard_normal((9, 9, 3, 3)), RNG.standard_normal((9, 3))
    expected = [[y[:, d] @ kernel[:, :, c, c] @ y[:, d] / (y[:, d] @ y[:, d]) for d in range(3)] for c in range(3)]
    np.testing.assert_allclose(target_projections(kernel, y), expected, rtol=1e-12)
    np.testing.assert_allclose(trace_per_point(kernel), [np.trace(kernel[:, :, c, c]) / 9 for c in range(3)])


def _brute_force_components(model, x, readout):
    """K_V and K_W from explicit Jacobians of f in the ``readout`` leaves and in all other trainable leaves."""
    arrays, rest = trainable(model)
    mask = eqx.tree_at(readout, jax.tree.map(lambda _: False, arrays), replace_fn=lambda _: True)
    grams = {}
    for name, (part, other) in {"readout": eqx.partition(arrays, mask),
                                "hidden": eqx.partition(arrays, jax.tree.map(lambda m: not m, mask))}.items():
        theta, unravel = ravel_pytree(part)

        def f(t, example, unravel=unravel, other=other):
            return eqx.combine(unravel(t), other, rest)(example)

        jac = np.stack([np.asarray(jax.jacobian(f)(theta, example)) for example in x])  # (n, C, p)
        grams[name] = np.einsum("icp,jdp->ijcd", jac, jac)
    return grams


def _models():
    key = jax.random.PRNGKey(3)
    mlp = MLP(5, 7, 3, 3, bias=True, dtype=jnp.float64, key=key)
    cnn = CNN((6, 6, 1), [ConvLayer(2, 3)], [4], 2, bias=True, dtype=jnp.float64, key=key)
    moved = Linearized(mlp)
    moved = eqx.tree_at(lambda m: m.params, moved, jax.tree.map(lambda a: 1.1 * a, moved.params))
    return [(mlp, (5,), lambda m: (m.weights[-1], m.biases[-1])),
            (cnn, (6, 6, 1), lambda m: (m.layers[-1].weight, m.layers[-1].bias)),
            (moved, (5,), lambda m: (m.params.weights[-1], m.params.biases[-1]))]


@pytest.mark.parametrize("case", range(3), ids=["mlp", "cnn", "linearized"])
def test_component_grams_match_brute_force_and_sum_to_the_ntk(case):
    model, shape, readout = _models()[case]
    x = RNG.standard_normal((6, *shape))
    grams = component_grams(model, x)
    expected = _brute_force_components(model, x, readout)
    for name in ("readout", "hidden"):
        np.testing.assert_allclose(grams[name], expected[name], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grams["readout"] + grams["hidden"], np.asarray(empirical_ntk(model, x)),
                               rtol=1e-10, atol=1e-12)


def test_component_grams_need_a_readout_layer():
    with pytest.raises(TypeError, match="readout layer"):
        component_grams(eqx.nn.Linear(3, 2, key=jax.random.PRNGKey(0)), np.ones((2, 3)))


def _spec(n_train: int, dim: int, width: int, classes: list[int] | None, *, lr=0.1, max_time=1.0, subset=0):
    data = ({"source": "digits", "classes": classes} if classes else {"source": "linear_teacher", "dim": dim})
    return RunSpec.model_validate({
        "seed": 0, "data": data | {"n_train": n_train}, "model": {"depth": 2, "width": width},
        "train": {"optimizer": {"name": "gd", "lr": lr}, "max_time": max_time, "dtype": "float64",
                  "checkpoints": {"per_decade": 20}},
        "measure": [{"name": "traced_alignment", "subset": 0, "every": 2},
                    {"name": "kernel_components", "subset": subset, "every": 1},
                    {"name": "kernel_specialization", "subset": 300}, {"name": "component_growth"},
                    {"name": "component_theory"}]})


def _train(run: RunContext) -> Trajectory:
    items = {m.name: m for m in run.spec.measure}

    def measure(model, index, last):
        view = ModelView(model, run, index, last)
        return (REGISTRY["traced_alignment"].compute(view, items["traced_alignment"])
                | REGISTRY["kernel_components"].compute(view, items["kernel_components"]))

    return train(run.model0, run.data.x_train, run.data.y_train, run.spec.train, key=jax.random.PRNGKey(1),
                 measure=measure)


def test_measurements_of_a_three_output_mlp_have_their_declared_shapes():
    p, c = 12, 3
    x, y = RNG.standard_normal((p, 4)), _one_hot(c, 4)[RNG.permutation(p)]
    spec = _spec(p, 4, 16, [0, 1, 2], subset=9)
    run = RunContext(spec, Dataset(x, y, x[:0], y[:0]), MLP(4, 16, 2, c, dtype=jnp.float64, key=jax.random.PRNGKey(0)))
    traj = _train(run)
    items = {m.name: m for m in spec.measure}
    values = dict(traj.series)
    values |= REGISTRY["kernel_specialization"].compute(run, traj, items["kernel_specialization"])
    values |= REGISTRY["component_growth"].compute(run, traj, items["component_growth"])
    sizes = {"time": len(traj.time), "output": c, "target": c, "train_point": 9}
    for name, value in values.items():
        assert np.shape(value) == tuple(sizes[d] for d in VARIABLES[name].dims), name
    skipped = np.isnan(traj.series["traced_alignment"])
    assert not skipped[0] and not skipped[-1] and skipped[1]
    assert np.all(np.isfinite(traj.series["kv_projection"]))
    np.testing.assert_allclose(traj.series["subset_outputs"][0], np.asarray(jax.vmap(run.model0)(x[:9])))
    assert values["ksm_init"].mean(axis=0) == pytest.approx(np.ones(c))
    assert req.needs_several_outputs(spec) is None
    assert "needs one network output" in req.relu_two_layer_theory(_spec(p, 4, 16, [0, 1, 2]))
    assert "C >= 2" in req.needs_several_outputs(_spec(p, 4, 16, None))
    assert "kernel_components subset 0" in req.relu_two_layer_theory(_spec(p, 4, 16, None, subset=9))


def test_component_growth_of_planted_series():
    """Series growing linearly, Δ projection = t·(a on the diagonal, b off it), Δ trace = t·τ:
    own/other = a/b and the growth ratio [a/τ]/(P/2); K_V's growth along target d, mean over c,
    is t_end·(a + (C − 1)b)/C for every d."""
    t = np.linspace(0.0, 2.0, 5)
    a, b, tau, p, c = 3.0, 1.5, 0.25, 8, 3
    rate = np.where(np.eye(c, dtype=bool), a, b)
    series = {"subset_outputs": np.zeros((5, p, c))}
    for key, scale in (("kv", 1.0), ("kw", 2.0)):
        series[f"{key}_projection"] = 7.0 + scale * t[:, None, None] * rate
        series[f"{key}_trace"] = 1.0 + scale * tau * t[:, None] * np.ones(c)
    out = REGISTRY["component_growth"].compute(None, Trajectory(t, t, t, series, False, None), None)
    assert out["kv_specialization_ratio"] == pytest.approx(a / b)
    assert out["kw_specialization_ratio"] == pytest.approx(a / b)
    assert out["kv_growth_ratio"] == pytest.approx(a / tau / (p / 2))
    assert out["kw_isotropy_ratio"] == pytest.approx(a / tau)
    np.testing.assert_allclose(out["kw_own_growth"], 2 * a * t)
    np.testing.assert_allclose(out["kv_other_growth"], b * t)
    np.testing.assert_allclose(out["kw_other_growth_theory"], a * t)
    np.testing.assert_allclose(out["kv_target_growth"], np.full(c, t[-1] * (a + (c - 1) * b) / c))


def test_eq16_rates_give_the_p_over_two_anisotropy_early():
    """With f = εy (r = (1 − ε)y) and ±1 labels, α̇(ŷ) = (1 − ε)ε(P + 1)/P and ⟨α̇⟩ = 2(1 − ε)ε/P,
    a ratio (P + 1)/2 (Eq. 82); β̇(ŷ) = (1 − ε)ε(1 + 1/P)."""
    p, eps = 30, 0.1
    y = RNG.choice([-1.0, 1.0], size=p)
    rates = component_rates(eps * y[None], y)
    assert rates["kv_projection"][0] == pytest.approx((1 - eps) * eps * (p + 1) / p)
    assert rates["kv_trace"][0] == pytest.approx(2 * (1 - eps) * eps / p)
    assert rates["kw_projection"][0] == pytest.approx((1 - eps) * eps * (1 + 1 / p))


def test_readout_trace_rate_in_ntkpipe_time_units():
    """On orthonormal inputs d(tr K_V/P)/dt = 2rᵀf/P² needs no ansatz: check it against one small GD
    step, whose gradient-flow time is lr (η is absorbed in t = η·step)."""
    p, d, width, lr = 8, 12, 64, 1e-5
    x = np.linalg.qr(RNG.standard_normal((d, p)))[0].T
    y = RNG.choice([-1.0, 1.0], size=(p, 1))
    model = MLP(d, width, 2, 1, dtype=jnp.float64, key=jax.random.PRNGKey(2))
    diff, static = trainable(model)

    def loss(dm):
        return 0.5 * jnp.mean(jnp.sum((jax.vmap(eqx.combine(dm, static))(x) - y) ** 2, axis=1))

    stepped = eqx.combine(jax.tree.map(lambda a, g: a - lr * g, diff, jax.grad(loss)(diff)), static)
    before, after = (trace_per_point(component_grams(m, x)["readout"])[0] for m in (model, stepped))
    f = np.asarray(jax.vmap(model)(x))[:, 0]
    assert (after - before) / lr == pytest.approx(component_rates(f[None], y[:, 0])["kv_trace"][0], rel=1e-3)


def test_component_theory_tracks_a_two_layer_relu_net():
    """App. E.4 at a smaller size: P = 20 unit inputs in D = 400, ±1 labels, width 2000, W ~ N(0, 1/D),
    V ~ N(0, 1/M), no bias, GD with lr 0.1 (lr·λ_max/P ≈ 0.1) to t = 100 (loss ≈ 0). Measured (seeds
    0, 1, 2 of this setup): the predicted growth of ŷᵀK_Vŷ is 19 %, 13 %, 9 % too large; that of
    tr K_V/P (no ansatz needed) off by 8 %, 6 %, 1 %; the growth ratio along y vs trace is 0.96,
    1.06, 0.98 of P/2 and K_W's 0.93, 1.05, 0.99 (isotropy). Tolerances: about twice seed 0's errors."""
    p, dim, width = 20, 400, 2000
    rng = np.random.default_rng(0)
    x = rng.standard_normal((p, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.choice([-1.0, 1.0], size=(p, 1))
    spec = _spec(p, dim, width, None, lr=0.1, max_time=100.0)
    model = MLP(dim, width, 2, 1, dtype=jnp.float64, key=jax.random.PRNGKey(0))
    run = RunContext(spec, Dataset(x, y, x[:0], y[:0]), model)
    assert req.relu_two_layer_theory(spec) is None
    traj = _train(run)
    items = {m.name: m for m in spec.measure}
    theory = REGISTRY["component_theory"].compute(run, traj, items["component_theory"])
    growth = REGISTRY["component_growth"].compute(run, traj, items["component_growth"])
    assert theory["kv_growth_theory_relerr"] < 0.4
    measured = traj.series["kv_trace"][:, 0] - traj.series["kv_trace"][0, 0]
    predicted = theory["kv_trace_theory"] - theory["kv_trace_theory"][0]
    assert abs(predicted[-1] - measured[-1]) < 0.15 * measured[-1]
    assert growth["kv_growth_ratio"] == pytest.approx(1.0, abs=0.1)
    assert growth["kw_isotropy_ratio"] == pytest.approx(1.0, abs=0.15)
    assert np.isnan(growth["kw_specialization_ratio"])
