"""Measure every layer of a model on ONNX Runtime: kernels, the fusion map, per-layer times.

Contract of :func:`profile_model`:
- end-to-end latency comes from an uninstrumented session (warm-up, then ``runs`` timed ``run`` calls);
- per-kernel times come from a second session with ONNX Runtime's profiler on, same settings, same inputs;
  its warm-up runs are dropped from the profile;
- each kernel's time is split over the source layers it covers in proportion to ``weights`` (the layers'
  estimated latency), equally when those are all zero; the split is per run, so per-layer percentiles
  are percentiles of per-run sums;
- ``memory``: the sizes the profiler reports per kernel, given to layers, and their peak
  (:func:`~layerscope.measure.memory.measured_memory`);
- ``coverage`` = Σ kernel medians / median instrumented run; ``overhead`` = median instrumented run /
  median uninstrumented run − 1;
- an interrupt (Ctrl-C, SIGTERM, SIGHUP) during the profiled runs keeps the runs done so far and sets
  ``interrupted``; one before the first profiled run completes (during the end-to-end runs, the profiled
  warm-up or the profiled session's creation) raises :class:`PartialProfile` with the end-to-end runs done by
  then; one during the first warm-up, when nothing was measured, propagates as it came;
- ONNX Runtime failing to run the model on ``feeds`` is a :class:`~layerscope.errors.RuntimeFailure` (exit 2)
  naming the seeded inputs (:func:`~layerscope.runtimes.onnxruntime.session.run_checked`);
- the lifecycle (warm-up, timed runs, progress, interrupts) is :func:`~layerscope.measure.profile.profile_runs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np
import onnx

from layerscope.measure.fusion import build_fusion_map
from layerscope.measure.kernel_trace import ProfileData
from layerscope.measure.memory import measured_memory
from layerscope.measure.profile import (
    Measurement,
    ProfiledRuns,
    Progress,
    RunTimer,
    kernel_results,
    layer_results,
    profile_runs,
)
from layerscope.measure.session import SessionConfig
from layerscope.measure.subgraphs import exclusive_events, with_subgraph_kernels
from layerscope.model.types import Graph
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime.session import make_session, run_checked
from layerscope.runtimes.onnxruntime.trace import load_events, parse_profile
from layerscope.stats import drift, summarize
from layerscope.tempdirs import scratch

__all__ = ["profile_model"]


def profile_model(graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int = 50,
                  warmup: int = 10, weights: Mapping[str, float] | None = None,
                  progress: Progress | None = None) -> Measurement:
    """Measure ``graph`` (loaded from ``graph.path``) on ONNX Runtime. See the module docstring."""
    import onnxruntime as ort

    def plain(timer: RunTimer) -> tuple[list[float], bool]:
        return timer(partial(run_checked, make_session(graph.path, config), feeds))

    def profiled(timer: RunTimer) -> ProfiledRuns[tuple[ProfileData, onnx.ModelProto, str]]:
        with scratch("profile") as tmp:
            optimized_path = str(Path(tmp) / "optimized.onnx")
            session = make_session(graph.path, config, profile_prefix=str(Path(tmp) / "ort"),
                                   optimized_model_path=optimized_path)
            done, interrupted = timer(partial(run_checked, session, feeds))
            profile_file = session.end_profiling()
            optimized = onnx.load(optimized_path, load_external_data=False)
            data = parse_profile(exclusive_events(load_events(profile_file), optimized), skip_runs=warmup)
            provider = session.get_providers()[0]
        return ProfiledRuns((data, optimized, provider), bool(done) and bool(data.run_durations_us), interrupted)

    latency_samples, result = profile_runs(plain, profiled, config=config, runs=runs, warmup=warmup, progress=progress)
    (data, optimized, provider), interrupted = result.data, result.interrupted
    fusion = with_subgraph_kernels(build_fusion_map(graph, optimized), graph, optimized)
    kernels = kernel_results(data, fusion)
    layers = layer_results(graph, kernels, weights or {})
    latency = summarize(latency_samples)
    instrumented = summarize(data.run_durations_us)
    kernel_total = sum(k.stats.median_us for k in kernels)
    return Measurement(
        config=config, backend_version=ort.__version__, provider=provider, runs=len(data.run_durations_us),
        warmup=warmup, latency=latency, instrumented=instrumented, kernels=kernels, layers=layers,
        fusion=fusion, coverage=kernel_total / instrumented.median_us if instrumented.median_us else 0.0,
        overhead=instrumented.median_us / latency.median_us - 1.0 if latency.median_us else 0.0,
        machine=machine_info(), median_run=data.median_run, interrupted=interrupted,
        latency_drift=drift(latency_samples), profiled_drift=drift(data.run_durations_us),
        latency_samples_us=tuple(latency_samples), memory=measured_memory(graph, kernels))
