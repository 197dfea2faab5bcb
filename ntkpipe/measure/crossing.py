"""Times at which a recorded series first crosses a level (t½, t_align, the rise of A(t) and of ‖K‖)."""

from __future__ import annotations

import numpy as np


def first_crossing(times: np.ndarray, values: np.ndarray, level: float, *, downward: bool) -> float:
    """First t where ``values`` reaches ``level`` (from above if ``downward``), linearly
    interpolated between the bracketing checkpoints; NaN if it never does."""
    times = np.asarray(times, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    hit = values <= level if downward else values >= level
    hit &= np.isfinite(values)
    if not hit.any():
        return float("nan")
    k = int(np.argmax(hit))
    if k == 0:
        return float(times[0])
    t0, t1, v0, v1 = times[k - 1], times[k], values[k - 1], values[k]
    return float(t0 + (level - v0) * (t1 - t0) / (v1 - v0)) if v1 != v0 else float(t1)


def half_loss_time(times: np.ndarray, loss: np.ndarray) -> float:
    """t½: first time the training loss reaches half its initial value (silent-alignment Fig. 3a)."""
    return first_crossing(times, loss, 0.5 * float(loss[0]), downward=True)



def rise_time(times: np.ndarray, values: np.ndarray, fraction: float) -> float:
    """First t where ``values`` has covered ``fraction`` of its change from its first to its last finite
    value, v(0) + fraction·(v_end − v(0)), interpolated between checkpoints; NaN if it does not change."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size < 2 or finite[-1] == finite[0]:
        return float("nan")
    level = finite[0] + fraction * (finite[-1] - finite[0])
    return first_crossing(times, values, level, downward=bool(finite[-1] < finite[0]))


def variation_after(times: np.ndarray, values: np.ndarray, t0: float) -> float:
    """Fraction of the total variation Σ|Δv| of a series that happens after time ``t0``."""
    times = np.asarray(times, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(values)
    steps = np.abs(np.diff(values[keep]))
    total = steps.sum()
    return float(steps[times[keep][1:] > t0].sum() / total) if total > 0 else float("nan")
