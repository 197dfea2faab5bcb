"""Network architectures (equinox modules), their builders and their linearizations."""

from ntkpipe.models.build import ARCHITECTURES, build_model, run_keys
from ntkpipe.models.cnn import CNN, LENET5, ConvLayer
from ntkpipe.models.linearized import Linearized, trainable
from ntkpipe.models.mlp import ACTIVATIONS, MLP

__all__ = ["ACTIVATIONS", "ARCHITECTURES", "CNN", "ConvLayer", "LENET5", "Linearized", "MLP", "build_model",
           "run_keys", "trainable"]
