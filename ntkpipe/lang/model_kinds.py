"""The model kinds a run may train (``model.kind``), one record each.

A :class:`ModelKind` says what the language needs to know of a kind (the schema's ``model.kind``,
its checks, planning, resources and which measurements apply read it) and names the stepper that
trains it: a factory in :mod:`ntkpipe.train` that the one training driver
(:func:`ntkpipe.train.driver.drive`) steps from checkpoint to checkpoint. The factory is named, not
imported, since the language is the bottom layer; :func:`ntkpipe.train.driver.stepper_factory`
imports it when a run trains.

With L = (1/2P) Σ_μ |f_μ − y_μ|², a network's outputs move as ḟ = −(η/P) K (f − y); the kernel kinds
replace the network by a prescribed kernel K(t) (kernel-alignment Figs. 1–2).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelKind:
    """One model kind.

    Attributes:
        name: its name in a spec (``model.kind``).
        doc: what it trains, with the math (paper and equation).
        stepper: ``"module:factory"`` of its single-run stepper, ``factory(run, reference) → Stepper``
            (``run`` a :class:`ntkpipe.train.driver.Run`, ``reference`` the final values it
            reads of its network, ``{}`` for none).
        pack_stepper: ``"module:factory"`` of its packed stepper, ``factory(runs) → Stepper`` over the
            runs of one pack (same shapes), or None if its runs never pack.
        kernel: it evolves a kernel, not weights: no parameters are trained or stored, it starts from
            the network's initial NTK over train ∪ test, and it trains by full-batch GD on the MSE.
        reference: the final measurement of this run's trained ``network`` (same config, ``kind:
            network``) it reads, or None.
        linearized: its model is the network's linearization f(θ₀) + ∇f(θ₀)·(θ − θ₀) (it may take an
            ``origin``; a linearization keeps θ₀, a second copy of the parameters).
        rescaled: its network divides its output by ``model.gamma`` and trains at η₀γ² (kernel-alignment
            Sec. 4.2); False where γ enters the dynamics instead and K₀ is the unscaled network's.
        frozen_gamma: ``model.gamma: 0`` (a frozen kernel) is allowed.
        test_outputs: it predicts the test points (measurements of test outputs apply).
        finals: the numbers its dynamics yields besides the series (stored as ``dynamics_<name>``).
    """

    name: str
    doc: str
    stepper: str
    pack_stepper: str | None = None
    kernel: bool = False
    reference: str | None = None
    linearized: bool = False
    rescaled: bool = True
    frozen_gamma: bool = False
    test_outputs: bool = True
    finals: tuple[str, ...] = ()


_OFE_FINALS = ("ofe_gamma", "ofe_conservation_error", "ofe_final_alignment")

MODEL_KINDS: dict[str, ModelKind] = {kind.name: kind for kind in [
    ModelKind("network", "the network f(θ) trained by its optimizer",
              "ntkpipe.train.loop:network_stepper", "ntkpipe.train.packed:packed_stepper"),
    ModelKind("linearized", "f(θ₀) + ∇f(θ₀)·(θ − θ₀) (with an ``origin``: the unbiased (θ − θ_k)ᵀ∇f_{θ_k}(x) "
              "around a pretrained θ_k; linearized-networks Sec. 4.3)",
              "ntkpipe.train.loop:network_stepper", "ntkpipe.train.packed:packed_stepper", linearized=True),
    ModelKind("kgd", "kernel gradient descent with the network's initial NTK K₀ frozen, f_{k+1} = f_k − (η/P)K₀(f_k − y) "
              "from the network's initial outputs, exact through K₀'s eigendecomposition (kernel-alignment Fig. 1, "
              "Eq. 4; = training ``linearized`` with GD)", "ntkpipe.train.kernel_dynamics:kgd_stepper", kernel=True),
    ModelKind("akgd", "``kgd`` with K₀ rescaled to the Frobenius norm ‖K_T‖_F of the final NTK of this run's network",
              "ntkpipe.train.kernel_dynamics:akgd_stepper", kernel=True, reference="kernel_norm"),
    ModelKind("ofe", "optimal feature evolution (kernel-alignment Eq. 6, App. B) Δ̇ = −(η/P)KΔ, "
              "K̇ = γ(η/P)(ΔΔᵀK + KΔΔᵀ) from K₀ and Δ₀ = −y (f₀ = 0, as in the paper), conserving C = γΔΔᵀ + K, "
              "so K∞ = γyyᵀ + K₀ (Eq. 7)", "ntkpipe.train.kernel_dynamics:ofe_stepper", kernel=True,
              rescaled=False, frozen_gamma=True, test_outputs=False, finals=_OFE_FINALS),
    ModelKind("ofe_fit", "the OFE with γ̂, the γ at which A(γyyᵀ + K₀, y) equals the final alignment of this run's "
              "network (Fig. 2C–D)", "ntkpipe.train.kernel_dynamics:ofe_fit_stepper", kernel=True, reference="alignment",
              rescaled=False, test_outputs=False, finals=_OFE_FINALS),
]}
"""``model.kind`` → its record."""


def kinds_with(flag: str) -> str:
    """The kinds whose attribute ``flag`` is set, for messages: ``'ofe' or 'ofe_fit'``."""
    return " or ".join(repr(name) for name, kind in MODEL_KINDS.items() if getattr(kind, flag))
