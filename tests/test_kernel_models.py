"""Kernel kinds (kgd, akgd, ofe, ofe_fit) and the feature-learning rate γ, through the run job:
each checked against an independent computation (a linearized network, the closed forms, the
network run they read)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe import empirical_ntk, flatten_gram
from ntkpipe.errors import SpecError
from ntkpipe.lang.schema import MODEL_SPEC
from ntkpipe.models import build_model, learning_rate_scale, trainable
from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.stages import run_context
from ntkpipe.store import read_store
from ntkpipe.study.load import load_study
from tests.conftest import run_study_jobs

STUDY = """\
data: {source: digits, classes: [0, 1], n_train: 24, n_test: 10}
model: {depth: 2, width: 32, activation: relu, sigma: 1.4, parameterization: ntk}
train:
  optimizer: {name: gd, lr: 0.5}
  dtype: float64
  max_time: 40
  checkpoints: {per_decade: 5}
measure: [loss, test_loss, kernel_norm, alignment]
sweep:
  model_kind: [network, linearized, kgd, akgd]
"""


@pytest.mark.computes("model_kind:kgd", "model_kind:akgd", "model_kind:linearized", "model_kind:network",
                      "parameterization:ntk", "kernel_norm", "alignment", "test_loss")
def test_kgd_is_the_linearized_network_and_akgd_is_rescaled_to_the_final_norm(tmp_path):
    _, runs = run_study_jobs(STUDY, tmp_path)
    net, lin, kgd, akgd = (runs[(k,)] for k in ("network", "linearized", "kgd", "akgd"))
    # KGD with the initial NTK is exactly full-batch GD on the linearization (Eq. 4)
    np.testing.assert_allclose(kgd["loss"].values, lin["loss"].values, rtol=1e-9)
    np.testing.assert_allclose(kgd["test_loss"].values, lin["test_loss"].values, rtol=1e-9)
    assert np.ptp(kgd["kernel_norm"].values) == 0 and np.ptp(kgd["alignment"].values) == 0
    # aKGD: the same kernel at the trained network's final Frobenius norm; alignment is scale-free
    np.testing.assert_allclose(akgd["kernel_norm"].values, net["kernel_norm"].values[-1], rtol=1e-12)
    np.testing.assert_allclose(akgd["alignment"].values, kgd["alignment"].values, rtol=1e-12)
    assert abs(net["kernel_norm"].values[-1] / kgd["kernel_norm"].values[0] - 1) > 0.01  # a real rescaling


@pytest.mark.computes("model_kind:ofe", "model_kind:ofe_fit", "ofe", "loss")
def test_ofe_fit_ends_at_its_network_alignment_and_conserves_c(tmp_path):
    text = STUDY.replace("measure: [loss, test_loss, kernel_norm, alignment]", "measure: [loss, kernel_norm, alignment, ofe]")
    text = text.replace("  model_kind: [network, linearized, kgd, akgd]",
                        "  union:\n    - {model_kind: [ofe_fit], model.gamma: [2]}\n    - {model_kind: [ofe], model.gamma: [0, 2]}")
    plan, runs = run_study_jobs(text, tmp_path)
    fit = runs[("ofe_fit", 2)]
    [support] = plan.support_runs  # the network of ofe_fit is not in the sweep: planned as a support run
    assert support.spec.model.kind == "network" and support.spec.model.gamma == 2.0
    network = read_store(support.path).load()
    assert fit["alignment"].values[-1] == pytest.approx(float(network["alignment"].values[-1]), rel=1e-4)
    assert fit["ofe_final_alignment"] == pytest.approx(float(network["alignment"].values[-1]), rel=1e-9)
    for run in (fit, runs[("ofe", 2)]):
        assert float(run["ofe_conservation_error"]) < 1e-8
    # γ = 0 is kernel gradient flow with K₀: Δ(t) = exp(−K₀t/P) Δ₀ from Δ₀ = −y
    frozen = runs[("ofe", 0)]
    ctx = run_context(plan.runs[-1].spec, {})
    k0 = np.asarray(flatten_gram(empirical_ntk(ctx.model0, ctx.data.x_train)), np.float64)
    lam, v = np.linalg.eigh(k0)
    y = ctx.data.y_train.reshape(-1)
    t = frozen["time"].values
    delta = (np.exp(-np.outer(t, lam) / len(y)) * (v.T @ -y)) @ v.T
    np.testing.assert_allclose(frozen["loss"].values, 0.5 * np.mean(delta**2, axis=1), rtol=1e-7)
    assert frozen["alignment"].values[-1] == pytest.approx(kernel_alignment(k0, y), rel=1e-9)
    # the OFE with γ̂ > 0 ends more aligned than γ = 0 and learns faster
    assert fit["alignment"].values[-1] > frozen["alignment"].values[-1]


def test_feature_learning_rate_rescales_output_and_learning_rate():
    """g = f/γ trained with η₀γ²: one small GD step moves g by −(η₀/P)K_f(g − y) for every γ
    (kernel-alignment App. C: the function-space step is O(1) in γ)."""
    x = np.random.default_rng(0).normal(size=(12, 5))
    y = np.sign(np.random.default_rng(1).normal(size=(12, 1)))
    plain = MODEL_SPEC.validate_python({"depth": 2, "width": 64, "parameterization": "ntk"})

    def network(spec):
        net = build_model(spec, (5,), 1, seed=3)
        return jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, net)

    f = jax.vmap(network(plain))(x)
    k_f = np.asarray(flatten_gram(empirical_ntk(network(plain), x)))
    eta0 = 1e-4
    for gamma in (1.0, 4.0):
        spec = plain.model_copy(update={"gamma": gamma})
        net = network(spec)
        g0 = jax.vmap(net)(x)
        np.testing.assert_allclose(g0, f / gamma, rtol=1e-12)
        assert learning_rate_scale(spec) == gamma**2

        def loss(m):
            return 0.5 * jnp.mean(jnp.sum((jax.vmap(m)(x) - y) ** 2, -1))

        params, fixed = trainable(net)  # the weights; not the multipliers c_ℓ and κ
        grads = jax.grad(lambda p: loss(eqx.combine(p, fixed)))(params)
        stepped = eqx.combine(jax.tree.map(lambda p, g: p - eta0 * gamma**2 * g, params, grads), fixed)
        moved = np.asarray(jax.vmap(stepped)(x) - g0).reshape(-1)
        predicted = -eta0 / len(x) * k_f @ np.asarray(g0 - y).reshape(-1)
        np.testing.assert_allclose(moved, predicted, rtol=1e-3 * gamma, atol=1e-9)


@pytest.mark.parametrize("change, message", [
    (("  optimizer: {name: gd, lr: 0.5}", "  optimizer: {name: adam, lr: 0.5}"), "needs train.optimizer.name 'gd'"),
    (("measure: [loss, test_loss, kernel_norm, alignment]", "measure: [loss, test_loss, alignment]"),
     "model.kind 'akgd' reads the final kernel_norm of its trained network: add kernel_norm to measure"),
    (("model_kind: [network, linearized, kgd, akgd]", "model_kind: [network]\n  model.gamma: [0, 1]"),
     "gamma 0 (a frozen kernel) applies only to model.kind 'ofe'"),
    (("model_kind: [network, linearized, kgd, akgd]", "gamma: [1, 2]"), "axis 'gamma' names several spec keys; "
     "write 'data.gamma' or 'model.gamma'"),
    (("measure: [loss, test_loss, kernel_norm, alignment]", "measure: [loss, kernel_norm, alignment, param_distance]"),
     "param_distance: reads the network's weights or Jacobian; model.kind 'kgd' evolves a kernel"),
])
def test_kernel_kind_specs_are_checked(tmp_path, change, message):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.replace(*change))
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert message in str(err.value)


def test_kernel_kinds_whose_network_diverged_are_diverged_not_failed(tmp_path):
    """The network run an akgd or ofe_fit run reads blew up (lr 500 on a ReLU net): the kernel runs have no
    final norm or alignment to follow; they are stored as diverged (found by the long generated-studies
    profile: the ofe_fit job failed and took its study with it), and the study aggregates."""
    text = STUDY.replace("lr: 0.5", "lr: 500.0").replace("measure: [loss, test_loss, kernel_norm, alignment]",
                                                          "measure: [loss, kernel_norm, alignment]")
    text = text.replace("  model_kind: [network, linearized, kgd, akgd]", "  model_kind: [network, akgd, ofe_fit]")
    plan, runs = run_study_jobs(text, tmp_path)
    assert int(runs[("network",)]["diverged"]) == 1
    for kind in ("akgd", "ofe_fit"):
        assert int(runs[(kind,)]["diverged"]) == 1, kind
        assert np.isnan(runs[(kind,)]["loss"].values[-1]), kind
