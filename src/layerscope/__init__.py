"""layerscope: where the inference time of a neural network goes, layer by layer.

``layerscope.trace_point`` (:mod:`layerscope.tracing`) and ``layerscope.pipeline``
(:mod:`layerscope.measure.pipeline`) are imported on first use, so ``import layerscope`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from layerscope.measure import pipeline
    from layerscope.tracing import trace_point

__all__ = ["__version__", "pipeline", "trace_point"]

_LAZY = {"trace_point": ("layerscope.tracing", "trace_point"), "pipeline": ("layerscope.measure.pipeline", None)}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'layerscope' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
