"""Measurement programs compile with XLA:CPU's loop emitters (``ntkpipe.compile_options``): the same
programs as ``ntkpipe.filter_jit`` builds (arrays traced, other leaves static), numbers equal to the
fusion emitters' to float rounding, and inside an enclosing program they are part of it. On other
backends, which refuse XLA:CPU's options, they compile without them. A short run's training program
compiles with them too, by its training FLOPs, and trains to the same parameters to rounding."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe import compile_options
from ntkpipe.compile_options import LOOP_EMITTERS, SHORT_TRAINING_FLOPS, jit_with_options, measurement_jit
from ntkpipe.filter_jit import filter_jit
from ntkpipe.lang.schema import RunSpec
from ntkpipe.models.mlp import MLP
from ntkpipe.ntk import blocking, empirical_ntk
from ntkpipe.ntk.blocking import assemble_gram
from ntkpipe.resources import parameter_count
from ntkpipe.stages.inputs import run_context
from ntkpipe.study.cost import run_features
from ntkpipe.train import batches
from ntkpipe.train.flops import training_flops
from ntkpipe.train.loop import NetworkStepper, advance_steps, network_stepper
from ntkpipe.train.packed import _advance_pack, packed_stepper


def teacher_run(kind="network", epochs=5, activation="tanh", seed=0, batch_size: int | None = 8,
                optimizer="sgd") -> RunSpec:
    """An MLP 6 → 9 → 1 with biases (P = 6·9 + 9 + 9 + 1 = 73 parameters) on 40 points, SGD in batches
    of 8 (GD for ``batch_size=None``)."""
    return RunSpec.model_validate({
        "seed": seed, "data": {"source": "linear_teacher", "dim": 6, "n_train": 40, "n_test": 10},
        "model": {"kind": kind, "depth": 2, "width": 9, "bias": True, "activation": activation},
        "train": {"optimizer": {"name": optimizer if batch_size else "gd", "lr": 0.05}, "batch_size": batch_size,
                  "epochs": epochs},
        "measure": [{"name": "loss"}]})


def test_training_flops_are_three_passes_over_each_batch():
    """3·(1 + linearized)·steps·B·[FP] with [FP] = 2·P: 5 epochs of 40 points in batches of 8 are
    25 steps, full-batch 5 steps of 40; a kernel model kind trains no network."""
    def flops(spec):
        return training_flops(run_context(spec, {}))

    assert flops(teacher_run()) == 3 * 25 * 8 * 2 * 73
    assert flops(teacher_run("linearized")) == 2 * 3 * 25 * 8 * 2 * 73
    assert flops(teacher_run(batch_size=None)) == 3 * 5 * 40 * 2 * 73
    assert flops(teacher_run("kgd", batch_size=None)) == 0.0


def test_a_cnns_training_flops_are_the_cost_models_in_either_dtype():
    """LeNet-5's [FP] is XLA's cost analysis of its forward pass; the run's count (from its network,
    built in float32, and its float64 data) equals the cost model's (from the spec) whatever the
    training dtype."""
    for dtype in ("float32", "float64"):
        spec = RunSpec.model_validate({
            "seed": 0, "data": {"source": "digits", "n_train": 12, "n_test": 4},
            "model": {"architecture": "cnn", "preset": "lenet5", "activation": "relu", "bias": True},
            "train": {"optimizer": {"name": "gd", "lr": 0.01}, "steps": 3, "dtype": dtype},
            "measure": [{"name": "loss"}]})
        flops = training_flops(run_context(spec, {}))
        assert flops == run_features(spec)["conv_train_flops"] > 3 * 3 * 12 * 2 * parameter_count(spec)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's options; elsewhere XLA's defaults")
def test_a_short_run_trains_with_the_loop_emitters_to_the_defaults_parameters():
    """A tanh network (the activation whose steps the loop emitters slow most) of 25 steps compiles
    its steps with the loop emitters and trains to the parameters XLA's fusion emitters reach, to
    float32 rounding; one whose steps pass the threshold keeps the defaults, as does Adam (its step
    divides by the gradients' scale), and a pack of runs of the short one's shape compiles as each
    of them would."""
    spec = teacher_run()
    run = run_context(spec, {})
    assert training_flops(run) < SHORT_TRAINING_FLOPS["mlp"]
    short = network_stepper(run, {})
    assert short.program is jit_with_options(advance_steps, LOOP_EMITTERS)
    fusion = {"xla_cpu_use_fusion_emitters": True}  # XLA:CPU's default, named: the suite's XLA_FLAGS turn it off
    default = NetworkStepper(run.model0, run.data.x_train, run.data.y_train, spec.train, key=short.key,
                             compile_options=fusion)
    steps = np.array([0, 25])
    trained = [s.advance(s.init(steps), 0, 25)[0].diff for s in (short, default)]
    for a, b in zip(jax.tree.leaves(trained[0]), jax.tree.leaves(trained[1])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    moved = [np.abs(np.asarray(a) - np.asarray(b)).max() for a, b in zip(jax.tree.leaves(trained[0]),
                                                                         jax.tree.leaves(short.diff0))]
    assert max(moved) > 1e-3  # the steps moved the weights

    epochs = int(SHORT_TRAINING_FLOPS["mlp"] / training_flops(run) * 5) + 5
    long = run_context(teacher_run(epochs=epochs), {})
    assert training_flops(long) > SHORT_TRAINING_FLOPS["mlp"]
    assert network_stepper(long, {}).program is jit_with_options(advance_steps, None)
    assert network_stepper(run_context(teacher_run(optimizer="adam"), {}), {}).program is jit_with_options(advance_steps, None)
    pack = packed_stepper([run, run_context(teacher_run(seed=1), {})])
    assert pack.program is jit_with_options(_advance_pack, LOOP_EMITTERS)


def test_arrays_are_traced_and_other_leaves_static():
    traced = []

    def scaled(x, *, power: int):
        traced.append(power)
        return x**power

    f = measurement_jit(scaled)
    np.testing.assert_array_equal(f(jnp.arange(3.0), power=2), [0.0, 1.0, 4.0])
    np.testing.assert_array_equal(f(jnp.arange(1.0, 4.0), power=2), [1.0, 4.0, 9.0])  # new values: no new trace
    np.testing.assert_array_equal(f(jnp.arange(3.0), power=3), [0.0, 1.0, 8.0])  # a new static: traced again
    assert traced == [2, 3]


def test_a_measurement_agrees_with_the_default_program_to_rounding():
    """A tanh float32 network's outputs (``ntkpipe.measure.context._outputs``' program) under the
    measurement options and under XLA's defaults."""
    net = MLP(16, 64, 3, 4, activation="tanh", sigma=1.5, dtype=jnp.float32, key=jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (50, 16), jnp.float32)

    def outputs(model, x):
        return jax.vmap(model)(x)

    measured = np.asarray(measurement_jit(outputs)(net, x))
    default = np.asarray(filter_jit(outputs)(net, x))
    np.testing.assert_allclose(measured, default, rtol=1e-5, atol=1e-6)
    assert np.abs(default).max() > 0.1


def test_the_options_name_a_field_xla_reads():
    """An option XLA does not know fails the compile; these compile (XLA:CPU's: other backends refuse
    them, test_other_backends_compile_measurements_without_the_cpu_options)."""
    if jax.default_backend() != "cpu":
        pytest.skip("XLA:CPU's options, and the default backend is another")
    compiled = jax.jit(lambda x: jnp.tanh(x) * 2.0).lower(jnp.ones(4)).compile(compiler_options=LOOP_EMITTERS)
    np.testing.assert_allclose(compiled(jnp.ones(4)), 2.0 * np.tanh(1.0), rtol=1e-6)


def test_inside_jit_and_vmap_it_is_part_of_the_enclosing_program():
    """JAX refuses compile options on a nested jit: called on tracers, the measurement compiles with
    the enclosing program (an NTK inside a jitted or vmapped function)."""
    f = measurement_jit(lambda x: jnp.sin(x) * 2.0)
    x = jnp.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(jax.jit(lambda x: f(x) + 1.0)(x), 2.0 * np.sin(x) + 1.0, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(f)(x[:, None])[:, 0], 2.0 * np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda: f(x))(), 2.0 * np.sin(x), rtol=1e-6)  # x closed over, not traced


def test_an_ntk_of_closed_over_arrays_inside_jit():
    """``empirical_ntk`` runs inside ``jax.jit`` also where the network and inputs are constants of the
    jitted function: its measurement programs are then part of it (no compile options)."""
    net = MLP(3, 8, 2, 2, activation="relu", sigma=1.0, dtype=jnp.float64, key=jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (5, 3), jnp.float64)
    with jax.enable_x64(True):
        inside = np.asarray(jax.jit(lambda: empirical_ntk(net, x))())
        np.testing.assert_allclose(inside, np.asarray(empirical_ntk(net, x)), rtol=1e-12, atol=1e-14)


def test_other_backends_compile_measurements_without_the_cpu_options(monkeypatch):
    """XLA:GPU fails a compile that names XLA:CPU's option ("No such compile option"). An option no
    backend knows stands for it here: with XLA:CPU the default backend it is passed (and refused, by
    whichever backend compiles), with any other a measurement and the eager Gram's block writes
    compile without it."""
    unknown = {"xla_no_such_option": True}
    monkeypatch.setattr(compile_options, "LOOP_EMITTERS", unknown)
    monkeypatch.setattr(blocking, "LOOP_EMITTERS", unknown)
    blocking._write_block.cache_clear()
    double = measurement_jit(lambda x: 2.0 * x)

    def gram():
        return assemble_gram(lambda row, col: jnp.full((2, 2), 1.0 + row + col), (4, 4), (2, 2), True, output_axes=0)

    try:
        monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
        for call in (lambda: double(jnp.ones(3)), gram):
            with pytest.raises(jax.errors.JaxRuntimeError, match="No such compile option"):
                call()
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        np.testing.assert_array_equal(double(jnp.ones(3)), [2.0, 2.0, 2.0])
        expected = np.array([[1, 1, 3, 3], [1, 1, 3, 3], [3, 3, 5, 5], [3, 3, 5, 5]], np.float64)
        np.testing.assert_array_equal(gram(), expected)
    finally:
        blocking._write_block.cache_clear()  # no program compiled with the unknown option outlives the test


def test_epoch_orders_compile_with_the_loop_emitters_to_the_defaults_integers(monkeypatch):
    """The minibatch orders' program takes the loop emitters on XLA:CPU (an option no backend knows stands
    for them and is refused) and draws the permutations the default program draws, integer for integer."""
    key = jax.random.key(4)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    defaults = jax.jit(batches._orders, static_argnums=(1, 2))
    for n, epochs, first in ((37, 8, 0), (1000, 4, 5)):
        orders = np.asarray(batches.epoch_orders(key, n, epochs, first))
        np.testing.assert_array_equal(orders, np.asarray(defaults(key, n, epochs, first)))
        assert sorted(orders[-1]) == list(range(n))
    monkeypatch.setattr(compile_options, "LOOP_EMITTERS", {"xla_no_such_option": True})
    with pytest.raises(jax.errors.JaxRuntimeError, match="No such compile option"):
        batches.epoch_orders(key, 5, 2)
