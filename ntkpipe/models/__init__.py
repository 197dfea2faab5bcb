"""Network architectures (equinox modules), their builders and their linearizations."""

from ntkpipe.models.architecture import Architecture
from ntkpipe.models.build import ARCHITECTURES, build_model, learning_rate_scale, run_keys
from ntkpipe.models.cnn import CNN, LENET5, ConvLayer
from ntkpipe.models.layers import layer_components
from ntkpipe.models.linearized import Linearized, stored, trainable
from ntkpipe.models.mlp import ACTIVATIONS, MLP
from ntkpipe.models.resnet import ResNet
from ntkpipe.models.state import BatchStats, forward_batch, split_state

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURES",
    "Architecture",
    "BatchStats",
    "CNN",
    "LENET5",
    "MLP",
    "ResNet",
    "ConvLayer",
    "Linearized",
    "build_model",
    "forward_batch",
    "layer_components",
    "learning_rate_scale",
    "run_keys",
    "split_state",
    "stored",
    "trainable",
]
