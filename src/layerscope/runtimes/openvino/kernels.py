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
from layerscope.measure.runners import Job, Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.openvino.compile import OpenVinoOptions

__all__ = ["OpenVinoKernelRunner", "OpenVinoKernels", "openvino_kernel_groups"]


def openvino_kernel_groups(graph: Graph, config: SessionConfig, device: str = "CPU",
                           options: OpenVinoOptions | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """OpenVINO's kernels for ``graph`` on ``device`` that do the work of source layers: ``(runtime node,
    layer ids)``: the nodes of its compiled runtime model
    (:func:`~layerscope.runtimes.openvino.graph.runtime_nodes`) that one profiled inference on random inputs
    executes (constants, weight reshapes and in-place nodes do not); a layer two of them share goes with the
    first. The model is read as ``profile`` reads it (:func:`~layerscope.runtimes.openvino.compile.folded_reader`:
    top-level ``If`` layers folded to the branch those inputs take); ``ModelError`` (exit 2) when OpenVINO cannot
    read it."""
    from layerscope.runtimes.openvino import compile as ov
    from layerscope.runtimes.openvino.graph import runtime_nodes, source_layers_of_ops

    feeds = make_inputs(graph)
    read = ov.folded_reader(graph, feeds, device)[0]()
    compiled = ov.compile_for(graph, SessionConfig(provider=device, threads=config.threads),
                              options or ov.OpenVinoOptions(), profiling=True, model=read)
    request = compiled.create_infer_request()
    request.infer(feeds)
    executed = {info.node_name for info in request.profiling_info if info.status.name == "EXECUTED"}
    nodes = runtime_nodes(compiled, graph, source_layers_of_ops(graph, read))
    taken: set[str] = set()
    out = []
    for node in nodes.values():
        layers = tuple(i for i in node.layers if i not in taken)
        if node.category == "layer" and node.name in executed and layers:
            taken.update(layers)
            out.append((node.name, layers))
    return out


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
        self._session = InferSession(compile_for(graph, SessionConfig(provider=name, threads=config.threads),
                                                 options, profiling=False))
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

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        """``None``: not used for kernels."""
        return None

    def close(self) -> None:
        self.feeds.clear()
