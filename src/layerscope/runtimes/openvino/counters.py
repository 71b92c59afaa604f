"""OpenVINO's per-node performance counters as layerscope's kernels.

Contract: OpenVINO's CPU plugin reports, per executed node of an infer request compiled with ``PERF_COUNT``, the
node's *mean* real time over every execution since the model was compiled, in whole µs (its ``PerfCount::avg()``,
``src/plugins/intel_cpu/src/perf_count.h``: total µs / executions, integer division), warm-up runs included; not the
last inference's time. :func:`counters` reads those means; :class:`CounterRuns` turns the readings taken after each
timed run into each run's time per node: the node's running total after its n-th execution is its mean x n, a run's
time the difference of two totals (exact within the truncation of the two means, under n µs: +-(warm-up + k) µs for
the k-th timed run; the timed runs' mean within (2 x warm-up + runs) / runs µs), the warm-up runs' time left out by
a reading taken after the last of them. :func:`counter_kernels` turns the per-run times into one
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
    """Each executed node's real time as the request reports it (µs): its mean over every execution so far on the
    CPU plugin (module docstring)."""
    times: dict[str, float] = {}
    for info in request.profiling_info:
        if info.status.name == "EXECUTED":
            times[info.node_name] = times.get(info.node_name, 0.0) + info.real_time.total_seconds() * 1e6
    return times


class CounterRuns:
    """Each timed run's time per executed node of ``request`` (µs, :attr:`per_run`), from the running means
    :func:`counters` reads (module docstring). Call :meth:`inferred` after every inference of ``request`` (the
    ``warmup`` untimed ones too: the reading after the last of them is the baseline the first timed run is taken
    from, read outside the timed runs), then :meth:`record` after each timed run. Taken: every inference executes
    each of the request's executed nodes once (a static graph's)."""

    def __init__(self, request: Any, warmup: int) -> None:
        self.request = request
        self.warmup = warmup
        self.executions = 0
        self.totals: dict[str, float] = {}
        self.per_run: list[dict[str, float]] = []

    def inferred(self) -> None:
        self.executions += 1
        if self.executions == self.warmup:
            self.totals = self._totals()

    def record(self) -> None:
        totals = self._totals()
        self.per_run.append({name: max(0.0, total - self.totals.get(name, 0.0)) for name, total in totals.items()})
        self.totals = {**self.totals, **totals}

    def _totals(self) -> dict[str, float]:
        return {name: mean_us * self.executions for name, mean_us in counters(self.request).items()}


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
