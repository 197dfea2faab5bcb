"""Phase diagram of the two-layer model f = κ uᵀ φ(W x) under a scale parameter d (solvable-model
Sec. 3, Table 1, Corollaries 1–3).

Every hyperparameter is a power of d: width N ∝ d^n, output scale κ ∝ d^k, variances of the
entries of W (input layer) and u (readout) ∝ d^{v_W}, d^{v_u}, learning rates η_W ∝ d^{e_W},
η_u ∝ d^{e_u}. With one data point (|x| = 1) and y = O(1) the learning speed is

    λ² = 4κ²η_uη_W y²  +  κ⁴Δ₀,    Δ₀ = (η_W|u₀|² + η_u|w₀|²)² − 4η_uη_W(u₀·w₀)²,  w₀ = W₀x,

the first term target-driven (feature learning), the second init-driven (the squared initial NTK
K₀² minus the output part; K = κ²(η_u|w|² + η_W|u|²)). With |u₀|² ≈ N·var_u, |w₀|² ≈ N·var_W and
u₀·w₀ = O(√(N var_u var_W)), the square dominates Δ₀ when N grows (the cross term is one power of N
lower); at fixed N it is of the same order (u₀ and w₀ are not parallel). So, as exponents of d,

    target term  T = 2k + e_u + e_W
    init term    I = 4k + 2·max(e_W + n + v_u, e_u + n + v_W)

and λ² ∝ d^{max(T, I)}. Training takes ~1/λ steps: λ → 0 is ``frozen`` (nothing is learned in any
fixed number of steps), λ → ∞ is ``unstable`` (gradient descent with a step of order 1 diverges);
with λ = O(1) the model is in the ``kernel`` phase when T < I (the relative NTK change
K_T/K₀ − 1 = √(1 + 4T/I-ratio) − 1 ∝ d^{T − I} → 0) and ``learning`` otherwise (O(1) change).
The initial output f₀ = κ u₀·w₀ is assumed O(1) (or zero, as with a mirrored init).

A measured exponent b ± s of the relative NTK change is judged against the two phases' exponents,
0 (learning) and the predicted p = min(T − I, 0) (:func:`exponent_phase`), so any cell of the
(n, k, v_W, v_u, e_W, e_u) space is judged by its own prediction, not by one threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

PHASES = ("kernel", "learning", "frozen", "unstable")


@dataclass(frozen=True)
class Exponents:
    """Exponents of d: width n, output scale k, variances of W and u entries, learning rates of W and u."""

    width: float
    output_scale: float
    variance_w: float
    variance_u: float
    lr_w: float
    lr_u: float

    @property
    def target_term(self) -> float:
        """Exponent of 4κ²η_uη_W y²."""
        return 2 * self.output_scale + self.lr_u + self.lr_w

    @property
    def init_term(self) -> float:
        """Exponent of κ⁴Δ₀ ≈ κ⁴(η_W N var_u + η_u N var_W)² (= K₀²)."""
        n = self.width
        return 4 * self.output_scale + 2 * max(self.lr_w + n + self.variance_u, self.lr_u + n + self.variance_w)

    @property
    def speed(self) -> float:
        """Exponent of λ² = max(target term, init term)."""
        return max(self.target_term, self.init_term)

    @property
    def kernel_change(self) -> float:
        """Predicted exponent of the relative NTK change ‖K_T − K₀‖/‖K₀‖: T − I when the init term
        dominates, else 0 (O(1) change)."""
        return min(self.target_term - self.init_term, 0.0)


def predicted_phase(e: Exponents, tol: float = 1e-9) -> str:
    """``frozen`` (λ → 0), ``unstable`` (λ → ∞), ``kernel`` (λ = O(1), init term dominates) or
    ``learning`` (λ = O(1), target term of the same or higher order)."""
    if e.speed > tol:
        return "unstable"
    if e.speed < -tol:
        return "frozen"
    return "kernel" if e.target_term < e.init_term - tol else "learning"


def exponent_phase(exponent: float, stderr: float, predicted: float, stderrs: float = 2.0,
                   tol: float = 1e-9) -> str:
    """``kernel`` or ``learning`` from a fitted exponent b ± s (standard error) of the relative NTK
    change over d and the predicted exponent p = min(T − I, 0), with k = ``stderrs``:

        kernel  if b + k·s < 0                          (significantly below 0, the learning phase's O(1) change)
                or |b − p| ≤ k·s and |b − p| < |b|,      (consistent with a predicted p < 0 and nearer it than 0)
        learning otherwise (a NaN b included).

    ``tol`` absorbs rounding: an exact fit of identical changes gives b ≈ −1e−16 ± 4e−17, i.e. 0 ± 0."""
    below_zero = exponent + stderrs * stderr < -tol
    near_predicted = abs(exponent - predicted) <= stderrs * stderr + tol and abs(exponent - predicted) < abs(exponent)
    return "kernel" if below_zero or (predicted < -tol and near_predicted) else "learning"


def stable_lr(width: float, output_scale: float, variance_w: float, variance_u: float) -> float:
    """Corollary 1: the learning-rate exponent (both layers) that keeps λ = O(1),
    e = −2k − n − max(v_W, v_u) (it makes the init term O(1); the target term is then ≤ it when the
    init dominates, so this is the largest stable learning rate)."""
    return -2 * output_scale - width - max(variance_w, variance_u)


def exponents_from_powers(powers: dict, depth: int = 2, parameterization: str = "standard",
                          layer_variance: bool = False) -> Exponents:
    """:class:`Exponents` of a two-layer net from a study's scaling powers (``width``, ``output_scale``,
    ``layer_variance`` [W, u], ``sigma``, ``lr``, ``layer_lr`` [W, u], ``lr_ratio``; missing = 0).

    ``layer_variance``: the net draws its weights with per-layer variances (their powers are the
    variance exponents, 0 when not powered). Otherwise the standard init draws W ~ N(0, σ²/D) and u ~ N(0, σ²/N): v_W = 2s,
    v_u = 2s − n with s the power of σ (D fixed)."""
    if depth != 2 or parameterization != "standard":
        raise ValueError("the phase diagram is derived for depth-2 networks in the standard parameterization")

    def scalar(name: str) -> float:
        value = powers.get(name, 0.0)
        return float(value) if not isinstance(value, (list, tuple)) else float("nan")

    def per_layer(name: str) -> tuple[float, float]:
        value = powers.get(name)
        if value is None:
            return 0.0, 0.0
        if isinstance(value, (list, tuple)):
            return float(value[0]), float(value[-1])
        return float(value), float(value)

    n, k = scalar("width"), scalar("output_scale")
    if layer_variance or "layer_variance" in powers:
        v_w, v_u = per_layer("layer_variance")
    else:
        s = scalar("sigma")
        v_w, v_u = 2 * s, 2 * s - n
    m_w, m_u = per_layer("layer_lr")
    lr = scalar("lr")
    return Exponents(width=n, output_scale=k, variance_w=v_w, variance_u=v_u,
                     lr_w=lr + m_w, lr_u=lr + m_u + scalar("lr_ratio"))
