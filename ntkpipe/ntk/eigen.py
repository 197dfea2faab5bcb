r"""Top eigenpairs of a symmetric Gram matrix (float64), with a reproducible sign for each eigenvector.

Three methods give the k largest eigenpairs of an n × n Gram G:

* ``eigh``: LAPACK (``scipy.linalg.eigh``, ``subset_by_index``): a tridiagonal reduction of all of
  G, ≈ (4/3)·n³ flops whatever k.
* ``lanczos``: implicitly restarted Lanczos (ARPACK, ``scipy.sparse.linalg.eigsh``) on the matvec
  v ↦ Gv, to machine precision (``tol=0``), from a fixed start vector: O(n²) per matvec, a few
  times k matvecs when the spectrum decays.
* ``randomized``: block subspace iteration Q ← orth(GQ) on k + p columns from a fixed Gaussian
  start, with Rayleigh–Ritz each step, until every wanted Ritz pair has residual
  ‖Gφ − λφ‖ ≤ 1e-13·λ₁ (GEMMs only; converges as (λ_{k+p+1}/λ_k)^iterations, so it needs a gap
  after λ_k, and raises when it does not converge).

``auto`` takes ``eigh`` when n < ``EIGH_BELOW`` or k > n/10 (where the reduction costs about what
the Krylov space does) and ``lanczos`` otherwise. Every default study's Gram is below the threshold,
so their results are those of ``eigh``; ``benchmarks/ntk_options.py`` prints the measured
``lanczos`` / ``eigh`` time at k = 50, n = 4000.
"""

from __future__ import annotations

from typing import Literal, cast

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

Method = Literal["auto", "eigh", "lanczos", "randomized"]

EIGH_BELOW = 2000
"""``auto`` decomposes Grams of fewer rows with ``eigh``."""

RANDOMIZED_TOL = 1e-13
"""Residual ‖Gφ − λφ‖ / λ₁ at which the randomized iteration stops."""

RANDOMIZED_MAX_ITERATIONS = 500


def choose_method(n: int, k: int) -> Literal["eigh", "lanczos"]:
    """The method ``auto`` resolves to for the top ``k`` eigenpairs of an ``n`` × ``n`` Gram."""
    return "eigh" if n < EIGH_BELOW or 10 * k > n else "lanczos"


def _eigh(gram: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(gram)
    pairs = scipy.linalg.eigh(gram, subset_by_index=[n - k, n - 1])
    return cast("tuple[np.ndarray, np.ndarray]", pairs)  # eigenvalues and eigenvectors (not eigvals_only)


def _lanczos(gram: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    start = np.random.default_rng(0).standard_normal(len(gram))
    pairs = scipy.sparse.linalg.eigsh(gram, k=k, which="LA", tol=0, v0=start)
    return cast("tuple[np.ndarray, np.ndarray]", pairs)  # eigenvalues and eigenvectors (return_eigenvectors)


def _randomized(gram: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(gram)
    columns = min(n, k + max(10, k // 2))
    basis = np.linalg.qr(gram @ np.random.default_rng(0).standard_normal((n, columns)))[0]
    for _ in range(RANDOMIZED_MAX_ITERATIONS):
        image = gram @ basis
        values, rotation = np.linalg.eigh(basis.T @ image)
        values, rotation = values[::-1][:k], rotation[:, ::-1][:, :k]
        vectors = basis @ rotation
        residuals = np.linalg.norm(image @ rotation - vectors * values, axis=0)
        if residuals.max() <= RANDOMIZED_TOL * abs(values[0]):
            return values[::-1], vectors[:, ::-1]
        basis = np.linalg.qr(image)[0]
    raise RuntimeError(
        f"randomized subspace iteration did not reach residual {RANDOMIZED_TOL:g}·λ₁ for the top {k} of "
        f"{n} eigenpairs in {RANDOMIZED_MAX_ITERATIONS} iterations (no gap after λ_{k}); use "
        f"method='lanczos' or 'eigh'")


METHODS = {"eigh": _eigh, "lanczos": _lanczos, "randomized": _randomized}


def top_eigenpairs(gram: np.ndarray, k: int | None = None, *, method: Method = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues λ₁ ≥ λ₂ ≥ … ≥ λ_k and unit eigenvectors φ_j (columns) of a symmetric Gram.

    Computed from (G + Gᵀ)/2 in float64 by ``method`` (module docstring; ``k=None``: all n, by
    ``eigh``). Returns ``(eigenvalues (k,), eigenvectors (n, k))``. Each φ_j's sign is fixed so its
    largest-magnitude entry is positive, making the labels sign φ_j reproducible across LAPACKs
    and methods.

    Raises:
        ValueError: an unknown ``method``, or ``lanczos`` asked for k ≥ n - 1 eigenpairs (ARPACK's
            limit; use ``eigh``).
    """
    if method != "auto" and method not in METHODS:
        raise ValueError(f"method must be one of 'auto', {', '.join(map(repr, METHODS))}, got {method!r}")
    gram = np.asarray(gram, dtype=np.float64)
    n: int = gram.shape[0]
    k = n if k is None else min(int(k), n)
    method = choose_method(n, k) if method == "auto" else method
    if method == "lanczos" and k >= n - 1:
        raise ValueError(f"method='lanczos' finds at most n - 2 = {n - 2} eigenpairs of this {n} × {n} Gram, "
                         f"{k} were asked; use method='eigh'")
    values, vectors = METHODS[method](0.5 * (gram + gram.T), k)
    values, vectors = values[::-1], vectors[:, ::-1]
    pivots = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(k)]
    return values, vectors * np.sign(pivots)
