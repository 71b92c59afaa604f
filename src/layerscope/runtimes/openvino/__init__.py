"""OpenVINO in this process: ``profiling_info`` for node times, the runtime model's ``originalLayersNames`` for the
fusion map, a device (``CPU``, ``GPU``, ``NPU``, ``AUTO``) compiled for at a precision and performance hint it
reports (:mod:`~layerscope.runtimes.openvino.runtime`). Importing this package imports no runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from layerscope.runtimes.spec import RuntimeSpec

if TYPE_CHECKING:
    from layerscope.runtimes.base import Runtime

SPEC = RuntimeSpec(
    name="openvino", title="OpenVINO",
    capabilities=frozenset({"kernel-profile", "optimized-graph", "uninstrumented-timing", "intra-op-threads",
                            "devices", "exec-graph-cuts", "model-files", "in-process", "kernel-timing"}),
    options=("device", "precision", "performance_hint", "streams", "threads"), default_threads="OpenVINO default",
    # A model warmed by one run of its own still timed 5-8% over its back-to-back time on SqueezeNet (the other
    # models of the round in between); warmed by four, SqueezeNet's bisect met both accuracy goals in 6 runs of 6
    # and YOLOv5s-320's in 4 of 6. One compilation of ResNet-50 ran 2 % slower than three others of the same model,
    # steadily (measure.runners.Recompile), and such an offset of a prefix is up to a third of a segment of 5 %.
    visit_warmup=4, recompile_every=20)


def create() -> Runtime:
    """The OpenVINO runtime (imports ``openvino`` only when it measures)."""
    from layerscope.runtimes.openvino.runtime import OpenVino

    return OpenVino()
