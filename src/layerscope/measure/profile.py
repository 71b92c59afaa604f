"""What a per-layer profile is, whichever runtime measured it, and the profiling lifecycle every runtime shares.

Contract:

- :class:`Measurement`: everything one ``profile`` measured (kernels, layers, fusion map, end-to-end and profiled
  statistics, the runtime's settings), ready to be joined into a run;
- :func:`profile_runs`: the lifecycle (end-to-end runs, then profiled runs; warm-up, progress, interrupts) that
  a runtime's ``profile`` calls with its own two phases (build and time the plain model; build, time and read the
  profiled one): an interrupt during the profiled runs keeps the runs done so far and sets ``interrupted``; one
  before the first profiled run completes (during the end-to-end runs, the profiled warm-up or the profiled
  model's creation) raises :class:`PartialProfile` with the end-to-end runs done by then; one during the first
  warm-up, when nothing was measured, propagates as it came;
- :func:`kernel_results`, :func:`layer_results`: each kernel's time is split over the source layers it covers in
  proportion to ``weights`` (the layers' estimated latency), equally when those are all zero; the split is per
  run, so per-layer percentiles are percentiles of per-run sums; :func:`attribution_violations` checks that
  invariant.

The runtimes' own ``profile``: :func:`layerscope.runtimes.onnxruntime.profile.profile_model`,
:class:`layerscope.runtimes.openvino.profile.OpenVinoBackend`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from layerscope.measure.fusion import FusionMap
from layerscope.measure.kernel_trace import KernelSamples, ProfileData, TraceEvent
from layerscope.measure.memory import MeasuredMemory
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.stats import LatencyStats, drift, summarize

#: progress(phase, done, total): phases "warmup", "latency", "warmup-profiled", "profiled".
Progress = Callable[[str, int, int], None]
T = TypeVar("T")


@dataclass(frozen=True)
class KernelResult:
    """One runtime kernel: its stats over the measured runs and the layers it covers; a ``layout`` kernel (covering
    none) may name the layers whose data it converts (``serves``: OpenVINO's reorders, from its runtime graph)."""

    samples: KernelSamples
    stats: LatencyStats
    layers: tuple[str, ...]
    category: str
    serves: tuple[str, ...] = ()


@dataclass(frozen=True)
class LayerResult:
    """One source layer's measured time (its share of the kernels that cover it)."""

    layer_id: str
    stats: LatencyStats | None
    kernels: tuple[str, ...]
    fused_group: tuple[str, ...]
    split: bool
    status: str  # "measured" | "fused" | "eliminated"


@dataclass(frozen=True)
class Measurement:
    """Everything one ``profile`` measured, ready to be joined into a run."""

    config: SessionConfig
    backend_version: str
    provider: str
    runs: int
    warmup: int
    latency: LatencyStats
    instrumented: LatencyStats
    kernels: tuple[KernelResult, ...]
    layers: Mapping[str, LayerResult]
    fusion: FusionMap
    coverage: float
    overhead: float
    machine: Mapping[str, Any]
    median_run: tuple[TraceEvent, ...]
    interrupted: bool = False
    #: :func:`~layerscope.stats.drift` of the uninstrumented and of the profiled runs.
    latency_drift: float = 0.0
    profiled_drift: float = 0.0
    #: The uninstrumented runs (µs) in the order they were timed.
    latency_samples_us: tuple[float, ...] = ()
    #: Which runtime measured, and (compiling runtimes) on which device, at which precision, hint and streams.
    backend: str = "onnxruntime"
    device: str = ""
    precision: str = ""
    performance_hint: str = ""
    streams: int = 0
    #: How the end-to-end runs were timed, as the run's ``latency`` section says.
    latency_source: str = "uninstrumented session.run"
    #: Measured sizes per layer and their peak, where the runtime's profiler reports them.
    memory: MeasuredMemory | None = None
    #: A measurement that ran some layers on another runtime (a fallback): layer id -> the runtime that ran it, for
    #: every measured layer; layer id -> why, for each layer that fell back; empty otherwise.
    layer_runtimes: Mapping[str, str] = field(default_factory=dict)
    fallback_reasons: Mapping[str, str] = field(default_factory=dict)
    #: Lines the command shows the user about how this measurement was made (a fallback announced).
    warnings: tuple[str, ...] = ()
    created_utc: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    @property
    def unmapped_kernels(self) -> tuple[str, ...]:
        return tuple(k.samples.name for k in self.kernels if k.category == "unmapped")

    @property
    def mapped_share(self) -> float:
        """Share of kernel time that is explained: kernels covering layers, layout and constant kernels."""
        total = sum(k.stats.median_us for k in self.kernels)
        unmapped = sum(k.stats.median_us for k in self.kernels if k.category == "unmapped")
        return 1.0 - unmapped / total if total > 0 else 1.0


class PartialProfile(KeyboardInterrupt):
    """An interrupt before any profiled run completed, carrying the uninstrumented runs measured by then (µs,
    in order; at least one) and the settings they were measured with. Still a ``KeyboardInterrupt``."""

    def __init__(self, latency_samples_us: Sequence[float], *, config: SessionConfig, warmup: int,
                 planned_runs: int) -> None:
        super().__init__()
        self.latency_samples_us = tuple(latency_samples_us)
        self.config = config
        self.warmup = warmup
        self.planned_runs = planned_runs


class RunTimer(Protocol):
    """What :func:`profile_runs` hands a runtime's phase: ``timer(run_once, after)`` runs ``run_once`` (one
    inference) ``warmup`` times untimed, then ``runs`` times timed (µs, ``after`` called after each timed run);
    it returns the samples and whether an interrupt stopped the timed runs (one in the warm-up propagates)."""

    def __call__(self, run_once: Callable[[], object],
                 after: Callable[[], object] | None = None) -> tuple[list[float], bool]: ...


@dataclass(frozen=True)
class ProfiledRuns(Generic[T]):
    """What a runtime's profiled phase gives back: ``data`` (its kernel events, in its own form), whether any
    profiled run was recorded (none: the profile is partial) and whether an interrupt stopped the runs."""

    data: T
    recorded: bool
    interrupted: bool


def timed_runs(run_once: Callable[[], object], warmup: int, runs: int, *, phases: tuple[str, str],
               progress: Progress | None, after: Callable[[], object] | None = None) -> tuple[list[float], bool]:
    """``warmup`` untimed then ``runs`` timed calls of ``run_once`` (µs), progress reported as ``phases`` (warm-up,
    timed); on an interrupt in the timed ones, those done and ``True`` (an interrupt in the warm-up propagates)."""
    for i in range(warmup):
        run_once()
        if progress:
            progress(phases[0], i + 1, warmup)
    samples: list[float] = []
    try:
        for i in range(runs):
            start = time.perf_counter()
            run_once()
            samples.append((time.perf_counter() - start) * 1e6)
            if after is not None:
                after()
            if progress:
                progress(phases[1], i + 1, runs)
    except KeyboardInterrupt:
        return samples, True
    return samples, False


def profile_runs(plain: Callable[[RunTimer], tuple[list[float], bool]], profiled: Callable[[RunTimer], ProfiledRuns[T]],
                 *, config: SessionConfig, runs: int, warmup: int,
                 progress: Progress | None = None) -> tuple[list[float], ProfiledRuns[T]]:
    """The profiling lifecycle every runtime's ``profile`` shares: ``plain(timer)`` builds the uninstrumented model and
    times it with ``timer`` (phases ``warmup``, ``latency``); then ``profiled(timer)`` builds the profiled one, times
    it (``warmup-profiled``, ``profiled``) and reads its kernel events. Returns the end-to-end samples (µs) and what
    ``profiled`` gave.

    An interrupt during the end-to-end warm-up, before anything was measured, propagates as it came (none timed:
    ``KeyboardInterrupt``); one during the end-to-end runs, or anywhere in ``profiled`` before a profiled run was
    recorded, raises :class:`PartialProfile` with the end-to-end runs done by then; one during the profiled runs
    keeps those done (``ProfiledRuns.interrupted``)."""
    latency_samples, interrupted = plain(
        lambda run_once, after=None: timed_runs(run_once, warmup, runs, phases=("warmup", "latency"), progress=progress,
                                                 after=after))
    if not latency_samples:
        raise KeyboardInterrupt

    def partial_profile() -> PartialProfile:
        return PartialProfile(latency_samples, config=config, warmup=warmup, planned_runs=runs)

    if interrupted:
        raise partial_profile()
    try:
        result = profiled(lambda run_once, after=None: timed_runs(
            run_once, warmup, runs, phases=("warmup-profiled", "profiled"), progress=progress, after=after))
    except KeyboardInterrupt:
        raise partial_profile() from None
    if not result.recorded:
        raise partial_profile()
    return latency_samples, result


def run_times(latency_samples_us: Sequence[float], profiled_us: Sequence[float],
              kernels: Sequence[KernelResult]) -> dict[str, Any]:
    """A :class:`Measurement`'s timing fields, defined once for every runtime, from the end-to-end runs (µs), the
    profiled runs' durations (µs) and the kernels: ``latency``, ``instrumented``, ``runs`` (profiled runs kept),
    ``coverage`` = Σ kernel medians / median profiled run, ``overhead`` = median profiled run / median end-to-end
    run − 1 (each 0 when its divisor is), the two drifts and the end-to-end samples."""
    latency, instrumented = summarize(latency_samples_us), summarize(profiled_us)
    kernel_total = sum(k.stats.median_us for k in kernels)
    return {"latency": latency, "instrumented": instrumented, "runs": len(profiled_us),
            "coverage": kernel_total / instrumented.median_us if instrumented.median_us else 0.0,
            "overhead": instrumented.median_us / latency.median_us - 1.0 if latency.median_us else 0.0,
            "latency_drift": drift(latency_samples_us), "profiled_drift": drift(profiled_us),
            "latency_samples_us": tuple(latency_samples_us)}


def kernel_results(data: ProfileData, fusion: FusionMap) -> tuple[KernelResult, ...]:
    """Each profiled kernel's stats with the layers the fusion map gives it (``unmapped`` when it has none)."""
    results = []
    known = fusion.profiled_names(k.name for k in data.kernels)
    for samples in data.kernels:
        mapping = fusion.kernels.get(known.get(samples.name, ""))
        layers = mapping.layers if mapping else ()
        category = mapping.category if mapping else "unmapped"
        results.append(KernelResult(samples, summarize(samples.durations_us), layers, category))
    return tuple(results)


def layer_series(kernels: tuple[KernelResult, ...], weights: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Per layer, its time in each measured run (µs): every ``layer`` kernel's duration in that run split
    over the kernel's layers by ``weights`` (equally when those are all 0). Layers no kernel covers are absent."""
    runs = len(kernels[0].samples.durations_us) if kernels else 0
    per_layer: dict[str, np.ndarray] = {}
    for kernel in kernels:
        if kernel.category != "layer" or not kernel.layers:
            continue
        series = np.asarray(kernel.samples.durations_us, dtype=np.float64)
        for layer_id, share in zip(kernel.layers, _shares(kernel.layers, weights), strict=True):
            per_layer[layer_id] = per_layer.get(layer_id, np.zeros(runs)) + series * share
    return per_layer


def layer_results(graph: Graph, kernels: tuple[KernelResult, ...],
                  weights: Mapping[str, float]) -> dict[str, LayerResult]:
    """Every layer's time: the statistics of its :func:`layer_series`, with the kernels that cover it, the one
    that gave it the most time first."""
    per_layer = layer_series(kernels, weights)
    covering: dict[str, list[KernelResult]] = {}
    for kernel in kernels:
        if kernel.category == "layer":
            for layer_id in kernel.layers:
                covering.setdefault(layer_id, []).append(kernel)
    contribution: dict[tuple[str, str], float] = {}  # (kernel, layer) -> its median share of the kernel
    for kernel in kernels:
        if kernel.category == "layer" and kernel.layers:
            for layer_id, share in zip(kernel.layers, _shares(kernel.layers, weights), strict=True):
                contribution[kernel.samples.name, layer_id] = kernel.stats.median_us * share
    results: dict[str, LayerResult] = {}
    for node in graph.layers:
        # the kernel the layer's time (mostly) came from first: it is what reports name
        ks = sorted(covering.get(node.id, []), key=lambda k: -contribution.get((k.samples.name, node.id), 0.0))
        if not ks:  # no kernel does its work: the runtime folded or removed it
            results[node.id] = LayerResult(node.id, None, (), (), False, "eliminated")
            continue
        group = tuple(dict.fromkeys(lid for k in ks for lid in k.layers))
        results[node.id] = LayerResult(
            layer_id=node.id, stats=summarize(per_layer[node.id]),
            kernels=tuple(k.samples.name for k in ks), fused_group=group if len(group) > 1 else (),
            split=len(group) > 1, status="fused" if len(group) > 1 else "measured")
    return results


def _shares(layers: tuple[str, ...], weights: Mapping[str, float]) -> list[float]:
    """Each layer's share of a kernel: its weight over the group's, equal when all weights are 0."""
    values = [max(0.0, float(weights.get(lid, 0.0))) for lid in layers]
    total = sum(values)
    if total <= 0:
        return [1.0 / len(layers)] * len(layers)
    return [v / total for v in values]


def attribution_violations(kernels: tuple[KernelResult, ...], layers: Mapping[str, LayerResult], *,
                           rel_tol: float = 1e-6, abs_tol_us: float = 1e-3) -> list[str]:
    """What breaks the attribution invariant in measured results; empty when it holds.

    - the measured times of the layers a kernel is mapped to add up to that kernel's own time: medians
      when no other kernel shares those layers; otherwise, over each group of kernels linked by shared
      layers (the runtime split a layer's work), the layers' means add up to the kernels' means;
    - a layer takes time only from kernels mapped to it: its ``kernels`` (the first is the one reports
      name) are exactly those, and a layer no kernel is mapped to has no time.
    """
    problems: list[str] = []
    layer_kernels = [k for k in kernels if k.category == "layer" and k.layers]
    mapped_to: dict[str, list[KernelResult]] = {}
    for kernel in layer_kernels:
        for layer_id in kernel.layers:
            mapped_to.setdefault(layer_id, []).append(kernel)

    def layer_us(layer_id: str, key: str) -> float:
        result = layers.get(layer_id)
        return float(getattr(result.stats, key)) if result is not None and result.stats is not None else 0.0

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= abs_tol_us + rel_tol * max(abs(a), abs(b))

    seen: set[str] = set()
    for kernel in layer_kernels:
        if kernel.samples.name in seen:
            continue
        group, members, stack = {kernel.samples.name: kernel}, set(kernel.layers), list(kernel.layers)
        while stack:  # the kernels linked to this one by shared layers
            for other in mapped_to[stack.pop()]:
                if other.samples.name not in group:
                    group[other.samples.name] = other
                    stack.extend(lid for lid in other.layers if lid not in members)
                    members.update(other.layers)
        seen.update(group)
        key = "median_us" if len(group) == 1 else "mean_us"
        own = sum(getattr(k.stats, key) for k in group.values())
        got = sum(layer_us(lid, key) for lid in members)
        if not close(own, got):
            problems.append(f"kernel(s) {sorted(group)}: {own:.3f} us ({key}), their layers {sorted(members)} "
                            f"got {got:.3f} us")
    for layer_id, result in layers.items():
        expected = sorted(k.samples.name for k in mapped_to.get(layer_id, []))
        if sorted(result.kernels) != expected:
            problems.append(f"layer {layer_id!r}: kernels {list(result.kernels)}, mapped from {expected}")
        if not expected and result.stats is not None and result.stats.median_us > 0:
            problems.append(f"layer {layer_id!r}: {result.stats.median_us:.3f} us from no kernel")
    return problems


def back_to_back(kernels: Sequence[KernelResult]) -> tuple[TraceEvent, ...]:
    """The kernels one after another in the order given, each lasting its median: the median run of a runtime
    whose profiler gives no timestamps (OpenVINO's counters; a chain of segments run one after another)."""
    events, start = [], 0.0
    for kernel in kernels:
        duration = kernel.stats.median_us
        if duration <= 0:
            continue
        events.append(TraceEvent(kernel.samples.name, 0, start, duration))
        start += duration
    return tuple(events)
