"""Model loading: an ONNX file becomes a shape-resolved, constant-folded :class:`Graph`."""

from layerscope.model.load import load_model, parse_shape_arg
from layerscope.model.types import DTYPE_BYTES, Graph, Node, TensorInfo

__all__ = ["DTYPE_BYTES", "Graph", "Node", "TensorInfo", "load_model", "parse_shape_arg"]
