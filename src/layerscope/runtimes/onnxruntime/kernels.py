"""ONNX Runtime's kernels for the latency predictor: how it groups a model's layers into kernels, and what times
a single-kernel model on it.

Contract: a kernel is a node of the graph ONNX Runtime runs (:func:`optimized_graph`, written with
``optimized_model_filepath`` under the session settings given); :func:`kernel_groups` maps those nodes to source
layers with the fusion map (:func:`~layerscope.measure.fusion.build_fusion_map`); :class:`OrtKernels` is the
:class:`~layerscope.measure.kernels.KernelRunner` that times each kernel model with an
:class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` (2 untimed runs before the first visit).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx

from layerscope.measure.fusion import build_fusion_map
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernels import OwnKernels, TimingConfig
from layerscope.measure.runners import Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.runner import OrtRunner
from layerscope.runtimes.onnxruntime.session import make_session
from layerscope.tempdirs import scratch

__all__ = ["OrtKernels", "kernel_groups", "optimized_graph"]


def optimized_graph(model_path: Path, config: SessionConfig) -> onnx.GraphProto:
    """The graph ONNX Runtime runs for ``model_path`` (its optimized model, external data not loaded)."""
    with scratch("kernels") as tmp:
        out = Path(tmp) / "optimized.onnx"
        make_session(model_path, config, optimized_model_path=str(out))
        return onnx.load(str(out), load_external_data=False).graph


def kernel_groups(graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
    """ONNX Runtime's kernels for ``graph`` that do the work of source layers: ``(kernel name, layer ids)``,
    from the fusion map of its optimized graph (layout, constant and unmapped kernels left out). Kernels that do
    the work of the same layers (one source layer the runtime runs as several kernels: a HardSwish as HardSigmoid
    and Mul) are one group, named ``a+b``: extracted, the layer is timed as all of them, and predicted once."""
    optimized = onnx.ModelProto(graph=optimized_graph(Path(graph.path), config))
    fusion = build_fusion_map(graph, optimized)
    merged: dict[tuple[str, ...], list[str]] = {}
    for k in fusion.kernels.values():
        if k.category == "layer" and k.layers:
            merged.setdefault(k.layers, []).append(k.kernel)
    return [("+".join(names), layers) for layers, names in merged.items()]


@dataclass(frozen=True)
class OrtKernels(OwnKernels):
    """ONNX Runtime's kernels: its optimized graph's nodes, each timed by an
    :class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` (2 untimed runs before the first visit)."""

    name: str = "onnxruntime"

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        return OrtRunner(config, make_inputs(graph), runs_per_visit=timing.runs_per_visit,
                         visit_warmup=timing.visit_warmup, warmup=2)

    def groups(self, graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
        return kernel_groups(graph, config)
