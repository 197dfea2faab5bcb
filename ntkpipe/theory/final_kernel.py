"""The NTK of deep linear networks and what they learn from small initialization (silent-alignment
Sec. 4, App. E.2, G, H).

A bias-free linear network f(x) = κ c_L W_L ⋯ c_1 W_1 x has the NTK K(x, x') = xᵀMx' with

    M = κ² Σ_ℓ c_ℓ² |B_ℓ|² A_ℓᵀA_ℓ,   A_ℓ = c_{ℓ−1}W_{ℓ−1} ⋯ c_1W_1 (A_1 = I),
                                       B_ℓ = c_L W_L ⋯ c_{ℓ+1}W_{ℓ+1} (B_L = 1),        (1)

since ∂f/∂W_ℓ = κ c_ℓ B_ℓᵀ (A_ℓ x)ᵀ. Trained from small init on whitened data with teacher y = s βᵀx,
the layers end balanced and rank one, W_ℓ = u r_{ℓ+1} r_ℓᵀ with r_1 = β and u^L = s, so every layer
ℓ ≥ 2 adds u^{2(L−1)} ββᵀ and layer 1 adds u^{2(L−1)} I (Eq. 10 at convergence, Eq. 63).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ntkpipe.models import MLP
from ntkpipe.ntk.kernel_stats import kernel_alignment
from ntkpipe.theory import deep_linear


def _unit(beta) -> np.ndarray:
    b = np.asarray(beta, dtype=np.float64)
    return b / np.linalg.norm(b)


def final_ntk_matrix(beta, s: float, depth: int) -> np.ndarray:
    """M∞ = s^{2(L−1)/L} [(L − 1)ββᵀ + I] (D×D), K∞(x, x') = xᵀM∞x' + O(σ) (Eq. 63).

    The paper prints the prefactor s^{2L−2}; Eq. 10 with u^L → s gives u^{2(L−1)} = s^{2(L−1)/L}.
    Eigenvalue L s^{2(L−1)/L} along β and s^{2(L−1)/L} orthogonal to it. ``beta`` is normalized.
    """
    b = _unit(beta)
    return s ** (2.0 * (depth - 1) / depth) * ((depth - 1) * np.outer(b, b) + np.eye(b.size))


def final_ntk_gram(x, beta, s: float, depth: int) -> np.ndarray:
    """The (P, P) training Gram K∞(x_μ, x_ν) = x_μᵀM∞x_ν of Eq. 63 (``final_ntk_matrix``) on the
    (P, D) inputs ``x``, float64: the final NTK a depth-L linear net reaches from small init."""
    x = np.asarray(x, dtype=np.float64)
    return x @ final_ntk_matrix(beta, s, depth) @ x.T


def linear_ntk_matrix(model: MLP) -> np.ndarray:
    """The exact D×D matrix M of Eq. (1), K(x, x') = xᵀMx' summed over all weights, of a bias-free
    single-output ``MLP`` with linear activation (any multipliers c_ℓ and output scale κ), float64."""
    if model.activation != "linear" or model.biases is not None or model.weights[-1].shape[0] != 1:
        raise ValueError("need a bias-free, single-output MLP with linear activation")
    multipliers = [float(c) for c in model.multipliers]
    layers = [c * np.asarray(w, dtype=np.float64) for w, c in zip(model.weights, multipliers)]
    below = [np.eye(layers[0].shape[1])]  # A_ℓ
    for w in layers[:-1]:
        below.append(w @ below[-1])
    above = [np.full((1,), float(model.output_scale))]  # κ B_ℓ, built from ℓ = L down
    for w in layers[:0:-1]:
        above.insert(0, above[0] @ w)
    total = sum(c**2 * (b @ b) * (a.T @ a) for c, a, b in zip(multipliers, below, above))
    return cast(np.ndarray, total)  # a sum over the weight layers, never empty (so never the start value 0)


def direction_ratio(m, beta) -> float:
    """βᵀMβ / mean_{v⊥β} vᵀMv = βᵀMβ (D − 1) / (tr M − βᵀMβ); L for M∞ (Eq. 63)."""
    m = np.asarray(m, dtype=np.float64)
    b = _unit(beta)
    along = b @ m @ b
    return float(along * (b.size - 1) / (np.trace(m) - along))


def kernel_alignment_of_matrix(m, x, y) -> float:
    """A = yᵀKy / (‖K‖_F ‖y‖²) of the Gram K = X M Xᵀ of the linear kernel xᵀMx' on (P, D) inputs and
    scalar targets (P,) or (P, 1) (Cortes et al. 2012). With M = M∞ and y = sXβ this is the maximal
    final alignment of a depth-L linear net (silent-alignment Fig. 1a, C.2c, App. E.2)."""
    x = np.asarray(x, dtype=np.float64)
    return kernel_alignment(x @ np.asarray(m, dtype=np.float64) @ x.T, np.reshape(y, len(x)))


def _matrix_power(m, power: float) -> np.ndarray:
    """m^power of a symmetric PSD matrix (eigenvalues below round-off set to 0); power 0 is the identity."""
    if power == 0:
        return np.eye(len(m))
    w, v = np.linalg.eigh(np.asarray(m, dtype=np.float64))
    w = np.where(w > w.max() * len(m) * np.finfo(np.float64).eps, w, 0.0)
    return (v * w**power) @ v.T


def multioutput_final_gram(x, y, depth: int) -> np.ndarray:
    """The (P·C, P·C) training Gram, in (example, output) order, of the final NTK of a depth-L linear
    net with C outputs trained to convergence from small init (silent-alignment Sec. 4.2, App. H).

    The net learns the least-squares map β = Σ_a s_a z_a v_aᵀ (C×D; the min-norm one, Σ_yx = Yᵀx/P on
    whitened data) with balanced layers W_ℓ = Σ_a s_a^{1/L} r_{ℓ+1,a} r_{ℓ,a}ᵀ (r_1 = v, r_{L+1} = z). Since
    ∂f_c/∂W_ℓ = (W_L⋯W_{ℓ+1})ᵀe_c (W_{ℓ−1}⋯W_1x)ᵀ, layer ℓ adds

        K_ℓ^{cc'}(x, x') = [(ββᵀ)^{(L−ℓ)/L}]_{cc'} · xᵀ(βᵀβ)^{(ℓ−1)/L}x',

    the layer-(ℓ−1) NNGP kernel xᵀ[βᵀβ]^{(ℓ−1)/L}x' of App. H (Eq. 80) times its output-side counterpart
    (power 0: the identity, I_D for layer 1 and I_C for layer L). For C = 1 this is Eq. 63's
    s^{2(L−1)/L}xᵀ[(L − 1)ββᵀ + I]x' (``final_ntk_matrix``). ``x`` is (P, D), ``y`` (P, C) or (P,)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(len(x), -1)
    beta = min_norm_interpolant(x, y).T  # (C, D)
    layers = [np.kron(x @ _matrix_power(beta.T @ beta, (layer - 1) / depth) @ x.T,
                      _matrix_power(beta @ beta.T, (depth - layer) / depth)) for layer in range(1, depth + 1)]
    return np.sum(layers, axis=0)


def multioutput_final_alignment(x, y, depth: int) -> float:
    """A(K∞, yyᵀ) of ``multioutput_final_gram``: the final alignment of a depth-L linear net with C
    outputs (silent-alignment Fig. H.1a, dashed); for C = 1 that of Eq. 63 with the least-squares β."""
    return kernel_alignment(multioutput_final_gram(x, y, depth), np.asarray(y, dtype=np.float64))


def min_norm_interpolant(x, y) -> np.ndarray:
    """w = X(XᵀX)⁻¹y (paper's column convention, App. G.1), i.e. xᵀ(xxᵀ)⁻¹y for row-major (P, D)
    inputs with P ≤ D: the least-norm w with xw = y, from a least-squares solve (pinv(x) y).
    ``y`` is (P,) or (P, C); returns (D,) or (D, C)."""
    return np.linalg.lstsq(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), rcond=None)[0]


def min_norm_error_theory(first_layer, x, w_min, depth: int) -> float:
    """The expected |w − w_min| / |w_min| of a depth-L linear net trained to convergence from small init
    (docs/papers.md §3.7): ‖W₁(0)P⊥‖_F / (√N |w_min|^{1/L}), linear in σ at every depth.

    Every gradient of the first layer is δ xᵀ with x in the row space of X, so W₁P⊥ (P⊥ the projector
    onto the null space of the (P, D) inputs ``x``) keeps its initial value under gradient flow and
    GD alike, and the learned map is w = w_min + W_{L:2}W₁(0)P⊥ once the net interpolates. The layers
    end balanced (silent-alignment App. E.2), so the product W_{L:2} = W_L⋯W_2 is a row of norm
    |w_min|^{(L−1)/L} along a direction r independent of W₁(0)P⊥ (Gaussian entries along orthogonal
    directions are independent), and E|rᵀW₁(0)P⊥|² = ‖W₁(0)P⊥‖²_F / N for r uniform on the N-sphere.
    ``first_layer`` is the (N, D) first weight matrix at init with its multiplier; ``w_min`` the
    min-norm interpolant (``min_norm_interpolant``). For W ~ N(0, σ²/D) the value is
    σ √((D − rank X)/D) / |w_min|^{1/L}."""
    x = np.asarray(x, dtype=np.float64)
    w1 = np.asarray(first_layer, dtype=np.float64)
    off_span = np.eye(x.shape[1]) - np.linalg.pinv(x) @ x
    norm = float(np.linalg.norm(w_min))
    return float(np.linalg.norm(w1 @ off_span) / np.sqrt(w1.shape[0]) / norm ** (1.0 / depth))


def relu_final_gram(x, beta, s: float) -> np.ndarray:
    """The (P, P) final NTK Gram of a bias-free two-layer ReLU net f = Σ_i a_i relu(w_iᵀx) trained from
    small init on a linear teacher y = s βᵀx (docs/papers.md §3.8, derived by ntkpipe):

        K∞(x, x') = s · 1(z z' > 0) (z z' + xᵀx'),   z = βᵀx,

    the two-layer linear net's s(z z' + xᵀx') (Eq. 63, L = 2) masked to the pairs on the same side of
    the hyperplane βᵀx = 0. From small init each unit turns to w_i ∥ sign(a_i) β (the early-phase drift
    E[y x 1(wᵀx > 0)] ∝ β of symmetric, whitened inputs), so f = A₊ relu(z) − A₋ relu(−z) with
    A₊ = A₋ = s to fit the odd target, and balanced units |a_i| = |w_i| give Σ₊|w_i|² = Σ₋|w_i|² = s:
    the readout adds s[relu(z)relu(z') + relu(−z)relu(−z')] and the first layer s 1(z z' > 0) xᵀx'."""
    x = np.asarray(x, dtype=np.float64)
    z = x @ _unit(beta)
    same_side = np.outer(z, z) > 0
    return s * np.where(same_side, np.outer(z, z) + x @ x.T, 0.0)


def target_modes(x, targets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVD of the input-output correlation Σ_yx = Yᵀx/P = Σ_k s_k u_k v_kᵀ (Saxe et al. 2014), over
    its K nonzero modes (numerical rank, as ``np.linalg.matrix_rank``).

    Returns ``(v (D, K), s (K,) descending, u (C, K))``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(targets, dtype=np.float64).reshape(len(x), -1)
    u, s, vt = np.linalg.svd(y.T @ x / len(x), full_matrices=False)
    k = int(np.sum(s > s[0] * max(y.shape[1], x.shape[1]) * np.finfo(np.float64).eps))
    return vt[:k].T, s[:k], u[:, :k]


def mode_strengths(outputs, x, targets) -> tuple[np.ndarray, np.ndarray]:
    """m_k = u_kᵀ Σ_fx v_k, the strength of the learned input-output map Σ_fx = Fᵀx/P along the
    target's singular modes (``target_modes``), and the target strengths s_k; F is (P, C).

    For a linear net on whitened data Σ_fx is its end-to-end matrix, and from small init each m_k
    follows the scalar ODE ċ = L c^{2−2/L}(s_k − c) (Saxe et al. 2014; silent-alignment Fig. H.1);
    see ``mode_strength_trajectories``.

    Returns ``(m (K,), s (K,))``.
    """
    x = np.asarray(x, dtype=np.float64)
    v, s, u = target_modes(x, targets)
    f = np.asarray(outputs, dtype=np.float64).reshape(len(x), -1)
    return np.einsum("ck,cd,dk->k", u, f.T @ x / len(x), v), s


def mode_strength_trajectories(times, c0, s, depth: int) -> np.ndarray:
    """(K, T): c_k(t) of ċ = L c^{2−2/L}(s_k − c), c_k(0) = c0[k], per target mode
    (``deep_linear.gain_trajectory``; silent-alignment Fig. H.1); NaN for a mode that does not start
    below its target, 0 < c_k(0) < s_k (the small-init regime the ODE describes, as for t½)."""
    nan = np.full(len(np.asarray(times)), np.nan)
    return np.stack([deep_linear.gain_trajectory(times, c, sk, depth) if 0.0 < c < sk else nan
                     for c, sk in zip(c0, s)])
