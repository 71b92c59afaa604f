"""OpenVINO's per-node performance counters as layerscope's kernels.

Contract: :func:`counters` reads the last inference's real time per executed node (µs) of an infer request
compiled with ``PERF_COUNT``; :func:`counter_kernels` turns the counters of the profiled runs into one
:class:`~layerscope.measure.profile.KernelResult` per node that executed in any run, in runtime-model order, each
covering the source layers its runtime node names (a counter for a node the runtime model lacks is kept,
``unmapped``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from layerscope.measure.kernel_trace import KernelMemory, KernelSamples
from layerscope.measure.profile import KernelResult
from layerscope.runtimes.openvino.graph import ExecNode
from layerscope.stats import summarize


def counters(request: Any) -> dict[str, float]:
    """The last inference's real time per executed node (µs)."""
    times: dict[str, float] = {}
    for info in request.profiling_info:
        if info.status.name == "EXECUTED":
            times[info.node_name] = times.get(info.node_name, 0.0) + info.real_time.total_seconds() * 1e6
    return times


def counter_kernels(nodes: Mapping[str, ExecNode], per_run: Sequence[Mapping[str, float]],
                   device: str) -> tuple[KernelResult, ...]:
    """One kernel per node that executed in any profiled run, in runtime-model order."""
    executed = {name for run in per_run for name in run}
    results = []
    for name, node in nodes.items():
        if name not in executed:
            continue
        series = tuple(run.get(name, 0.0) for run in per_run)
        samples = KernelSamples(name, node.layer_type, device, series, exec_type=node.exec_type,
                                precision=node.precision,
                                memory=None if node.output_bytes is None else KernelMemory(node.output_bytes))
        results.append(KernelResult(samples, summarize(series), node.layers, node.category, node.serves))
    for name in sorted(executed - set(nodes)):  # counters for a node the runtime model lacks: keep, unmapped
        series = tuple(run.get(name, 0.0) for run in per_run)
        results.append(KernelResult(KernelSamples(name, "", device, series), summarize(series), (), "unmapped"))
    return tuple(results)
