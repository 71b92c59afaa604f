"""The runtime protocol: what every runtime package provides, and the lifecycle pieces they share.

Contract:

- a :class:`Runtime` has a :class:`~layerscope.runtimes.spec.RuntimeSpec` (``spec``: name, title, capabilities,
  options), an :meth:`~Runtime.info` (:class:`BackendInfo`, without building a session; a runtime not installed
  answers version ``""`` and nothing available) and :meth:`~Runtime.open`, which resolves the provider or device
  of :class:`RuntimeOptions` or raises ``BackendUnavailable`` (exit 3) naming those available;
- what :meth:`~Runtime.open` returns (:class:`OpenRuntime`) measures: :meth:`~OpenRuntime.profile` per kernel into
  a :class:`~layerscope.measure.profile.Measurement`; :meth:`~OpenRuntime.bench_session` a
  :class:`BenchSession` for end-to-end timing; :meth:`~OpenRuntime.bisect_runner` a
  :class:`~layerscope.measure.runners.Runner` timing prefix models; :meth:`~OpenRuntime.fused_groups` the compiled
  graph's fused layer groups (``None`` without ``exec-graph-cuts``); :meth:`~OpenRuntime.chosen_precision` the
  precision a runner's compiler chose (``None`` when the runtime reports none); with ``kernel-timing``,
  :meth:`~OpenRuntime.kernel_runner` what times single-kernel models for the predictor (``calibrate --kernels``);
- a runtime with ``kernel-timing`` answers :meth:`~Runtime.runtime_record` for a predictor it timed: the record of
  the same runtime as installed here, and the kernel runner whose grouping of layers into kernels predicts;
- :class:`SyncBenchSession` is the bench lifecycle for any session with ``run(output_names, feeds)``: warm-up,
  timed runs and streams are :func:`layerscope.measure.bench.run_bench`'s, written once; its ``failure`` turns the
  runtime's own errors into layerscope's (ONNX Runtime's:
  :func:`~layerscope.runtimes.onnxruntime.session.failure_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from layerscope.runtimes.spec import RuntimeSpec

if TYPE_CHECKING:
    from layerscope.measure.bench import BenchConfig, BenchResult, FailureFn, ProgressFn
    from layerscope.measure.kernels import KernelRunner
    from layerscope.measure.profile import Measurement, Progress
    from layerscope.measure.runners import Runner, WarmWith
    from layerscope.measure.session import SessionConfig
    from layerscope.model.types import Graph

__all__ = ["BackendInfo", "BenchSession", "BisectTiming", "OpenRuntime", "Runtime", "RuntimeOptions",
           "SyncBenchSession"]


@dataclass(frozen=True)
class BackendInfo:
    """What a runtime is and can do here (``layerscope backends``)."""

    name: str
    version: str
    capabilities: tuple[str, ...]
    providers: tuple[str, ...]
    available_providers: tuple[str, ...]
    opt_levels: tuple[str, ...]


@dataclass(frozen=True)
class RuntimeOptions:
    """The options a command gives a runtime (each runtime reads those its ``spec.options`` names): ``provider``
    (an ONNX Runtime execution provider), ``device``, ``precision``, ``performance_hint`` and ``streams`` (a
    compiling runtime's: OpenVINO); ``fallback``: a runtime that cannot convert some layers runs them on another
    (OpenVINO: on ONNX Runtime's CPU provider) instead of failing."""

    provider: str = "cpu"
    device: str = "CPU"
    precision: str = ""
    performance_hint: str = "LATENCY"
    streams: int = 0
    fallback: bool = True


@dataclass(frozen=True)
class BisectTiming:
    """How a bisect runner times a visit (``layerscope bisect``'s options): ``runs_per_visit`` timed runs (the
    fastest kept) after ``visit_warmup`` untimed ones (``None``: the runtime's default) of what ``warm_with``
    names; ``clock`` ``wall`` or ``cpu``; a timed model recompiled every ``recompile_every`` visits (``None``: the
    runtime's default; 0: never)."""

    runs_per_visit: int = 1
    visit_warmup: int | None = None
    warm_with: WarmWith = "loop"
    clock: Literal["wall", "cpu"] = "wall"
    recompile_every: int | None = None


class BenchSession(Protocol):
    """One compiled model ready for ``layerscope bench``: ``provider`` as the run records it; ``settings``: what
    the runtime chose (device, precision, hint, streams; empty when it reports nothing), completed by
    :meth:`measure`; ``warnings``: lines the command shows the user about how it will measure (a fallback)."""

    provider: str
    settings: dict[str, Any]
    warnings: tuple[str, ...]

    def measure(self, feeds: Mapping[str, np.ndarray], config: BenchConfig,
                progress: ProgressFn | None) -> BenchResult:
        """The bench itself, in the mode the runtime was opened in (latency or throughput)."""

    def measure_latency(self, feeds: Mapping[str, np.ndarray], config: BenchConfig,
                        progress: ProgressFn | None) -> BenchResult:
        """Synchronous timed runs on the same session (stress rounds)."""


@dataclass
class SyncBenchSession:
    """A session with ``run(output_names, feeds)`` timed by :func:`~layerscope.measure.bench.run_bench` (warm-up,
    streams, Ctrl-C: its contract); ``failure``: the runtime's translator of its own errors (``run_bench``'s)."""

    session: Any
    provider: str
    settings: dict[str, Any] = field(default_factory=dict)
    failure: FailureFn | None = None
    warnings: tuple[str, ...] = ()

    def measure(self, feeds: Mapping[str, np.ndarray], config: BenchConfig,
                progress: ProgressFn | None) -> BenchResult:
        return self.measure_latency(feeds, config, progress)

    def measure_latency(self, feeds: Mapping[str, np.ndarray], config: BenchConfig,
                        progress: ProgressFn | None) -> BenchResult:
        from layerscope.measure.bench import run_bench

        return run_bench(self.session, feeds, config, progress, failure=self.failure)


class OpenRuntime(Protocol):
    """A runtime opened with its options: ``provider`` is the resolved provider or device."""

    @property
    def spec(self) -> RuntimeSpec:
        """The runtime's static description."""

    @property
    def provider(self) -> str:
        """The provider or device its sessions use."""

    def version(self) -> str:
        """The runtime's version."""

    def session_config(self, threads: int, opt_level: str) -> SessionConfig:
        """The session settings for ``threads`` and ``opt_level`` (a compiling runtime records ``compiler``)."""

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        """Measure ``graph`` per layer: end-to-end runs, then profiled runs, kernels mapped to layers."""

    def bench_session(self, graph: Graph, config: SessionConfig, streams: int) -> BenchSession:
        """``graph`` compiled for ``bench`` with ``streams`` concurrent streams."""

    def bisect_runner(self, config: SessionConfig, feeds: Mapping[str, np.ndarray], timing: BisectTiming) -> Runner:
        """What times each prefix and suffix model of a bisect."""

    def fused_groups(self, graph: Graph, config: SessionConfig) -> tuple[tuple[str, ...], ...] | None:
        """The source layers each compiled kernel fuses (``None``: the runtime does not say)."""

    def chosen_precision(self, runner: Runner) -> str | None:
        """The precision ``runner``'s compiler chose (``None``: not reported)."""

    def kernel_runner(self) -> KernelRunner:
        """What times single-kernel models for the predictor with these options (``kernel-timing``; a runtime
        without it raises ``InputError``, exit 2)."""


class Runtime(Protocol):
    """A runtime package's entry point (see the module docstring)."""

    spec: RuntimeSpec

    def info(self) -> BackendInfo:
        """Version, capabilities and providers, without building a session."""

    def open(self, options: RuntimeOptions) -> OpenRuntime:
        """This runtime with ``options``; ``BackendUnavailable`` (exit 3) when it or the provider is missing."""

    def runtime_record(self, recorded: Mapping[str, Any]) -> tuple[dict[str, Any] | None, KernelRunner]:
        """For a predictor whose kernels this runtime timed (``recorded``: the predictor's runtime record, keys
        ``runner``, ``version``, ``provider``, ``threads``, ``opt_level`` and the runtime's own options): the
        same keys of this runtime as installed here (``None`` when it is not installed, or when nothing here can
        be compared: a device command), and the kernel runner whose grouping of layers into kernels the
        prediction uses."""
