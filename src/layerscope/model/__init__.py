"""Model loading: an ONNX file becomes a shape-resolved, constant-folded :class:`Graph`.

``load_model`` and ``parse_shape_arg`` are imported on first use: the data types alone (what a saved run's
readers need) do not pull in ``onnx``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layerscope._lazy import from_module, lazy_names
from layerscope.model.types import DTYPE_BYTES, Graph, Node, TensorInfo

if TYPE_CHECKING:
    from layerscope.model.load import load_model, parse_shape_arg

__all__ = ["DTYPE_BYTES", "Graph", "Node", "TensorInfo", "load_model", "parse_shape_arg"]


__getattr__ = lazy_names(__name__, from_module("layerscope.model.load", "load_model", "parse_shape_arg"))
