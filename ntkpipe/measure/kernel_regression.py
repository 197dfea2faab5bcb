r"""Kernel regression with an empirical NTK, and its agreement with the trained network.

The silent-alignment paper (Atanasov, Bordelon & Pehlevan 2022, Sec. 2, Eq. 2–3) compares the
trained network's test outputs with the kernel-regression predictor of a fixed kernel,

.. math::
    \hat f(x) = k(x)^⊤ K^{-1} y, \qquad k(x)_μ = K(x, x_μ), \quad K_{μν} = K(x_μ, x_ν),

for the NTK at initialization (lazy / kernel regime) and the NTK at the end of training
(``f = k∞(x)·K∞⁻¹y``: if the kernel aligns silently, early, and then only grows in scale, the final
network is this final-kernel regressor). :func:`kernel_regression` solves it on flattened
(example, output) Grams (:func:`ntkpipe.ntk.layout.flatten_gram`, index ``i·C + c``);
:func:`kernel_predictions` builds both predictors from two models;
:func:`prediction_agreement` scores them against the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from ntkpipe.ntk.precision import to_float64, with_x64


@dataclass(frozen=True)
class KernelRegression:
    """Result of :func:`kernel_regression`.

    Attributes:
        predictions: ``(n_test, C)`` predictor on the test points, float64.
        ridge: the relative ridge asked for (λ = ridge · mean(diag K)).
        rcond: the relative eigenvalue cut-off asked for.
        rank: number of eigenvalues of ``K + λI`` kept (the rest were dropped as ≤ rcond·λ_max).
        condition: λ_max / λ_min over the kept eigenvalues of ``K + λI`` (``nan`` if none kept).
    """

    predictions: np.ndarray
    ridge: float
    rcond: float
    rank: int
    condition: float


def kernel_regression(
    gram_train: np.ndarray,
    gram_test_train: np.ndarray,
    y_train: np.ndarray,
    *,
    ridge: float = 0.0,
    rcond: float = 1e-10,
) -> KernelRegression:
    r"""Kernel (ridge) regression predictor ``f̂ = K_{test,train} (K + λI)⁺ vec(y)``, float64.

    Silent-alignment Sec. 2, Eq. 2–3: ``f(x) = k∞(x)·K∞⁻¹ y``. With the flattened Grams the
    (example, output) pairs are the regression points, so a C-output NTK with cross-output blocks
    is handled exactly (no per-output decomposition is assumed).

    Math and policy. Let ``K = Q Λ Qᵀ`` be the eigendecomposition of the symmetrized train Gram
    ``(K + Kᵀ)/2`` (``scipy.linalg.eigh``). Then

    .. math::
        λ = \text{ridge} · \overline{\operatorname{diag} K}, \qquad
        μ_k = Λ_k + λ, \qquad
        \mathcal{K} = \{k : μ_k > \text{rcond} · \max_k μ_k\}, \qquad
        \hat f = K_{*} \sum_{k ∈ \mathcal{K}} q_k \frac{q_k^⊤ \operatorname{vec}(y)}{μ_k}.

    * The ridge is *relative* to the kernel's scale (mean diagonal), so the same ``ridge`` means
      the same regularization for an init NTK and a final NTK that has grown by orders of
      magnitude; ``ridge=0`` is interpolation.
    * Eigenvalues ``≤ rcond·μ_max`` (including the small negative ones that round-off gives a PSD
      kernel) are dropped: this is the pseudo-inverse, i.e. the minimum-RKHS-norm interpolant of
      the projection of ``y`` on the kernel's range. It matters because empirical NTKs are often
      singular or badly conditioned — e.g. the final NTK of a linear network is a linear kernel of
      rank ≤ D < P — where ``solve`` returns noise and a Cholesky factorization fails outright.
      For a full-rank, well-conditioned K this equals ``np.linalg.solve(K + λI, vec y)``.

    Args:
        gram_train: ``(P·C, P·C)`` train Gram.
        gram_test_train: ``(Q·C, P·C)`` test × train block.
        y_train: ``(P, C)`` targets (a ``(P,)`` vector is taken as C = 1).
        ridge: relative ridge, ≥ 0.
        rcond: relative eigenvalue cut-off, in [0, 1).

    Returns:
        :class:`KernelRegression` with ``predictions`` of shape ``(Q, C)``.

    Raises:
        ValueError: inconsistent shapes, non-finite entries, ``ridge < 0`` or ``rcond ∉ [0, 1)``.
    """
    k = np.asarray(gram_train, dtype=np.float64)
    k_star = np.asarray(gram_test_train, dtype=np.float64)
    y = np.asarray(y_train, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise ValueError(f"y_train must be (P, C), got shape {y.shape}")
    p, c = y.shape
    if k.shape != (p * c, p * c):
        raise ValueError(
            f"gram_train must be (P·C, P·C) = ({p * c}, {p * c}) for y_train of shape {y.shape}, "
            f"got {k.shape}"
        )
    if k_star.ndim != 2 or k_star.shape[1] != p * c or k_star.shape[0] % c:
        raise ValueError(
            f"gram_test_train must be (Q·C, P·C) with P·C = {p * c} and C = {c}, got {k_star.shape}"
        )
    if not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite number >= 0 (relative to mean diag K), got {ridge}")
    if not (0 <= rcond < 1):
        raise ValueError(f"rcond must be in [0, 1), got {rcond}")
    for name, a in (("gram_train", k), ("gram_test_train", k_star), ("y_train", y)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} has non-finite entries")

    lam = float(ridge) * float(np.mean(np.diag(k))) if k.size else 0.0
    evals, evecs = scipy.linalg.eigh(0.5 * (k + k.T))
    mu = evals + lam
    mu_max = float(mu.max()) if mu.size else 0.0
    keep = mu > rcond * mu_max if mu_max > 0 else np.zeros(mu.shape, dtype=bool)
    mu_kept, q_kept = mu[keep], evecs[:, keep]
    coef = q_kept @ ((q_kept.T @ y.reshape(-1)) / mu_kept)
    predictions = (k_star @ coef).reshape(-1, c)
    rank = int(keep.sum())
    condition = float(mu_kept.max() / mu_kept.min()) if rank else float("nan")
    return KernelRegression(predictions=predictions, ridge=float(ridge), rcond=float(rcond),
                            rank=rank, condition=condition)


def prediction_agreement(network: np.ndarray, kernel: np.ndarray) -> tuple[float, float]:
    """Agreement of a kernel predictor with the network's outputs on the same points.

    Returns:
        ``(corr, relerr)``: the Pearson correlation of the flattened predictions (``nan`` if either
        is constant) and the relative L2 error ‖kernel − network‖ / ‖network‖ (``inf`` if the
        network's outputs are all zero and the kernel's are not, ``0`` if both are).

    Raises:
        ValueError: the two arrays differ in shape.
    """
    a = np.asarray(network, dtype=np.float64)
    b = np.asarray(kernel, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"network {a.shape} and kernel {b.shape} predictions differ in shape")
    a, b = a.reshape(-1), b.reshape(-1)
    ac, bc = a - a.mean(), b - b.mean()
    denom = float(np.linalg.norm(ac) * np.linalg.norm(bc))
    corr = float(ac @ bc / denom) if denom > 0 else float("nan")
    diff, norm = float(np.linalg.norm(b - a)), float(np.linalg.norm(a))
    relerr = diff / norm if norm > 0 else (0.0 if diff == 0 else float("inf"))
    return corr, relerr


@with_x64
def kernel_predictions(
    model_init: Any,
    model_final: Any,
    x_train: ArrayLike,
    y_train: np.ndarray,
    x_test: ArrayLike,
    *,
    ridge: float = 0.0,
    rcond: float = 1e-10,
) -> dict[str, Any]:
    """Init-NTK and final-NTK kernel-regression predictors vs. the trained network on ``x_test``.

    Both empirical NTKs (:func:`ntkpipe.ntk.dispatch.empirical_ntk`, float64) are taken on the train
    set and the test × train block, flattened, and solved with :func:`kernel_regression` under the
    same ``ridge``/``rcond`` policy (silent-alignment Sec. 2, Eq. 2–3).

    Args:
        model_init: the network at initialization, mapping ``(D,)`` to ``(C,)``.
        model_final: the trained network (same architecture).
        x_train: ``(P, D)`` train inputs.
        y_train: ``(P, C)`` train targets (``(P,)`` is taken as C = 1).
        x_test: ``(Q, D)`` test inputs.
        ridge, rcond: see :func:`kernel_regression`.

    Returns:
        ``prediction_network``, ``prediction_final_ntk``, ``prediction_init_ntk`` (``(Q, C)``
        float64 arrays); ``pred_corr_final``, ``pred_corr_init``, ``pred_relerr_final``,
        ``pred_relerr_init`` (floats, from :func:`prediction_agreement` against the network);
        ``kr_rank_final``, ``kr_rank_init`` (ints); ``kr_ridge``, ``kr_rcond`` (floats).
    """
    import jax
    import jax.numpy as jnp

    from ntkpipe.ntk.dispatch import empirical_ntk
    from ntkpipe.ntk.layout import flatten_gram

    x_train = jnp.asarray(x_train, jnp.float64)
    x_test = jnp.asarray(x_test, jnp.float64)
    y = np.asarray(y_train, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]

    network = np.asarray(jax.vmap(to_float64(model_final))(x_test), dtype=np.float64)
    if network.ndim == 1:
        network = network[:, None]

    out: dict[str, Any] = {"prediction_network": network}
    fits = {}
    for tag, model in (("final", model_final), ("init", model_init)):
        gram = flatten_gram(np.asarray(empirical_ntk(model, x_train)))
        gram_star = flatten_gram(np.asarray(empirical_ntk(model, x_test, x_train)))
        fits[tag] = kernel_regression(gram, gram_star, y, ridge=ridge, rcond=rcond)
        out[f"prediction_{tag}_ntk"] = fits[tag].predictions
    for tag in ("final", "init"):
        corr, relerr = prediction_agreement(network, fits[tag].predictions)
        out[f"pred_corr_{tag}"] = corr
        out[f"pred_relerr_{tag}"] = relerr
    for tag in ("final", "init"):
        out[f"kr_rank_{tag}"] = fits[tag].rank
    out["kr_ridge"] = float(ridge)
    out["kr_rcond"] = float(rcond)
    return out
