"""OpenVINO's kernels for the latency predictor (``calibrate --kernels``): a model's layers grouped into the nodes of
its compiled runtime model (:func:`openvino_kernel_groups`), each kernel model compiled for the device and timed
(:class:`OpenVinoKernelRunner`)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernels import OwnKernels, TimingConfig
from layerscope.measure.runners import BoundaryCost, Job, Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.openvino.compile import OpenVinoOptions
from layerscope.runtimes.openvino.graph import ExecNode

__all__ = ["OpenVinoKernelRunner", "OpenVinoKernels", "openvino_kernel_groups", "openvino_reorders"]


def openvino_kernel_groups(graph: Graph, config: SessionConfig, device: str = "CPU",
                           options: OpenVinoOptions | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """OpenVINO's kernels for ``graph`` on ``device`` that do the work of source layers: ``(runtime node,
    layer ids)``: the nodes of its compiled runtime model
    (:func:`~layerscope.runtimes.openvino.graph.runtime_nodes`) that one profiled inference on random inputs
    executes (constants, weight reshapes and in-place nodes do not); a layer two of them share goes with the
    first. The model is read as ``profile`` reads it (:func:`~layerscope.runtimes.openvino.compile.folded_reader`:
    top-level ``If`` layers folded to the branch those inputs take); ``ModelError`` (exit 2) when OpenVINO cannot
    read it."""
    view = _runtime_view(graph, config, device, options)
    taken: set[str] = set()
    out = []
    for node in view.nodes.values():
        layers = tuple(i for i in node.layers if i not in taken)
        if node.category == "layer" and node.name in view.executed and layers:
            taken.update(layers)
            out.append((node.name, layers))
    return out


def openvino_reorders(graph: Graph, config: SessionConfig, device: str = "CPU",
                      options: OpenVinoOptions | None = None) -> list[tuple[str, int, tuple[str, ...]]]:
    """The layout conversions OpenVINO runs for ``graph`` on ``device`` (the executed ``Reorder`` nodes of its
    compiled runtime model, read as :func:`openvino_kernel_groups` reads it), in runtime order: ``(node, bytes it
    converts, the source layers whose data it converts)``. The bytes: its elements times the larger element size
    of its input and output (a kernel model's boundary reorder is counted at the model tensor's float32 size, as
    :func:`~layerscope.measure.kernels.time_kernels` counts it); 0 for a dynamic shape."""
    return list(_runtime_view(graph, config, device, options).reorders)


@dataclass(frozen=True)
class _RuntimeView:
    """What one profiled inference of a compiled model shows: its runtime nodes tied to source layers, the names of
    those that executed, and its executed ``Reorder`` nodes as :func:`openvino_reorders` gives them."""

    nodes: dict[str, ExecNode]
    executed: frozenset[str]
    reorders: tuple[tuple[str, int, tuple[str, ...]], ...]


def _runtime_view(graph: Graph, config: SessionConfig, device: str, options: OpenVinoOptions | None,
                  ) -> _RuntimeView:
    """``graph`` compiled for ``device`` with profiling (read as ``profile`` reads it) and one inference run on
    random inputs (:class:`_RuntimeView`). The last graph's view is kept: a prediction asks for its kernels, then
    for its reorders, from one compilation."""
    key = (config.threads, device, options)
    if _LAST and _LAST[0][0] is graph and _LAST[0][1] == key:
        return _LAST[0][2]
    view = _compile_view(graph, config, device, options)
    _LAST[:] = [(graph, key, view)]
    return view


#: :func:`_runtime_view`'s last graph, its settings and its view.
_LAST: list[tuple[Graph, tuple[int, str, OpenVinoOptions | None], _RuntimeView]] = []


def _compile_view(graph: Graph, config: SessionConfig, device: str, options: OpenVinoOptions | None) -> _RuntimeView:
    """:func:`_runtime_view`'s work, done anew."""
    from layerscope.runtimes.openvino import compile as ov
    from layerscope.runtimes.openvino.graph import runtime_nodes, source_layers_of_ops

    feeds = make_inputs(graph)
    read = ov.folded_reader(graph, feeds, device)[0]()
    compiled = ov.compile_for(graph, SessionConfig(provider=device, threads=config.threads),
                              options or ov.OpenVinoOptions(), profiling=True, model=read)
    request = compiled.create_infer_request()
    request.infer(feeds)
    executed = frozenset(info.node_name for info in request.profiling_info if info.status.name == "EXECUTED")
    nodes = runtime_nodes(compiled, graph, source_layers_of_ops(graph, read))
    reorders = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        name = op.get_friendly_name()
        node = nodes.get(name)
        if node is None or node.layer_type != "Reorder" or name not in executed:
            continue
        shape = op.get_output_partial_shape(0)
        size = max(int(op.get_input_element_type(0).size), int(op.get_output_element_type(0).size))
        nbytes = math.prod(int(d) for d in shape.to_shape()) * size if shape.is_static else 0
        reorders.append((name, nbytes, node.serves))
    return _RuntimeView(nodes, executed, tuple(reorders))


@dataclass(frozen=True)
class OpenVinoKernels(OwnKernels):
    """OpenVINO's kernels on ``device`` with ``options``: its compiled runtime model's nodes, each kernel model
    compiled and timed by an :class:`OpenVinoKernelRunner`."""

    device: str = "CPU"
    options: OpenVinoOptions | None = None
    name: str = "openvino"

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        return OpenVinoKernelRunner(graph, config, make_inputs(graph), device=self.device, options=self.options,
                                    runs_per_visit=timing.runs_per_visit, visit_warmup=timing.visit_warmup)

    def groups(self, graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
        return openvino_kernel_groups(graph, config, self.device, self.options)

    def reorders(self, graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
        return openvino_reorders(graph, config, self.device, self.options)


class OpenVinoKernelRunner:
    """One kernel model compiled by OpenVINO for ``device`` (``options``; ``config.threads`` inference
    threads), timed as :class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` times one: one sample = the fastest of
    ``runs_per_visit`` synchronous ``infer`` calls after ``visit_warmup`` untimed ones (``warmup`` more on the
    first visit)."""

    def __init__(self, graph: Graph, config: SessionConfig, feeds: Mapping[str, np.ndarray], *, device: str,
                 options: OpenVinoOptions | None, runs_per_visit: int = 1, visit_warmup: int = 0,
                 warmup: int = 2) -> None:
        import openvino

        from layerscope.runtimes.openvino.compile import InferSession, compile_for, device_name

        options = options or OpenVinoOptions()
        name = device_name(device)
        self._graph, self._options = graph, options
        self._config = SessionConfig(provider=name, threads=config.threads)
        self._session = InferSession(compile_for(graph, self._config, options, profiling=False))
        self.feeds = dict(feeds)
        self.runs_per_visit, self.visit_warmup, self.warmup = runs_per_visit, visit_warmup, warmup
        self._new = True
        machine = machine_info()
        self._identity = {
            "runner": "openvino", "version": openvino.get_version(), "provider": name, "threads": config.threads,
            "opt_level": None, "precision": options.precision, "performance_hint": options.performance_hint,
            "streams": options.streams, "runs_per_visit": runs_per_visit, "visit_statistic": "min",
            "visit_warmup": visit_warmup, "warmup": warmup, "hostname": machine["hostname"], "cpu": machine["cpu"]}

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def measure(self, job: Job) -> float:
        for _ in range(self.warmup if self._new else 0):
            self._session.run(None, self.feeds)
        self._new = False
        for _ in range(self.visit_warmup):
            self._session.run(None, self.feeds)
        best = math.inf
        for _ in range(self.runs_per_visit):
            start = time.perf_counter_ns()
            self._session.run(None, self.feeds)
            best = min(best, (time.perf_counter_ns() - start) / 1e3)
        return best

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost:
        """The kernel model's conversion nodes at its inputs and outputs, which ``whole`` (a model without any)
        does not run: the plugin's Reorder / Convert between the caller's plain tensors and the layout and precision
        it computes in (:func:`~layerscope.runtimes.openvino.runner.boundary_cost`, ``warmup`` untimed runs
        first). A kernel in its model reads and writes its neighbours' layout: the predictor times it without
        these and adds the model's own (:meth:`OpenVinoKernels.reorders`)."""
        from layerscope.runtimes.openvino.compile import compile_for
        from layerscope.runtimes.openvino.runner import boundary_cost

        profiled = compile_for(self._graph, self._config, self._options, profiling=True)
        return boundary_cost(profiled, self.feeds, job.model_path, (frozenset(), frozenset()), warmup=self.warmup,
                             runs=runs)

    def close(self) -> None:
        self.feeds.clear()
