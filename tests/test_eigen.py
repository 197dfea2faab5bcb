"""Top-k eigenpairs by Lanczos and randomized subspace iteration against numpy.linalg.eigh: on the
NTK Gram of a random MLP (n = 2000) and on a Gram whose eigenvalues are all double (subspaces)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from ntkpipe.models import MLP
from ntkpipe.ntk import empirical_ntk, flatten_gram
from ntkpipe.ntk.eigen import choose_method, top_eigenpairs

K = 50


@pytest.fixture(scope="module")
def mlp_gram():
    """The 2000 × 2000 NTK Gram of a ReLU MLP and its full ``numpy.linalg.eigh``, descending."""
    model = MLP(10, 64, 2, 1, activation="relu", bias=True, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (2000, 10), jnp.float64)
    gram = np.asarray(flatten_gram(empirical_ntk(model, x)))
    values, vectors = np.linalg.eigh(gram)
    return gram, values[::-1], vectors[:, ::-1]


def canonical(vectors):
    """Columns signed so their largest-magnitude entry is positive (as ``top_eigenpairs`` signs them)."""
    pivots = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    return vectors * np.sign(pivots)


@pytest.mark.parametrize("method", ["lanczos", "randomized"])
def test_top_k_of_an_ntk_gram_matches_eigh(mlp_gram, method):
    gram, expected_values, expected_vectors = mlp_gram
    values, vectors = top_eigenpairs(gram, K, method=method)
    assert values.shape == (K,) and vectors.shape == (2000, K)
    np.testing.assert_allclose(values, expected_values[:K], rtol=1e-10, atol=0)
    # the top 50 are separated by ≥ 4e-5 λ₁, so each eigenvector is determined up to sign,
    # and the sign is canonicalized as eigh's labels are
    assert np.min(-np.diff(expected_values[: K + 1])) > 4e-5 * expected_values[0]
    np.testing.assert_allclose(vectors, canonical(expected_vectors[:, :K]), rtol=0, atol=1e-10)


@pytest.mark.parametrize("method", ["lanczos", "randomized", "eigh"])
def test_near_degenerate_eigenvalues_give_the_eigh_subspaces(mlp_gram, method):
    # two copies of a Gram, block-diagonal, one scaled by 1 + 1e-9: every eigenvalue comes in a pair
    # split by 1e-9 of itself, so each eigenvector is only known to ~1e-7, but its pair's 2-d span to 1e-10
    small = mlp_gram[0][:600, :600]
    gram = scipy.linalg.block_diag(small, (1 + 1e-9) * small)
    expected_values, expected_vectors = np.linalg.eigh(gram)
    expected_values, expected_vectors = expected_values[::-1], expected_vectors[:, ::-1]
    values, vectors = top_eigenpairs(gram, 20, method=method)
    np.testing.assert_allclose(values, expected_values[:20], rtol=1e-10, atol=0)
    np.testing.assert_allclose(values[0::2], values[1::2] * (1 + 1e-9), rtol=1e-12)
    for pair in range(10):
        span = slice(2 * pair, 2 * pair + 2)
        angles = scipy.linalg.subspace_angles(vectors[:, span], expected_vectors[:, span])
        assert angles.max() < 1e-10


def test_auto_uses_eigh_for_small_grams_or_many_pairs():
    assert choose_method(1999, 50) == "eigh"
    assert choose_method(4000, 50) == "lanczos"
    assert choose_method(4000, 401) == "eigh"


def test_failures_are_explained():
    gram = np.diag(np.linspace(1.0, 0.999, 100))  # no gap after λ_5: the subspace iteration stalls
    with pytest.raises(RuntimeError, match=r"top 5 of 100 eigenpairs .* use method='lanczos' or 'eigh'"):
        top_eigenpairs(gram, 5, method="randomized")
    with pytest.raises(ValueError, match=r"method='lanczos' finds at most n - 2 = 98 eigenpairs .* use method='eigh'"):
        top_eigenpairs(gram, 99, method="lanczos")
    with pytest.raises(ValueError, match=r"method must be one of 'auto', 'eigh', 'lanczos', 'randomized', got 'arpack'"):
        top_eigenpairs(gram, 3, method="arpack")
