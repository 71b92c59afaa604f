"""ONNX Runtime in this process: the profiler for kernels, ``optimized_model_filepath`` for the fusion map, CPU and
whichever other execution providers the installed build has (:mod:`~layerscope.runtimes.onnxruntime.runtime`).
Importing this package imports no runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from layerscope.runtimes.spec import RuntimeSpec

if TYPE_CHECKING:
    from layerscope.runtimes.base import Runtime

SPEC = RuntimeSpec(
    name="onnxruntime", title="ONNX Runtime",
    capabilities=frozenset({"kernel-profile", "optimized-graph", "uninstrumented-timing", "intra-op-threads",
                            "inter-op-threads", "opt-levels", "providers", "in-process", "kernel-timing"}),
    options=("provider", "threads", "opt_level"), default_threads="onnxruntime default (one per physical core)")


def create() -> Runtime:
    """The ONNX Runtime runtime (imports ``onnxruntime`` only when it measures)."""
    from layerscope.runtimes.onnxruntime.runtime import OnnxRuntime

    return OnnxRuntime()
