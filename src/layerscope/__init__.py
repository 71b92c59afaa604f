"""layerscope: where the inference time of a neural network goes, layer by layer.

The Python API (:mod:`layerscope.api`): ``layerscope.estimate``, ``layerscope.profile``, ``layerscope.bisect``,
``layerscope.bench``, ``layerscope.load`` and the :class:`~layerscope.api.Run` they return (each use case runs the
function of :mod:`layerscope.workflows` that the command line runs); ``layerscope.trace_point``
(:mod:`layerscope.tracing`) and ``layerscope.pipeline`` (:mod:`layerscope.measure.pipeline`). Each is imported on
first use, so ``import layerscope`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layerscope._lazy import from_module, lazy_names

__version__ = "0.1.0"

if TYPE_CHECKING:
    from layerscope.api import Run, bench, bisect, estimate, load, profile
    from layerscope.measure import pipeline
    from layerscope.tracing import trace_point

__all__ = ["Run", "__version__", "bench", "bisect", "estimate", "load", "pipeline", "profile", "trace_point"]

__getattr__ = lazy_names(__name__, {"trace_point": ("layerscope.tracing", "trace_point"),
                                    "pipeline": ("layerscope.measure.pipeline", None),
                                    **from_module("layerscope.api", "estimate", "profile", "bisect", "bench", "load",
                                                "Run")})
