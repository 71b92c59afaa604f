"""layerscope: where the inference time of a neural network goes, layer by layer.

The Python API (:mod:`layerscope.api`): ``layerscope.estimate``, ``layerscope.profile``, ``layerscope.bisect``,
``layerscope.bench``, ``layerscope.import_run``, ``layerscope.reconcile``, ``layerscope.advise``,
``layerscope.calibrate``, ``layerscope.compare``, ``layerscope.profile_pipeline``, ``layerscope.run_sweep``,
``layerscope.lint``, ``layerscope.load`` and the :class:`~layerscope.api.Run` they return (each use case runs the
function of :mod:`layerscope.workflows` that the command line runs); ``layerscope.trace_point``
(:mod:`layerscope.tracing`) and ``layerscope.pipeline`` (:mod:`layerscope.runtimes.onnxruntime.pipeline`). Each is
imported on first use, so ``import layerscope`` stays cheap.
"""

from __future__ import annotations

import os

from layerscope._lazy import TYPE_CHECKING, from_module, lazy_names
from layerscope.version import __version__

#: ONNX Runtime's telemetry writes a device id and an event database under ``~/.cache/Microsoft`` as soon as it is
#: imported: a measurement tool writes only where it is told. Off unless the caller set the variable itself
#: (``ORT_DISABLE_TELEMETRY=0`` keeps it); set before any module of the package imports ONNX Runtime, and inherited
#: by the processes a command starts.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

if TYPE_CHECKING:
    from layerscope.api import (
        Run,
        advise,
        bench,
        bisect,
        calibrate,
        compare,
        estimate,
        import_run,
        lint,
        load,
        profile,
        profile_pipeline,
        reconcile,
        run_sweep,
    )
    from layerscope.runtimes.onnxruntime import pipeline
    from layerscope.tracing import trace_point

__all__ = ["Run", "__version__", "advise", "bench", "bisect", "calibrate", "compare", "estimate", "import_run", "lint",
           "load", "pipeline", "profile", "profile_pipeline", "reconcile", "run_sweep", "trace_point"]

__getattr__ = lazy_names(__name__, {"trace_point": ("layerscope.tracing", "trace_point"),
                                    "pipeline": ("layerscope.runtimes.onnxruntime.pipeline", None),
                                    **from_module("layerscope.api", "estimate", "profile", "bisect", "bench", "load",
                                                "Run", "import_run", "reconcile", "advise", "calibrate",
                                                "profile_pipeline", "run_sweep", "lint", "compare")})
