"""The one training driver: its checkpoint schedule and divergence rule are the same for every stepper
(a synthetic one, the network, a pack, the closed-form kernel models), and every model kind's record
names a stepper factory that exists."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import TrainSpec
from ntkpipe.models import MLP
from ntkpipe.train.driver import EXPLOSION_FACTOR, checkpoint_steps, drive, stepper_factory
from ntkpipe.train.kernel_dynamics import ClosedFormStepper, KernelStart, kgd_states, ofe_states
from ntkpipe.train.loop import NetworkStepper
from ntkpipe.train.packed import PackedStepper


class Geometric:
    """A synthetic stepper: member i's loss after s steps is L₀ gᵢˢ (its state is the step); a
    member listed in ``nan_at`` reports a non-finite step when it passes that step."""

    def __init__(self, growth, l0=1.0, nan_at=(), judged=True):
        self.growth, self.l0, self.nan_at, self.judged = list(growth), l0, dict(nan_at), judged
        self.members = len(self.growth)
        self.splits = False

    def init(self, steps):
        return 0

    def advance(self, state, done, target):
        return target, np.array([not (i in self.nan_at and done < self.nan_at[i] <= target)
                                 for i in range(self.members)])

    def checkpoint(self, state, member):
        return self.l0 * self.growth[member] ** state

    def can_diverge(self, state, member):
        return self.judged

    def final(self, state, member):
        return None, {"step": float(state)}

    def member(self, state, member):
        return state

    def joined(self, states):
        return states[0]


def spec(**train) -> TrainSpec:
    base = {"optimizer": {"name": "gd", "lr": 0.1}, "dtype": "float64", "checkpoints": {"spacing": "linear", "count": 10}}
    length = {} if {"epochs", "max_time"} & set(train) else {"steps": 10}
    return TrainSpec.model_validate({**base, **length, **train})


def loss_measure(checkpoint, index, last):
    return {"loss": float(checkpoint)}


def test_the_schedule_is_the_specs_for_every_member():
    log = spec(steps=1000, checkpoints={"per_decade": 2})
    (a, b) = drive(Geometric([1.0, 0.5]), log, [loss_measure] * 2, n_train=8, etas=[0.1, 0.3])
    expected = [0, 1, 3, 10, 32, 100, 316, 1000]  # round(10^(k/2)) up to the total
    assert checkpoint_steps(log.checkpoints, 1000).tolist() == expected
    for traj, eta in [(a, 0.1), (b, 0.3)]:
        assert traj.steps.tolist() == expected and not traj.diverged
        np.testing.assert_array_equal(traj.time, np.array(expected) * eta)
        np.testing.assert_array_equal(traj.epoch, expected)  # full batch: one step per epoch
    np.testing.assert_allclose(b.series["loss"], 0.5 ** np.array(expected, float), rtol=1e-15)
    assert b.finals == {"step": 1000.0}
    minibatch = spec(epochs=3, batch_size=3, checkpoints={"spacing": "linear", "count": 3})
    (traj,) = drive(Geometric([1.0]), minibatch, [loss_measure], n_train=8, etas=[0.1])
    assert traj.steps.tolist() == [0, 3, 6, 9] and traj.epoch.tolist() == [0, 1, 2, 3]  # ⌈8/3⌉ = 3 steps an epoch


def test_a_blow_up_stops_its_member_at_the_known_checkpoint():
    """L_s = 4ˢ: past 10³ · L₀ at step 5 (4⁵ = 1024), so steps 6… are NaN though finite; the other
    member goes on; a loss that ends 16-fold above L₀ (> EXPLOSION_FACTOR) is diverged though recorded."""
    a, b, c = drive(Geometric([4.0, 0.5, 4.0 ** 0.2]), spec(divergence_factor=1e3), [loss_measure] * 3,
                    n_train=8, etas=[0.1] * 3)
    assert a.diverged and not b.diverged and c.diverged
    np.testing.assert_array_equal(a.series["loss"][:6], 4.0 ** np.arange(6))
    assert np.isnan(a.series["loss"][6:]).all() and a.finals == {"step": 5.0}  # its state where it stopped
    np.testing.assert_array_equal(b.series["loss"], 0.5 ** np.arange(11))
    assert np.isfinite(c.series["loss"]).all() and c.series["loss"][-1] == pytest.approx(4.0 ** 2)
    assert 4.0 ** 2 > EXPLOSION_FACTOR


def test_a_non_finite_step_stops_its_member_before_it_is_measured():
    a, b = drive(Geometric([1.0, 1.0], nan_at={0: 7}), spec(), [loss_measure] * 2, n_train=8, etas=[0.1] * 2)
    assert a.diverged and not b.diverged
    assert np.isfinite(a.series["loss"][:7]).all() and np.isnan(a.series["loss"][7:]).all()
    assert a.finals == {"step": 7.0} and b.finals == {"step": 10.0}


def test_a_member_without_dynamics_is_measured_but_never_diverged():
    (traj,) = drive(Geometric([float("nan")], judged=False), spec(), [loss_measure], n_train=8, etas=[0.1])
    assert not traj.diverged and np.isnan(traj.series["loss"][1:]).all() and traj.series["loss"][0] == 1.0


def one_weight(sigma: float = 1.0) -> MLP:
    """f(x) = σ w x, one weight w = 1 (depth 1, width unused)."""
    net = MLP(1, 1, 1, 1, activation="linear", sigma=sigma, dtype=jnp.float64, key=jax.random.PRNGKey(0))
    return jax.tree.map(lambda a: jnp.ones_like(a) if isinstance(a, jax.Array) else a, net)


def network_loss(model, index, last):
    return {"loss": float(0.5 * np.sum(np.asarray(jax.vmap(model)(np.ones((1, 1)))) ** 2))}


def test_the_network_and_a_pack_diverge_at_the_known_step():
    """GD on L = ½w² (x = 1, y = 0): w ← (1 − η)w, so L_s = (1 − η)^{2s} L₀; η = 3 multiplies L by 4 a
    step and passes 10³ L₀ at step 5, η = 0.5 converges. A pack of both stops the first alone."""
    train = spec(divergence_factor=1e3, optimizer={"name": "gd", "lr": 3.0})
    x, y = np.ones((1, 1)), np.zeros((1, 1))
    (single,) = drive(NetworkStepper(one_weight(), x, y, train, key=jax.random.PRNGKey(1)), train, [network_loss],
                      n_train=1, etas=[3.0])
    assert single.diverged
    np.testing.assert_allclose(single.series["loss"][:6], 0.5 * 4.0 ** np.arange(6), rtol=1e-12)
    assert np.isnan(single.series["loss"][6:]).all()
    assert float(single.model.weights[0][0, 0]) == pytest.approx((-2.0) ** 5)  # where it stopped
    stepper = PackedStepper([one_weight(), one_weight()], [x, x], [y, y], [x, x], train,
                            keys=[jax.random.PRNGKey(1)] * 2, etas=[3.0, 0.5], lr_scales=[1.0, 1.0])
    measures = [lambda cp, index, last, i=i: {"loss": float(0.5 * np.sum(cp["f_train"][i] ** 2))} for i in range(2)]
    dead, healthy = drive(stepper, train, measures, n_train=1, etas=[3.0, 0.5])
    assert dead.diverged and not healthy.diverged
    np.testing.assert_allclose(dead.series["loss"], single.series["loss"], rtol=1e-12)
    np.testing.assert_allclose(healthy.series["loss"], 0.5 * 0.25 ** np.arange(11), rtol=1e-12)
    np.testing.assert_array_equal(healthy.time, np.arange(11) * 0.5)


def kernel_loss(checkpoint, index, last):
    f_train, _, _ = checkpoint
    return {"loss": float(0.5 * np.mean(np.sum((f_train - 1.0) ** 2, axis=1)))}


def test_closed_form_kernel_models_follow_the_same_rule():
    """KGD on one point with K = 1, f₀ = 0, y = 1: Δ_s = (1 − η)ˢ Δ₀. η = 3 (η λ > 2) is unbounded: measured
    at step 0 only, diverged; η = 0.5 gives L_s = ½ · 4⁻ˢ. An OFE with a NaN γ (no γ̂ fits) is NaN, not diverged."""
    start = KernelStart(np.ones((2, 2)), np.zeros((2, 1)), np.ones((1, 1)))
    for lr, diverged in [(3.0, True), (0.5, False)]:
        train = spec(optimizer={"name": "gd", "lr": lr})
        (traj,) = drive(ClosedFormStepper(kgd_states(start, lr, 1.0), start.y), train, [kernel_loss], n_train=1,
                        etas=[lr])
        assert traj.diverged == diverged and traj.series["loss"][0] == 0.5
        if diverged:
            assert np.isnan(traj.series["loss"][1:]).all()
        else:
            np.testing.assert_allclose(traj.series["loss"], 0.5 * 0.25 ** np.arange(11), rtol=1e-12)
    (fitless,) = drive(ClosedFormStepper(ofe_states(start, float("nan"), 0.1), start.y), spec(), [kernel_loss],
                       n_train=1, etas=[0.1])
    assert not fitless.diverged and np.isnan(fitless.series["loss"]).all() and np.isnan(fitless.finals["ofe_gamma"])


def test_every_model_kind_names_a_stepper_factory():
    for name, kind in MODEL_KINDS.items():
        assert callable(stepper_factory(name))
        assert (kind.pack_stepper is None) == kind.kernel  # weights pack, kernels do not
        if kind.pack_stepper is not None:
            assert callable(stepper_factory(name, packed=True))
    with pytest.raises(ValueError, match="does not train packed runs"):
        stepper_factory("kgd", packed=True)
