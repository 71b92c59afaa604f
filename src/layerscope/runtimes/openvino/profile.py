"""Measure every layer of a model on OpenVINO: performance counters per executed node, the compiler's fusion map.

Contract of :meth:`OpenVinoBackend.profile`:

- end-to-end latency: a model compiled without performance counters (:func:`~.compile.compile_for`), ``warmup``
  then ``runs`` timed ``InferRequest.infer`` calls;
- per executed node: a second compilation with ``PERF_COUNT`` on; after each of ``runs`` profiled runs (after
  ``warmup`` untimed ones) ``InferRequest.profiling_info`` gives every node's mean real time so far, from which
  :class:`~.counters.CounterRuns` takes its time in that run (nodes whose status is not ``EXECUTED`` count 0 µs);
  a kernel's median, P90 and CV are over those runs, with the
  node's exec type (``jit_avx2_f32``) and its runtime precision from the runtime model;
- the fusion map is the compiler's (:func:`~.graph.runtime_nodes`): executed nodes with source layers are
  ``layer`` kernels; reorders, inputs and outputs are ``layout``; constants ``constant``; anything else
  ``unmapped`` (reported, never dropped). Source layers no executed node covers are ``eliminated`` (the compiler
  removed or folded them); layers sharing one node are ``fused`` and its time is split over them by ``weights`` as
  on ONNX Runtime (:func:`~layerscope.measure.profile.layer_results`);
- ``coverage`` = Σ node medians / median profiled run; ``overhead`` = median profiled / median plain − 1;
- Ctrl-C during the profiled runs keeps the runs done so far (``interrupted``); before the first profiled
  run it raises :class:`~layerscope.measure.profile.PartialProfile` with the end-to-end runs done by then;
- the precision the compiled model runs at is read back from it (:func:`~.compile.run_precision`): the
  measurement records it and the reports print it; a model with top-level ``If`` layers is measured with each
  folded to the branch the run's inputs take (:func:`~.compile.folded_reader`), which the measurement's
  ``machine`` records under ``openvino_folded_if``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from layerscope.errors import ModelError
from layerscope.measure.fusion import FusionMap, KernelMapping
from layerscope.measure.memory import OPENVINO_SOURCE, measured_memory
from layerscope.measure.profile import (
    KernelResult,
    Measurement,
    ProfiledRuns,
    Progress,
    RunTimer,
    back_to_back,
    layer_results,
    profile_runs,
    run_times,
)
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.openvino.compile import (
    OpenVinoOptions,
    _feed_dict,
    _infer_failures,
    _require_openvino,
    compile_for,
    device_name,
    folded_reader,
    infer_shared,
    machine_record,
    run_precision,
)
from layerscope.runtimes.openvino.counters import CounterRuns, counter_kernels
from layerscope.runtimes.openvino.graph import ExecNode, runtime_nodes, source_layers_of_ops

__all__ = ["OpenVinoBackend"]


class OpenVinoBackend:
    """OpenVINO through its Python API: ``profiling_info`` for node times, the runtime model's
    ``originalLayersNames`` for the fusion map. See the module docstring."""

    name = "openvino"

    def __init__(self, options: OpenVinoOptions | None = None) -> None:
        self.options = options or OpenVinoOptions()

    def check_provider(self, provider: str) -> str:
        return device_name(provider)

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        try:
            return self._profile(graph, feeds, config, runs=runs, warmup=warmup, weights=weights, progress=progress)
        except ModelError as error:
            from layerscope.runtimes.openvino.fallback import fallback_after, profile_with_fallback

            fallback = fallback_after(error, graph, self.options)
        return profile_with_fallback(graph, feeds, config, self.options, fallback, runs=runs, warmup=warmup,
                                     weights=weights, progress=progress)

    def _profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                 warmup: int, weights: Mapping[str, float] | None = None,
                 progress: Progress | None = None) -> Measurement:
        """The whole model on OpenVINO (see the module docstring)."""
        openvino = _require_openvino()
        device = self.check_provider(config.provider)
        read_model, folded = folded_reader(graph, feeds, device)

        def plain(timer: RunTimer) -> tuple[list[float], bool]:
            compiled = compile_for(graph, config, self.options, profiling=False, model=read_model())
            request = compiled.create_infer_request()
            with _infer_failures(feeds, run_precision(compiled)):
                return timer(partial(infer_shared, request, _feed_dict(compiled, feeds)))

        def profiled(timer: RunTimer) -> ProfiledRuns[tuple[Any, Any, list[dict[str, float]], list[float]]]:
            read = read_model()
            compiled = compile_for(graph, config, self.options, profiling=True, model=read)
            request = compiled.create_infer_request()
            inputs = _feed_dict(compiled, feeds)
            node_runs = CounterRuns(request, warmup)

            def run_once() -> None:
                infer_shared(request, inputs)
                node_runs.inferred()

            with _infer_failures(feeds, run_precision(compiled)):
                run_us, interrupted = timer(run_once, after=node_runs.record)
            return ProfiledRuns((read, compiled, node_runs.per_run, run_us), bool(run_us), interrupted)

        latency_samples, result = profile_runs(plain, profiled, config=config, runs=runs, warmup=warmup,
                                               progress=progress)
        (read, compiled, per_run, run_us), interrupted = result.data, result.interrupted
        owner = source_layers_of_ops(graph, read)
        nodes = runtime_nodes(compiled, graph, owner)
        precision = run_precision(compiled)
        kernels = counter_kernels(nodes, per_run, device)
        fusion = _fusion_map(graph, nodes, kernels)
        layers = layer_results(graph, kernels, weights or {})
        machine = {**machine_record(device), **({"openvino_folded_if": folded} if folded else {})}
        return Measurement(
            config=config, backend_version=openvino.get_version(), provider=device, warmup=warmup, kernels=kernels,
            layers=layers, fusion=fusion, machine=machine, median_run=back_to_back(kernels), interrupted=interrupted,
            **run_times(latency_samples, run_us, kernels), backend=self.name, device=device, precision=precision,
            memory=measured_memory(graph, kernels, OPENVINO_SOURCE),
            performance_hint=str(compiled.get_property("PERFORMANCE_HINT")),
            streams=int(compiled.get_property("NUM_STREAMS")), latency_source="uninstrumented InferRequest.infer")


def _fusion_map(graph: Graph, nodes: Mapping[str, ExecNode], executed: Sequence[KernelResult]) -> FusionMap:
    """Every runtime node's layers; eliminated: the source layers no *executed* node covers (a reshape done in
    place, a node the compiler kept but never runs, a layer folded away)."""
    kernels = {n.name: KernelMapping(n.name, n.layer_type, "", n.layers, n.category) for n in nodes.values()}
    covered = {lid for k in executed if k.category == "layer" for lid in k.layers}
    return FusionMap(kernels, tuple(node.id for node in graph.layers if node.id not in covered))
