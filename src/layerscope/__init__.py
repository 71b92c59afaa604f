"""layerscope: where the inference time of a neural network goes, layer by layer."""

__version__ = "0.1.0"
