"""ResNet and Wide ResNet: their NTK against brute force (explicit per-example Jacobians, J Jᵀ), with
and without BatchNorm (inference mode), their layer names, training with batch statistics, the
validation of their options, and a tiny study of each through the train job."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.lang.schema import MODEL_SPEC
from ntkpipe.models import (
    ARCHITECTURES,
    Linearized,
    build_model,
    forward_batch,
    layer_components,
    split_state,
    trainable,
)
from ntkpipe.models.state import BatchStats
from ntkpipe.ntk import empirical_ntk
from ntkpipe.ntk.components import component_grams
from ntkpipe.train import train
from ntkpipe.train.final_state import PARAMS, restored_model, state_variables
from tests.conftest import run_study_jobs
from tests.test_spec import problems

RESNET = {"architecture": "resnet", "width_multiplier": 1 / 32, "blocks": [1, 1], "sigma": 1.3}
WRN = {"architecture": "wide_resnet", "depth": 10, "widen_factor": 0.125, "sigma": 1.3}
SHAPE = (8, 8, 3)


def _network(options: dict, norm: str, parameterization: str = "standard", out_size: int = 2, dtype=jnp.float64):
    spec = MODEL_SPEC.validate_python({**options, "norm": norm, "parameterization": parameterization, "bias": True})
    net = build_model(spec, SHAPE, out_size, seed=3)
    return spec, _cast(net, jnp.dtype(dtype))


@eqx.filter_jit  # one program per network, not one eager cast per weight shape
def _cast(net, dtype):
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, net)


def _perturbed(net, seed: int):
    """Every array of ``net`` (weights, BatchNorm scales, offsets and running statistics) moved by 0.3·|N(0, 1)|,
    so that no BatchNorm is the identity and every bias matters. Drawn by NumPy on the host: as one jitted
    program (a threefry draw per weight shape) it compiled for 6–7 s per network."""
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(net)
    return treedef.unflatten([jnp.asarray(np.asarray(a) + 0.3 * np.abs(rng.standard_normal(a.shape)).astype(a.dtype))
                              for a in leaves])


@eqx.filter_jit  # one program per network and batch size, not one eager operation per layer
def _outputs(net, x):
    """The network's outputs on each example of ``x`` (inference mode)."""
    return jax.vmap(net)(x)


_forward_batch = eqx.filter_jit(forward_batch)
"""``forward_batch`` as one program per network and batch size, not one per operation (≈ 100 per call)."""


def _brute_force_ntk(net, x) -> np.ndarray:
    """K[i, j, c, d] = Σ_p ∂f_c(x_i)/∂θ_p ∂f_d(x_j)/∂θ_p from the explicit Jacobian of each example's
    outputs (one example at a time: no batch coupling), compiled once for all the examples (vmap)."""
    params, rest = trainable(net)
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def output(theta, xi):
        model = jax.tree_util.tree_map(lambda p, r: r if p is None else p, unravel(theta), rest,
                                       is_leaf=lambda v: v is None)
        return model(xi)

    jac = np.asarray(jax.jit(jax.vmap(jax.jacrev(output), in_axes=(None, 0)))(flat, x), np.float64)  # (n, C, P)
    return np.einsum("icp,jdp->ijcd", jac, jac)


@pytest.mark.parametrize("options", [RESNET, WRN], ids=["resnet", "wide_resnet"])
@pytest.mark.parametrize("norm", ["none", "batch"])
def test_ntk_gram_matches_brute_force(options, norm):
    _, net = _network(options, norm, parameterization="ntk")
    net = _perturbed(net, 1)
    x = jax.random.normal(jax.random.PRNGKey(2), (4, *SHAPE), jnp.float64)
    expected = _brute_force_ntk(net, x)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(np.asarray(empirical_ntk(net, x)), expected, rtol=1e-10, atol=1e-12)
    layers = np.asarray(empirical_ntk(net, x, per_layer=True))
    np.testing.assert_allclose(layers.sum(0), expected, rtol=1e-10, atol=1e-12)
    # the readout component of a bias-carrying readout on pooled features h̄: κ²c²(h̄ᵢ·h̄ⱼ + 1)δ_cd
    grams = component_grams(net, x)
    np.testing.assert_allclose(grams["readout"] + grams["hidden"], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("options", [RESNET, WRN], ids=["resnet", "wide_resnet"])
def test_kernels_are_per_example_in_inference_mode(options):
    """K(x₀, x₁) does not depend on the other examples of the batch: BatchNorm uses its running statistics."""
    _, net = _network(options, "batch")
    net = _perturbed(net, 4)
    x = jax.random.normal(jax.random.PRNGKey(5), (5, *SHAPE), jnp.float64)
    alone = np.asarray(empirical_ntk(net, x[:2]))
    np.testing.assert_allclose(np.asarray(empirical_ntk(net, x))[:2, :2], alone, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(_outputs(net, x))[:2], np.asarray(_outputs(net, x[:2])), rtol=1e-12)


@pytest.mark.parametrize("options", [RESNET, WRN, {**RESNET, "blocks": [2, 2, 2, 2]}],
                         ids=["resnet", "wide_resnet", "resnet18"])
def test_layer_names_follow_the_layers_in_forward_order(options):
    """``spec.layer_names`` counts the network's weight layers, which are its per-layer components."""
    spec, net = _network(options, "batch")
    params, _ = trainable(net)
    assert layer_components(params)[1] == len(net.layers) == len(spec.layer_names) == spec.weight_layers
    assert spec.layer_names[0] == "stem" and spec.layer_names[-1] == "readout"
    if options.get("blocks") == [2, 2, 2, 2]:  # ResNet-18: 17 convs, 3 projections, the readout
        assert spec.weight_layers == 21 and sum("shortcut" in n for n in spec.layer_names) == 3
        assert [s[0] for s in spec.stages] == [2, 4, 8, 16]


def test_parameterizations_give_the_same_function_at_init():
    x = jax.random.normal(jax.random.PRNGKey(0), (3, *SHAPE), jnp.float64)
    for options in (RESNET, WRN):
        outputs = [np.asarray(_outputs(_network(options, "batch", p)[1], x)) for p in ("standard", "ntk")]
        np.testing.assert_allclose(*outputs, rtol=1e-6)  # float32 init: W·σ/√n vs W then σ/√n


@pytest.mark.parametrize("options", [RESNET, WRN], ids=["resnet", "wide_resnet"])
def test_training_updates_batch_statistics_and_lowers_the_loss(options):
    from ntkpipe.lang.schema import TrainSpec

    _, net = _network(options, "batch", out_size=1, dtype=jnp.float32)
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(6), (12, *SHAPE)), np.float32)
    y = np.sign(x[:, :4, :4, 0].mean((1, 2)))[:, None]
    spec = TrainSpec.model_validate({"optimizer": {"name": "gd", "lr": 0.05}, "steps": 20, "dtype": "float32",
                                     "checkpoints": {"spacing": "linear", "count": 2}})

    def train_loss(model):  # the train-mode loss that the steps descend
        return float(jnp.mean((_forward_batch(model, jnp.asarray(x), jnp.ones(12))[0] - y) ** 2) / 2)

    trajectory = train(net, x, y, spec, key=jax.random.PRNGKey(0), measure=lambda m, i, last: {})
    after = trajectory.model
    assert train_loss(after) < 0.8 * train_loss(net)
    before_stats = [s for s in jax.tree.leaves(net, is_leaf=lambda n: isinstance(n, BatchStats))
                    if isinstance(s, BatchStats)]
    after_stats = [s for s in jax.tree.leaves(after, is_leaf=lambda n: isinstance(n, BatchStats))
                   if isinstance(s, BatchStats)]
    assert len(after_stats) == len(before_stats) > 0
    # the first BatchNorm sees the stem's output z = W₀ ∗ x (+ b); after 20 steps with momentum m = 0.1
    # its running mean is Σ_t m(1−m)^{19−t} mean_t(z) ≈ (1 − 0.9²⁰) · the batch mean (weights move little)
    assert all(np.abs(np.asarray(a.mean) - np.asarray(b.mean)).max() > 1e-4 for a, b in zip(after_stats, before_stats))
    assert all(np.all(np.asarray(a.var) > 0) for a in after_stats)
    # the run store keeps the statistics with the parameters: the restored network is the trained one
    (_, params), = [v for k, v in state_variables(trajectory).items() if k == PARAMS]
    restored = restored_model(net, params, jnp.float32)
    np.testing.assert_array_equal(np.asarray(_outputs(restored, jnp.asarray(x))), np.asarray(_outputs(after, jnp.asarray(x))))


def test_the_batch_statistics_are_those_of_the_real_examples():
    """A padded batch (mask 0 on the copies) gives the statistics of its real examples alone."""
    _, net = _network(RESNET, "batch")
    x = jax.random.normal(jax.random.PRNGKey(7), (4, *SHAPE), jnp.float64)
    padded = jnp.concatenate([x, x[:2] * 5.0])
    f, updated = _forward_batch(net, x, jnp.ones(4))
    f_padded, updated_padded = _forward_batch(net, padded, jnp.array([1.0] * 4 + [0.0] * 2))
    np.testing.assert_allclose(np.asarray(f_padded[:4]), np.asarray(f), rtol=1e-10)
    for a, b in zip(jax.tree.leaves(updated), jax.tree.leaves(updated_padded)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10)
    # and they are the batch's: the stem's BatchNorm moves its running mean by m·mean(z)
    z = jax.vmap(net.layers[0].conv)(x)
    np.testing.assert_allclose(np.asarray(updated.layers[0].norm.stats.mean), 0.1 * np.asarray(z.mean((0, 1, 2))),
                               rtol=1e-10)


def test_a_linearized_resnet_keeps_its_batch_statistics():
    """The linearization is that of the inference-mode network; its state does not move in training."""
    _, net = _network(RESNET, "batch")
    lin = Linearized(_perturbed(net, 8))
    x = jax.random.normal(jax.random.PRNGKey(9), (3, *SHAPE), jnp.float64)
    f, same = forward_batch(lin, x, jnp.ones(3))
    assert same is lin
    np.testing.assert_allclose(np.asarray(f), np.asarray(_outputs(lin.origin, x)), rtol=1e-12)
    assert jax.tree.leaves(split_state(trainable(lin)[0])[0]) == []  # no statistics among the trained arrays
    assert len(jax.tree.leaves(split_state(lin)[0])) > 0


def test_records_declare_capabilities():
    assert {n for n, r in ARCHITECTURES.items() if r.inputs == "image"} >= {"cnn", "resnet", "wide_resnet"}
    assert {n: r.spec for n, r in ARCHITECTURES.items()} == __import__(
        "ntkpipe.lang.schema", fromlist=["ARCHITECTURE_SPECS"]).ARCHITECTURE_SPECS


# --- validation ------------------------------------------------------------------------------

STUDY = """\
data: {source: digits, n_train: 12, n_test: 6, image_size: 8, classes: [0, 1]}
model: {architecture: wide_resnet, depth: 10, widen_factor: 0.25, norm: batch}
train: {optimizer: {name: gd, lr: 0.05}, steps: 3, checkpoints: {spacing: linear, count: 2}}
measure: [loss, kernel_components]
"""


def test_depth_that_is_not_6n_plus_4_is_an_error_with_the_fix(tmp_path):
    found = problems(tmp_path, STUDY.replace("depth: 10", "depth: 12"))
    assert len(found) == 1 and found[0].startswith("line 2: model.depth:"), found
    assert "depth 12 is not 6n + 4" in found[0] and "use 10 or 16" in found[0]


def test_widen_factor_that_gives_fractional_channels_is_an_error_with_the_fix(tmp_path):
    found = problems(tmp_path, STUDY.replace("widen_factor: 0.25", "widen_factor: 0.3"))
    assert len(found) == 1 and found[0].startswith("line 2: model.widen_factor:"), found
    assert "16·widen_factor = 4.8 channels" in found[0] and "whole number" in found[0]
    found = problems(tmp_path, STUDY.replace("depth: 10, widen_factor: 0.25", "width_multiplier: 0.1").replace(
        "wide_resnet", "resnet"))
    assert len(found) == 1 and found[0].startswith("line 2: model.width_multiplier:"), found
    assert "64·width_multiplier = 6.4 channels" in found[0]


def test_a_resnet_needs_images(tmp_path):
    text = STUDY.replace("source: digits, n_train: 12, n_test: 6, image_size: 8, classes: [0, 1]",
                         "source: linear_teacher, dim: 4, n_train: 8").replace(", kernel_components", "")
    found = problems(tmp_path, text)
    assert any("model.architecture" in p and "a wide_resnet needs image inputs" in p for p in found), found


# --- through the train job -------------------------------------------------------------------

@pytest.mark.computes("architecture:resnet", "architecture:wide_resnet", "kernel_components")
def test_tiny_resnet_studies_through_the_train_job(tmp_path):
    text = STUDY + """\
sweep:
  cases:
    architecture:
      wrn: {}
      resnet: {model: {architecture: resnet, width_multiplier: 0.0625, blocks: [1, 1], norm: batch}}
"""
    plan, stores = run_study_jobs(text.replace("norm: batch}\ntrain", "norm: none}\ntrain"), tmp_path)
    assert len(stores) == 2
    for (case,), ds in stores.items():
        loss = ds["loss"].values
        assert np.all(np.isfinite(loss)) and np.all(np.isfinite(ds[PARAMS].values))
        # checkpoint losses are those of the inference mode, which trails the batch statistics a few
        # steps behind: only the network without BatchNorm must have descended
        assert case == "resnet" or loss[-1] < loss[0]
        kv, kw = ds["kv_trace"].values[[0, -1]], ds["kw_trace"].values[[0, -1]]  # at init and end (every: 0)
        assert np.all(kv > 0) and np.all(kw > 0)
