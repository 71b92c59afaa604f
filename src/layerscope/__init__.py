"""layerscope: where the inference time of a neural network goes, layer by layer.

The Python API (:mod:`layerscope.api`): ``layerscope.estimate``, ``layerscope.profile``, ``layerscope.load`` and
the :class:`~layerscope.api.Run` they return; ``layerscope.trace_point`` (:mod:`layerscope.tracing`) and
``layerscope.pipeline`` (:mod:`layerscope.measure.pipeline`). Each is imported on first use, so ``import
layerscope`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from layerscope.api import Run, estimate, load, profile
    from layerscope.measure import pipeline
    from layerscope.tracing import trace_point

__all__ = ["Run", "__version__", "estimate", "load", "pipeline", "profile", "trace_point"]

_LAZY = {"trace_point": ("layerscope.tracing", "trace_point"), "pipeline": ("layerscope.measure.pipeline", None),
         "estimate": ("layerscope.api", "estimate"), "profile": ("layerscope.api", "profile"),
         "load": ("layerscope.api", "load"), "Run": ("layerscope.api", "Run")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'layerscope' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
