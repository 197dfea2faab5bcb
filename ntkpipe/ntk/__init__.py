"""Empirical neural tangent kernels (generic and MLP-structured), Jacobian alignment, and the mixed
derivative ∇²_{x,θ} f behind the neural anisotropy directions."""

from ntkpipe.ntk.alignment import jacobian_alignment
from ntkpipe.ntk.alignment import jacobian_alignments
from ntkpipe.ntk.dispatch import NtkImplementation
from ntkpipe.ntk.dispatch import empirical_ntk
from ntkpipe.ntk.layout import flatten_gram
from ntkpipe.ntk.mixed import mixed_gram
from ntkpipe.ntk.mixed import neural_anisotropy_directions
from ntkpipe.ntk.mixed import stein_check

__all__ = [
    "NtkImplementation",
    "empirical_ntk",
    "flatten_gram",
    "jacobian_alignment",
    "jacobian_alignments",
    "mixed_gram",
    "neural_anisotropy_directions",
    "stein_check",
]
