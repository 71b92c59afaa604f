"""Model loading: an ONNX file becomes a shape-resolved, constant-folded :class:`Graph`.

``load_model`` and ``parse_shape_arg`` are imported on first use: the data types alone (what a saved run's
readers need) do not pull in ``onnx``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layerscope.model.types import DTYPE_BYTES, Graph, Node, TensorInfo

if TYPE_CHECKING:
    from layerscope.model.load import load_model, parse_shape_arg

__all__ = ["DTYPE_BYTES", "Graph", "Node", "TensorInfo", "load_model", "parse_shape_arg"]


def __getattr__(name: str) -> Any:
    if name in ("load_model", "parse_shape_arg"):
        from layerscope.model import load

        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
