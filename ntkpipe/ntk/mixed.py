r"""Mixed derivative M(x) = ∇²_{x,θ} f_c(x) and the neural anisotropy directions (NADs).

With g(x) = ∇_θ f_c(x) ∈ R^P (output c, θ the trainable parameters) and d = prod(input shape),

    M(x) = ∂g/∂x ∈ R^{P×d},        M̄ = E_{x~N(0,I)} M(x).

Theorem 1 of linearized-networks (Eq. 4): for g_u(x) = uᵀx, |u| = 1, x ~ N(0, I), the alignment of
g_u with the NTK is

    α(g_u) = ‖E_x[(uᵀx) ∇_θ f(x)]‖² = ‖M̄ u‖²,

by Stein's lemma E[x h(x)] = E[∇h(x)] applied to each h = ∂f/∂θ_p. The NADs are the right singular
vectors v_j of M̄, ordered by σ_j² = α(g_{v_j}) (Sec. 3.2); the authors' code, like App. C.2, takes
M(0) instead of M̄ (a first-order approximation of the expectation).

M is never formed. Mu is the jvp of g along u (forward-over-reverse), Mᵀw the vjp of g with
cotangent w, and averages over points x_s with weights w_s come from differentiating
G(X) = ∇_θ Σ_s w_s f_c(x_s): ∂G/∂X · (u, …, u) = Σ_s w_s M(x_s)u, and the vjp of G returns the
per-point w_s M(x_s)ᵀw, summed over s. :func:`stein_check` estimates both sides of Eq. 4 by
Monte Carlo.
"""

from __future__ import annotations

from typing import Literal, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from ntkpipe.compile_options import measurement_jit
from ntkpipe.models import trainable
from ntkpipe.ntk.alignment import jacobian_alignments
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.ntk.precision import to_float64, with_x64

Point = Literal["origin", "gaussian"]

# Draws per side of the Stein check. On GeLU MLPs (d = 5, width 7; d = 10, width 50) and a CNN
# (8×8 images, 4 channels), for the top 3, a middle, the last NAD and a random direction, 6 seeds
# each: relative error 0.6–2% rms per direction, at most 4% in all 108 trials.
STEIN_SAMPLES = 2**16


@with_x64
def gaussian_points(key: PRNGKeyArray, samples: int, input_shape: tuple[int, ...]) -> Float[Array, " S *shape"]:
    """x_s ~ N(0, I), shape ``(samples, *input_shape)``, float64: the draws behind ``at="gaussian"``."""
    return jax.random.normal(key, (samples, *input_shape), jnp.float64)


def _weighted_gradient(arrays, rest, output: int):
    """``(X (s, *shape), w (s,)) -> G = ∇_θ Σ_s w_s f_output(x_s)``, a pytree like ``arrays``."""

    def gradient(x, weights):
        def weighted_sum(leaves):
            return weights @ jax.vmap(eqx.combine(leaves, rest))(x)[:, output]

        return jax.grad(weighted_sum)(arrays)

    return gradient


def _mean_jvp(arrays, rest, output, x_blocks, w_blocks, tangents: Float[Array, " k *shape"]):
    """Σ_s w_s M(x_s) u_m for each of the ``k`` tangents: a pytree like ``arrays``, leading axis k."""
    gradient = _weighted_gradient(arrays, rest, output)

    def add_block(total, block):
        x, weights = block

        def along(u):
            tangent = jnp.broadcast_to(u, x.shape)
            return jax.jvp(lambda points: gradient(points, weights), (x,), (tangent,))[1]

        return jax.tree.map(jnp.add, total, jax.vmap(along)(tangents)), None

    zeros = jax.tree.map(lambda a: jnp.zeros((len(tangents), *a.shape), a.dtype), arrays)
    return lax.scan(add_block, zeros, (x_blocks, w_blocks))[0]


def _mean_vjp(arrays, rest, output, x_blocks, w_blocks, cotangents) -> Float[Array, " k *shape"]:
    """Σ_s w_s M(x_s)ᵀ w_m for each of the ``k`` cotangents (a pytree like ``arrays``, leading axis k)."""
    gradient = _weighted_gradient(arrays, rest, output)

    def add_block(total, block):
        x, weights = block
        _, pullback = jax.vjp(lambda points: gradient(points, weights), x)
        (per_point,) = jax.vmap(pullback)(cotangents)
        return total + per_point.sum(axis=1), None

    zeros = jnp.zeros((jax.tree.leaves(cotangents)[0].shape[0], *x_blocks.shape[2:]), jnp.float64)
    return lax.scan(add_block, zeros, (x_blocks, w_blocks))[0]


@measurement_jit
def _gram_columns(arrays, rest, output: int, x_blocks, w_blocks, basis_blocks: Float[Array, "B b *shape"]):
    def columns(basis):
        products = _mean_jvp(arrays, rest, output, x_blocks, w_blocks, basis)
        return _mean_vjp(arrays, rest, output, x_blocks, w_blocks, products)

    return lax.map(columns, basis_blocks)


@measurement_jit
def _half_products(arrays, rest, output: int, half_a: tuple[Array, Array], half_b: tuple[Array, Array],
                   tangents: Float[Array, " k *shape"]) -> Float[Array, " k"]:
    """⟨M̄_A u, M̄_B u⟩ for each tangent u, M̄_A and M̄_B the averages of M over two sets of points."""
    products_a = _mean_jvp(arrays, rest, output, *half_a, tangents)
    products_b = _mean_jvp(arrays, rest, output, *half_b, tangents)
    total = sum(
        jnp.sum((a * b).reshape(len(tangents), -1), axis=1)
        for a, b in zip(jax.tree.leaves(products_a), jax.tree.leaves(products_b))
    )
    return cast(Array, total)  # a sum over the trainable leaves, never empty (so never the start value 0)


def _blocked_points(points: Float[Array, " S *shape"], sample_block: int) -> tuple[Array, Array]:
    """Points in ``(B, b, *shape)`` blocks with weights 1/S; padded points get weight 0."""
    samples = len(points)
    size = min(sample_block, samples)
    num_blocks = -(-samples // size)
    padding = num_blocks * size - samples
    weights = jnp.pad(jnp.full(samples, 1.0 / samples), (0, padding))
    points = jnp.pad(points, [(0, padding)] + [(0, 0)] * (points.ndim - 1))
    return points.reshape(num_blocks, size, *points.shape[1:]), weights.reshape(num_blocks, size)


def _points(at: Point, input_shape: tuple[int, ...], samples: int, key: PRNGKeyArray | None):
    if at == "origin":
        return jnp.zeros((1, *input_shape), jnp.float64)
    if at != "gaussian":
        raise ValueError(f"at must be 'origin' or 'gaussian', got {at!r}")
    if samples < 1 or key is None:
        raise ValueError(f"at='gaussian' needs samples >= 1 and a key, got samples={samples}, key={key}")
    return gaussian_points(key, samples, input_shape)


@with_x64
def mixed_gram(
    model: eqx.Module,
    input_shape: tuple[int, ...],
    *,
    at: Point = "origin",
    samples: int = 0,
    key: PRNGKeyArray | None = None,
    output: int = 0,
    block_size: int = 32,
    sample_block: int = 16,
) -> Float[Array, "d d"]:
    r"""MᵀM ∈ R^{d×d}, with M = M(0) (``at="origin"``) or M̄ = (1/S) Σ_s M(x_s) (``at="gaussian"``).

    .. math::
        (M^⊤M)_{kl} = ⟨M e_k, M e_l⟩,   M = ∇²_{x,θ} f_c   (linearized-networks Theorem 1)

    Column k is Mᵀ(M e_k): one averaged jvp of g = ∇_θ f_c along e_k, then one averaged vjp with
    that cotangent, for ``block_size`` basis vectors at a time (vmapped). The Gaussian points are
    ``gaussian_points(key, samples, input_shape)``; they enter ``sample_block`` at a time. Cost: d
    jvps and d vjps of g per point, so ``at="gaussian"`` costs S times ``at="origin"`` (a LeNet on
    32×32 images, P = 135,821: ≈ 10 s at the origin on two CPU cores).

    Args:
        model: equinox module mapping one example of ``input_shape`` to ``(C,)``; it is cast to
            float64, θ = its trainable parameters.
        input_shape: shape of one example, e.g. ``(D,)`` or ``(H, W, C)``; d = its product.
        at: ``"origin"`` (what the authors' code does) or ``"gaussian"`` (Theorem 1).
        samples: S, number of Gaussian points (``at="gaussian"`` only); M̄'s Monte-Carlo error
            falls as S^{-1/2}.
        key: PRNG key of the Gaussian points (``at="gaussian"`` only).
        output: index c of the output differentiated.
        block_size: basis vectors per jvp/vjp pass; memory ≈ ``block_size`` × P floats plus
            ``block_size × sample_block`` forward-over-reverse passes.
        sample_block: Gaussian points per pass.

    Returns:
        ``(d, d)`` float64, symmetric positive semi-definite (to rounding).

    Raises:
        ValueError: unknown ``at``; ``at="gaussian"`` without ``samples >= 1`` and a key.

    Example:
        >>> gram = mixed_gram(model, (32, 32, 1))             # M(0)ᵀM(0) of a LeNet
    """
    points = _points(at, tuple(input_shape), samples, key)
    d = int(np.prod(input_shape))
    size = min(block_size, d)
    num_blocks = -(-d // size)
    basis = jnp.eye(num_blocks * size, d, dtype=jnp.float64).reshape(num_blocks, size, *input_shape)
    columns = _gram_columns(*trainable(to_float64(model)), output, *_blocked_points(points, sample_block), basis)
    return columns.reshape(num_blocks * size, d)[:d]


@with_x64
def neural_anisotropy_directions(
    model: eqx.Module,
    input_shape: tuple[int, ...],
    *,
    at: Point = "origin",
    samples: int = 1024,
    key: PRNGKeyArray | None = None,
    top_k: int | None = None,
    output: int = 0,
    block_size: int = 32,
) -> tuple[np.ndarray, np.ndarray]:
    r"""NADs: right singular vectors v_j of M = M(0) or M̄, and σ_j² (linearized-networks Sec. 3.2).

    .. math::
        M^⊤M\, v_j = σ_j^2 v_j,   σ_1^2 ≥ σ_2^2 ≥ …,   σ_j^2 = ‖M v_j‖^2 = α(g_{v_j})  (Theorem 1)

    from the eigendecomposition of :func:`mixed_gram` (float64). σ_j² is the alignment of
    x ↦ v_jᵀx with the NTK that Theorem 1 predicts (exactly so for M̄, S → ∞). Each v_j has unit
    norm and its largest-magnitude entry positive.

    Args:
        model, input_shape, at, key, output, block_size: as in :func:`mixed_gram`.
        samples: Gaussian points for ``at="gaussian"`` (ignored at the origin).
        top_k: number of leading pairs returned (all d when ``None``).

    Returns:
        ``(sigma_sq (k,), directions (k, *input_shape))``, float64 numpy arrays.

    Example:
        >>> sigma_sq, nads = neural_anisotropy_directions(lenet, (32, 32, 1), top_k=10)
        >>> x, y = nad_samples(nads[3], 10_000, rng)          # ntkpipe.data.nad, App. C.1
    """
    gram = mixed_gram(model, input_shape, at=at, samples=samples, key=key, output=output, block_size=block_size)
    sigma_sq, vectors = top_eigenpairs(np.asarray(gram), top_k)
    return sigma_sq, vectors.T.reshape(-1, *input_shape)


@with_x64
def stein_check(
    model: eqx.Module,
    input_shape: tuple[int, ...],
    directions: Float[ArrayLike, " k *shape"],
    *,
    samples: int = STEIN_SAMPLES,
    key: PRNGKeyArray,
    output: int = 0,
    block_size: int = 256,
    sample_block: int = 16,
) -> dict[str, np.ndarray]:
    r"""Both sides of Theorem 1 (Stein's lemma), each a Monte-Carlo estimate, for directions u_m.

    .. math::
        α_{mc}(u) = \Big\| E_x\big[(u^⊤x)\, ∇_θ f_c(x)\big] \Big\|^2
        \quad\text{vs}\quad
        α_{Stein}(u) = \big\| E_x[M(x)]\, u \big\|^2,   x \sim N(0, I)

    The left side averages a_s = (uᵀx_s) ∇_θ f_c(x_s) over draws {x_s} and their mirror images
    {−x_s} (antithetic pairs: the pair mean ½(uᵀx)(∇_θ f(x) − ∇_θ f(−x)) drops the even part of
    ∇_θ f, whose mean E ∇_θ f is most of E‖∇_θ f‖² yet contributes nothing to α), the right side
    a'_s = M(x'_s) u over independent draws {x'_s} (``gaussian_points`` of the two halves of
    ``key``). Each ‖E a‖² is estimated without bias as μ̂_Aᵀμ̂_B, the product of the means over
    the two halves A, B of its draws; the plain ‖μ̂‖² is biased upward by tr Cov(a)/S. On a
    LeNet (E‖∇_θ f‖² ≈ 4, α ≈ 5·10⁻⁴ for a random u) the plain left side is off by more than α
    at S = 8192; with both devices its error at S = 2048 is ≈ 12% rms. The left side is
    :func:`~ntkpipe.ntk.alignment.jacobian_alignments` over the 2S points with cotangents
    (uᵀx)/(4|A|) on A and ±(uᵀx)/(4|B|) on B, by polarization
    μ̂_Aᵀμ̂_B = ‖(μ̂_A + μ̂_B)/2‖² − ‖(μ̂_A − μ̂_B)/2‖² (blocked sums of per-sample gradients, never
    stored); the right side is two averaged jvps of g = ∇_θ f_c along u.

    Monte-Carlo error: the estimates fluctuate ∝ S^{-1/2}, so the relative error falls as S^{-1/2}
    (measured rms per direction on small GeLU nets: 2–5%, 1–2.5%, 0.6–1.5% at S = 2^13, 2^15,
    2^17), with a constant that grows as α(g_u) shrinks next to the variance of (uᵀx)∇_θ f(x):
    low-ranked NADs and larger networks need more draws (LeNet on 32×32 images: ≈ 12% rms at
    S = 2^11, 3–32% over 4 directions and 3 seeds, so ≈ 2% is expected at 2^16). The default
    S = 2^16 gives 0.6–2% rms, at most 4%, on small GeLU MLPs and CNNs (``STEIN_SAMPLES``).

    Args:
        model: equinox module mapping one example of ``input_shape`` to ``(C,)`` (cast to float64).
        input_shape: shape of one example; d = its product.
        directions: ``(k, *input_shape)`` vectors u_m (unit vectors for α(g_u); both sides scale as |u|²).
        samples: S ≥ 2, independent draws per side (the left side also evaluates their mirror
            images); memory holds the draws.
        key: PRNG key of the draws.
        output: index c of the output.
        block_size: examples per vjp of the left side; memory ≈ 2k × P floats plus one block's
            forward and 2k backward passes.
        sample_block: points per averaged jvp of the right side.

    Returns:
        ``{"alpha_monte_carlo", "alpha_stein", "relative_error"}``, each ``(k,)`` float64 numpy, with
        relative_error = |α_mc − α_Stein| / α_Stein.

    Raises:
        ValueError: ``samples < 2``.

    Example:
        >>> _, nads = neural_anisotropy_directions(model, (5,), top_k=3)
        >>> stein_check(model, (5,), nads, key=jax.random.key(0))["relative_error"]  # a few percent
    """
    if samples < 2:
        raise ValueError(f"the half-sample estimates need samples >= 2 draws per side, got {samples}")
    model = to_float64(model)
    input_shape = tuple(input_shape)
    directions = jnp.asarray(directions, jnp.float64).reshape(-1, *input_shape)
    mc_key, stein_key = jax.random.split(key)
    half = samples // 2
    z = gaussian_points(mc_key, samples, input_shape)
    x = jnp.concatenate([z[:half], -z[:half], z[half:], -z[half:]])  # antithetic pairs in each half
    in_a = jnp.arange(2 * samples) < 2 * half
    projections = x.reshape(2 * samples, -1) @ directions.reshape(len(directions), -1).T  # (2S, k)
    weights = jnp.where(in_a, 0.25 / half, 0.25 / (samples - half))  # cotangent sums (μ̂_A ± μ̂_B)/2
    sums = (projections * weights[:, None]).T
    differences = (projections * jnp.where(in_a, weights, -weights)[:, None]).T
    (num_outputs,) = jax.eval_shape(model, x[0]).shape  # pyright: ignore[reportArgumentType]  # eqx.Module: no __call__
    cotangents = jnp.zeros((2 * len(directions), 2 * samples, num_outputs))
    cotangents = cotangents.at[:, :, output].set(jnp.concatenate([sums, differences]))
    polarized = np.asarray(jacobian_alignments(model, x, cotangents, block_size=block_size))
    alpha_mc = polarized[: len(directions)] - polarized[len(directions) :]
    x_stein = gaussian_points(stein_key, samples, input_shape)
    half_a, half_b = _blocked_points(x_stein[:half], sample_block), _blocked_points(x_stein[half:], sample_block)
    alpha_stein = np.asarray(_half_products(*trainable(model), output, half_a, half_b, directions))
    return {
        "alpha_monte_carlo": alpha_mc,
        "alpha_stein": alpha_stein,
        "relative_error": np.abs(alpha_mc - alpha_stein) / alpha_stein,
    }
