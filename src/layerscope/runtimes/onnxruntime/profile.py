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
from typing import Any

import numpy as np
import onnx

from layerscope.measure.fusion import FusionMap, build_fusion_map
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
    run_times,
)
from layerscope.measure.session import SessionConfig
from layerscope.measure.subgraphs import exclusive_events, with_subgraph_kernels
from layerscope.model.types import Graph
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime.session import make_session, run_checked
from layerscope.runtimes.onnxruntime.trace import load_events, parse_profile
from layerscope.tempdirs import scratch

__all__ = ["profile_model", "read_profiled_session"]


def profile_model(graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int = 50,
                  warmup: int = 10, weights: Mapping[str, float] | None = None,
                  progress: Progress | None = None) -> Measurement:
    """Measure ``graph`` (loaded from ``graph.path``) on ONNX Runtime. See the module docstring."""
    import onnxruntime as ort

    def plain(timer: RunTimer) -> tuple[list[float], bool]:
        return timer(partial(run_checked, make_session(graph.path, config), feeds))

    def profiled(timer: RunTimer) -> ProfiledRuns[tuple[ProfileData, FusionMap, str]]:
        with scratch("profile") as tmp:
            optimized_path = str(Path(tmp) / "optimized.onnx")
            session = make_session(graph.path, config, profile_prefix=str(Path(tmp) / "ort"),
                                   optimized_model_path=optimized_path)
            done, interrupted = timer(partial(run_checked, session, feeds))
            data, fusion = read_profiled_session(session, optimized_path, graph, warmup)
            provider = session.get_providers()[0]
        return ProfiledRuns((data, fusion, provider), bool(done) and bool(data.run_durations_us), interrupted)

    latency_samples, result = profile_runs(plain, profiled, config=config, runs=runs, warmup=warmup, progress=progress)
    (data, fusion, provider), interrupted = result.data, result.interrupted
    kernels = kernel_results(data, fusion)
    layers = layer_results(graph, kernels, weights or {})
    return Measurement(
        config=config, backend_version=ort.__version__, provider=provider, warmup=warmup, kernels=kernels,
        layers=layers, fusion=fusion, machine=machine_info(), median_run=data.median_run, interrupted=interrupted,
        memory=measured_memory(graph, kernels), **run_times(latency_samples, data.run_durations_us, kernels))


def read_profiled_session(session: Any, optimized_path: str, graph: Graph,
                          warmup: int) -> tuple[ProfileData, FusionMap]:
    """What a session opened with its profiler on recorded (its trace ended and read, the first ``warmup`` runs
    dropped, a control-flow layer's time exclusive of its subgraphs') and the fusion map of ``graph``'s layers
    through the optimized graph ONNX Runtime saved at ``optimized_path``."""
    profile_file = session.end_profiling()
    optimized = onnx.load(optimized_path, load_external_data=False)
    data = parse_profile(exclusive_events(load_events(profile_file), optimized), skip_runs=warmup)
    return data, with_subgraph_kernels(build_fusion_map(graph, optimized), graph, optimized)
