"""OpenVINO behind the runtime protocol (:mod:`layerscope.runtimes.base`).

Contract: ``open`` resolves ``--device`` or raises ``BackendUnavailable`` (exit 3) naming the devices present;
profile is :meth:`~layerscope.runtimes.openvino.profile.OpenVinoBackend.profile`; bench compiles once and times
synchronous infer requests, one per stream, or with a performance hint other than ``LATENCY`` an
``AsyncInferQueue`` (:func:`~layerscope.runtimes.openvino.bench.async_bench`), and records what the compiler
chose; the bisect runner is :class:`~layerscope.runtimes.openvino.runner.OpenVinoRunner` (by default 4 untimed runs
per visit, each model compiled afresh every 20 visits); fused groups come from the compiled execution graph. Its
kernels for the predictor are the compiled runtime model's nodes
(:class:`~layerscope.runtimes.openvino.kernels.OpenVinoKernels`), each kernel model compiled for the device with the
options it was opened with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layerscope.errors import ModelError
from layerscope.measure.bench import BenchConfig, BenchResult, ProgressFn, run_bench
from layerscope.measure.kernels import KernelRunner
from layerscope.measure.profile import Measurement, Progress
from layerscope.measure.runners import Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.base import BackendInfo, BenchSession, BisectTiming, RuntimeOptions
from layerscope.runtimes.openvino import SPEC
from layerscope.runtimes.openvino.bench import async_bench
from layerscope.runtimes.openvino.compile import (
    DEVICES,
    InferSession,
    OpenVinoOptions,
    available_devices,
    compile_for,
    compiled_settings,
    device_name,
)
from layerscope.runtimes.openvino.kernels import OpenVinoKernels
from layerscope.runtimes.openvino.profile import OpenVinoBackend
from layerscope.runtimes.openvino.runner import OpenVinoRunner, fused_groups

#: The capabilities ``layerscope backends`` lists, in its order.
LISTED = ("kernel-profile", "optimized-graph", "uninstrumented-timing", "intra-op-threads")


class OpenVino:
    """OpenVINO through its Python API (see the module docstring)."""

    spec = SPEC

    def info(self) -> BackendInfo:
        try:
            import openvino
        except ImportError:
            return BackendInfo(SPEC.name, "", LISTED, DEVICES, (), ())
        return BackendInfo(SPEC.name, openvino.get_version(), LISTED, DEVICES, available_devices(), ())

    def open(self, options: RuntimeOptions) -> OpenOpenVino:
        backend = OpenVinoBackend(OpenVinoOptions(precision=options.precision.lower(),
                                                  performance_hint=options.performance_hint.upper(),
                                                  streams=int(options.streams), fallback=options.fallback))
        return OpenOpenVino(backend, backend.check_provider(options.device))

    def runtime_record(self, recorded: Mapping[str, Any]) -> tuple[dict[str, Any] | None, KernelRunner]:
        try:
            import openvino
        except ImportError:
            return None, OpenVinoKernels(str(recorded.get("provider", "CPU")))
        device = device_name(str(recorded.get("provider", "CPU")))
        options = OpenVinoOptions(str(recorded.get("precision", "")), str(recorded.get("performance_hint", "LATENCY")),
                                  int(recorded.get("streams", 0) or 0))
        return ({"runner": SPEC.name, "version": openvino.get_version(), "provider": device,
                 "threads": int(recorded.get("threads", 1) or 1), "opt_level": None},
                OpenVinoKernels(device, options))


@dataclass(frozen=True)
class OpenOpenVino:
    """OpenVINO compiling for ``provider`` (a device it sees) with ``backend.options``."""

    backend: OpenVinoBackend
    provider: str
    spec = SPEC

    @property
    def options(self) -> OpenVinoOptions:
        return self.backend.options

    def version(self) -> str:
        return OpenVino().info().version

    def session_config(self, threads: int, opt_level: str) -> SessionConfig:
        return SessionConfig(provider=self.provider, threads=threads, opt_level="compiler")

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        return self.backend.profile(graph, feeds, config, runs=runs, warmup=warmup, weights=weights,
                                    progress=progress)

    def bench_session(self, graph: Graph, config: SessionConfig, streams: int) -> BenchSession:
        try:
            compiled = compile_for(graph, config, self.options, profiling=False)
        except ModelError as error:
            from layerscope.runtimes.openvino.fallback import bench_with_fallback, fallback_after

            return bench_with_fallback(graph, config, self.options, fallback_after(error, graph, self.options),
                                       streams)
        return _OpenVinoBench(compiled, InferSession(compiled, streams), streams, self.provider,
                              {"device": self.provider, **compiled_settings(compiled)})

    def bisect_runner(self, config: SessionConfig, feeds: Mapping[str, np.ndarray], timing: BisectTiming) -> Runner:
        return OpenVinoRunner(config, self.options, feeds, runs_per_visit=timing.runs_per_visit,
                              visit_warmup=SPEC.visit_warmup if timing.visit_warmup is None else timing.visit_warmup,
                              warm_with=timing.warm_with, clock=timing.clock,
                              recompile_every=SPEC.recompile_every if timing.recompile_every is None
                              else timing.recompile_every)

    def fused_groups(self, graph: Graph, config: SessionConfig) -> tuple[tuple[str, ...], ...] | None:
        return fused_groups(graph, config, self.options)

    def chosen_precision(self, runner: Runner) -> str | None:
        if isinstance(runner, OpenVinoRunner) and runner.settings:
            return str(runner.settings["precision"])
        return None

    def kernel_runner(self) -> KernelRunner:
        return OpenVinoKernels(self.provider, self.options)


@dataclass
class _OpenVinoBench:
    """A compiled model for ``bench``: synchronous requests under the ``LATENCY`` hint, else an
    ``AsyncInferQueue`` of ``streams`` requests (1: the compiled model's optimum)."""

    compiled: Any
    session: InferSession
    streams: int
    provider: str
    settings: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def measure(self, feeds: Mapping[str, np.ndarray], config: BenchConfig,
                progress: ProgressFn | None) -> BenchResult:
        if str(self.compiled.get_property("PERFORMANCE_HINT")) == "LATENCY":
            return self.measure_latency(feeds, config, progress)
        optimal = int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        jobs = self.streams if self.streams > 1 else optimal
        result: BenchResult = async_bench(self.compiled, feeds, config, jobs, progress)
        self.settings.update(mode="throughput: AsyncInferQueue", async_requests=jobs)
        return result

    def measure_latency(self, feeds: Mapping[str, np.ndarray], config: BenchConfig,
                        progress: ProgressFn | None) -> BenchResult:
        return run_bench(self.session, feeds, config, progress)
