"""FLOPs of a run's training, the leading terms: 3·B·[FP] per step of B examples (a forward and a
backward pass), twice that for a linearization (its step takes a jvp too), none for a kernel model
kind (its dynamics are on its Gram). The cost model (:mod:`ntkpipe.study.cost`) charges seconds to
them; the training program's compile options (:func:`ntkpipe.compile_options.training_options`)
follow them."""

from __future__ import annotations

from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.lang.schema import RunSpec
from ntkpipe.resources import parameter_count
from ntkpipe.train.driver import total_steps


def training_flops(run: RunSpec) -> float:
    """3·(1 + linearized)·steps·B·[FP] of ``run`` (B the batch, all training points for full-batch steps)."""
    if MODEL_KINDS[run.model.kind].kernel:
        return 0.0
    linearized = MODEL_KINDS[run.model.kind].linearized
    steps = total_steps(run.train, run.data.n_train)
    batch = run.train.batch_size or run.data.n_train
    return 3.0 * (1 + linearized) * steps * batch * example_flops(run)


def example_flops(run: RunSpec) -> float:
    """[FP] of the run's network on one example: 2·P_θ for an MLP; for other architectures XLA's cost
    analysis of the forward pass (cached by network shapes: σ, seed and the like do not change it)."""
    if run.model.architecture == "mlp":
        return 2.0 * parameter_count(run)
    from ntkpipe.data import input_shape, output_count

    model = run.model.model_copy(update={"kind": "network", "origin": None, "gamma": 1.0}
                                 | ({"init": "gaussian"} if hasattr(run.model, "init") else {}))
    key = (model.model_dump_json(exclude={"sigma", "seed"}), input_shape(run.data), output_count(run.data))
    if key not in _FLOPS:
        import jax.numpy as jnp

        from ntkpipe.models import build_model
        from ntkpipe.ntk.cost import forward_flops

        _FLOPS[key] = forward_flops(build_model(model, key[1], key[2], 0), jnp.zeros(key[1], jnp.float32))
    return _FLOPS[key]


_FLOPS: dict[tuple, float] = {}
"""[FP] by (network section without σ and seed, input shape, outputs)."""
