"""Empirical neural tangent kernels (MLP-structured, Jacobian contraction, NTK-vector products),
their readout / hidden split, Jacobian alignment, the mixed derivative ∇²ₓθ f behind neural
anisotropy directions, top eigenpairs (eigh, Lanczos, randomized)."""

from ntkpipe.ntk.alignment import jacobian_alignment, jacobian_alignments
from ntkpipe.ntk.components import component_grams
from ntkpipe.ntk.dispatch import NtkImplementation, choose_implementation, empirical_ntk
from ntkpipe.ntk.eigen import top_eigenpairs
from ntkpipe.ntk.layout import flatten_gram
from ntkpipe.ntk.mixed import mixed_gram, neural_anisotropy_directions, stein_check

__all__ = [
    "NtkImplementation",
    "choose_implementation",
    "component_grams",
    "empirical_ntk",
    "flatten_gram",
    "jacobian_alignment",
    "jacobian_alignments",
    "mixed_gram",
    "neural_anisotropy_directions",
    "stein_check",
    "top_eigenpairs",
]
