"""Empirical neural tangent kernels (generic and MLP-structured) and Jacobian alignment."""

from ntkpipe.ntk.alignment import jacobian_alignment
from ntkpipe.ntk.alignment import jacobian_alignments
from ntkpipe.ntk.dispatch import NtkImplementation
from ntkpipe.ntk.dispatch import choose_implementation
from ntkpipe.ntk.dispatch import empirical_ntk
from ntkpipe.ntk.layout import flatten_gram

__all__ = [
    "NtkImplementation",
    "choose_implementation",
    "empirical_ntk",
    "flatten_gram",
    "jacobian_alignment",
    "jacobian_alignments",
]
