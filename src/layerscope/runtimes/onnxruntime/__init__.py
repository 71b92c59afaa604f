"""ONNX Runtime in this process: the profiler for kernels, ``optimized_model_filepath`` for the fusion map, CPU and
whichever other execution providers the installed build has.

Modules: :mod:`~layerscope.runtimes.onnxruntime.runtime` (the runtime protocol's entry),
:mod:`~layerscope.runtimes.onnxruntime.session` (sessions, providers, its failures),
:mod:`~layerscope.runtimes.onnxruntime.profile` (per-layer profile), :mod:`~layerscope.runtimes.onnxruntime.trace`
(its profiler's trace reader), :mod:`~layerscope.runtimes.onnxruntime.runner` (the bisect runner),
:mod:`~layerscope.runtimes.onnxruntime.kernels` (kernel grouping and timing for the predictor),
:mod:`~layerscope.runtimes.onnxruntime.pipeline` (pipeline tracing). Importing this package imports no runtime."""

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
