"""Network architectures (equinox modules), their builders and their linearizations."""

from ntkpipe.models.build import ARCHITECTURES, build_model, learning_rate_scale, run_keys
from ntkpipe.models.cnn import CNN, LENET5, ConvLayer
from ntkpipe.models.layers import layer_components
from ntkpipe.models.linearized import Linearized, trainable
from ntkpipe.models.mlp import ACTIVATIONS, MLP

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURES",
    "CNN",
    "LENET5",
    "MLP",
    "ConvLayer",
    "Linearized",
    "build_model",
    "layer_components",
    "learning_rate_scale",
    "run_keys",
    "trainable",
]
