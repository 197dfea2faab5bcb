"""Study-level fits across a sweep (silent-alignment Fig. 3: t½ ∝ σ^{−(L−2)}, or ∝ ln σ for L = 2)."""

from __future__ import annotations

import numpy as np


def _finite(x, y, positive: bool):
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    if positive:
        keep &= (x > 0) & (y > 0)
    return x[keep], y[keep]


def _line(u, v) -> tuple[float, float, float]:
    """Least squares v = a + b u; returns (b, a, standard error of b); NaNs if < 3 points."""
    if len(u) < 3 or np.ptp(u) == 0:
        return float("nan"), float("nan"), float("nan")
    (b, a), residuals, *_ = np.polyfit(u, v, 1, full=True)
    dof = len(u) - 2
    sse = float(residuals[0]) if len(residuals) else 0.0
    stderr = np.sqrt(sse / dof / np.sum((u - u.mean()) ** 2)) if dof > 0 else float("nan")
    return float(b), float(a), float(stderr)


def power_law(x, y) -> tuple[float, float, float]:
    """Exponent b, prefactor log a and stderr of log y = log a + b log x (natural logs)."""
    x, y = _finite(x, y, positive=True)
    return _line(np.log(x), np.log(y))


def log_law(x, y) -> tuple[float, float, float]:
    """Slope b, intercept a and stderr of y = a + b ln x."""
    x, y = _finite(x, y, positive=True)
    return _line(np.log(x), y)


FITS = {"power_law": power_law, "log_law": log_law}
