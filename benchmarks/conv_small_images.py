"""LeNet-5's convolutions as XLA's convolution or as the im2col product P(h)·W
(``ntkpipe.models.cnn._conv``, which takes the product on inputs of at most ``SMALL_IMAGE_PIXELS``
positions).

For each input shape, LeNet-5 (ReLU, biases, float32 as training runs) is compiled both ways and
timed in alternation: the forward pass over 1,000 images, one SGD step on a batch of 128 (the
gradient of the mean logistic loss), and the same two for the linearization f₀ + ⟨∇f₀, θ − θ₀⟩
(a JVP, as ``ntkpipe.models.Linearized``). Printed per quantity: the compile seconds of both ways
and conv / im2col as min / median / max over the repeats of the per-repeat time ratio (> 1: the
product is faster).

    python benchmarks/conv_small_images.py                        # 8×8×1, 28×28×1, 32×32×3
    python benchmarks/conv_small_images.py --shapes 8x8x1 --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp

import ntkpipe.models.cnn as cnn
from ntkpipe.models import CNN, LENET5


def programs(shape: tuple[int, int, int], limit: int):
    """The four jitted computations of LeNet-5 on ``shape``, traced with ``SMALL_IMAGE_PIXELS = limit``."""
    net = CNN(shape, *LENET5, activation="relu", bias=True, key=jax.random.key(0))
    params, static = eqx.partition(net, eqx.is_array)

    def f(p, x):
        return eqx.combine(p, static)(x)

    def f_lin(p, d, x):
        return f(p, x) + jax.jvp(lambda q: f(q, x), (p,), (d,))[1]

    def loss(out, y):
        return jnp.mean(jax.nn.softplus(-y * out[:, 0]))

    def sgd(p, g):
        return jax.tree.map(lambda a, b: a - 0.05 * b, p, g)

    batched = jax.vmap(f, (None, 0))
    batched_lin = jax.vmap(f_lin, (None, None, 0))
    computations = {
        "forward, 1000 images": (lambda p, X, y: batched(p, X), 1000),
        "SGD step, batch 128": (lambda p, X, y: sgd(p, jax.grad(lambda q: loss(batched(q, X), y))(p)), 128),
        "linearized forward, 1000": (lambda p, X, y: batched_lin(p, p, X), 1000),
        "linearized SGD step, 128": (
            lambda p, X, y: sgd(p, jax.grad(lambda d: loss(batched_lin(p, d, X), y))(p)), 128),
    }
    X = jax.random.normal(jax.random.key(1), (1000, *shape), jnp.float32)
    y = jnp.sign(jax.random.normal(jax.random.key(2), (1000,), jnp.float32))
    saved, cnn.SMALL_IMAGE_PIXELS = cnn.SMALL_IMAGE_PIXELS, limit
    try:
        out = {}
        for name, (fn, n) in computations.items():
            tic = time.perf_counter()
            compiled = jax.jit(fn).lower(params, X[:n], y[:n]).compile()
            out[name] = (compiled, (params, X[:n], y[:n]), time.perf_counter() - tic)
        return out
    finally:
        cnn.SMALL_IMAGE_PIXELS = saved


def seconds(compiled, args) -> float:
    """Wall seconds of one call of ``compiled`` on ``args``, its result awaited."""
    tic = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    return time.perf_counter() - tic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="*", default=["8x8x1", "28x28x1", "32x32x3"])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"{jax.devices()[0].device_kind}; SMALL_IMAGE_PIXELS = {cnn.SMALL_IMAGE_PIXELS}")
    print("| input | computation | compile s conv / im2col | conv / im2col time: min / median / max |")
    print("|---|---|---|---|")
    for text in args.shapes:
        rows, cols, channels = (int(v) for v in text.split("x"))
        shape = (rows, cols, channels)
        conv, im2col = programs(shape, 0), programs(shape, 10**9)
        for name in conv:
            (a, args_a, ca), (b, args_b, cb) = conv[name], im2col[name]
            for compiled, call_args in ((a, args_a), (b, args_b)):  # first calls: allocation
                seconds(compiled, call_args)
            ratios = sorted(seconds(a, args_a) / seconds(b, args_b) for _ in range(args.repeats))
            print(f"| {text} | {name} | {ca:.2f} / {cb:.2f} | "
                  f"{ratios[0]:.2f} / {statistics.median(ratios):.2f} / {ratios[-1]:.2f} |")


if __name__ == "__main__":
    main()
