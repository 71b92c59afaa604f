"""ONNX Runtime behind the runtime protocol (:mod:`layerscope.runtimes.base`).

Contract: ``open`` resolves ``--provider`` (a short name or a full execution provider name) or raises
``BackendUnavailable`` (exit 3) naming those in the installed build; profile is
:func:`~layerscope.runtimes.onnxruntime.profile.profile_model`; bench times ``session.run`` on one session shared by
the streams; the bisect runner is :class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` (by default 1 untimed
run per visit, one session per model for the whole bisect); it reports no precision and no fused groups before
profiling. Its kernels for the predictor are its optimized graph's nodes
(:class:`~layerscope.runtimes.onnxruntime.kernels.OrtKernels`), grouped as its CPU provider runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerscope.errors import BackendUnavailable
from layerscope.measure.kernels import KernelRunner
from layerscope.measure.profile import Measurement, Progress
from layerscope.measure.runners import Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.base import BackendInfo, BenchSession, BisectTiming, RuntimeOptions, SyncBenchSession
from layerscope.runtimes.onnxruntime import SPEC
from layerscope.runtimes.onnxruntime.kernels import OrtKernels
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.runtimes.onnxruntime.runner import OrtRunner
from layerscope.runtimes.onnxruntime.session import OPT_LEVELS, PROVIDERS, failure_of, make_session, ort_provider

#: The capabilities ``layerscope backends`` lists, in its order.
LISTED = ("kernel-profile", "optimized-graph", "uninstrumented-timing", "intra-op-threads", "inter-op-threads",
          "opt-levels")


class OnnxRuntime:
    """ONNX Runtime through its Python API (see the module docstring)."""

    spec = SPEC

    def info(self) -> BackendInfo:
        try:
            import onnxruntime as ort
        except ImportError:
            return BackendInfo(SPEC.name, "", LISTED, tuple(PROVIDERS), (), OPT_LEVELS)
        available = set(ort.get_available_providers())
        has_layout = hasattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT")
        return BackendInfo(SPEC.name, ort.__version__, LISTED, tuple(PROVIDERS),
                           tuple(k for k, v in PROVIDERS.items() if v in available),
                           tuple(level for level in OPT_LEVELS if level != "layout" or has_layout))

    def open(self, options: RuntimeOptions) -> OpenOnnxRuntime:
        _require_onnxruntime()
        ort_provider(options.provider)  # exit 3 naming the available ones
        return OpenOnnxRuntime(options.provider)

    def runtime_record(self, recorded: Mapping[str, Any]) -> tuple[dict[str, Any] | None, KernelRunner]:
        try:
            import onnxruntime as ort
        except ImportError:
            return None, OrtKernels(SPEC.name)
        # the kernels are grouped, and so predicted, as ONNX Runtime's CPU provider runs them
        return ({"runner": SPEC.name, "version": ort.__version__, "provider": SessionConfig().provider,
                 "threads": int(recorded.get("threads", 1) or 1), "opt_level": str(recorded.get("opt_level", "all"))},
                OrtKernels(SPEC.name))


@dataclass(frozen=True)
class OpenOnnxRuntime:
    """ONNX Runtime on ``provider`` (as given: ``cpu`` or a full name)."""

    provider: str
    spec = SPEC

    def version(self) -> str:
        import onnxruntime as ort

        return str(ort.__version__)

    def session_config(self, threads: int, opt_level: str) -> SessionConfig:
        return SessionConfig(provider=self.provider, threads=threads, opt_level=opt_level)

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        ort_provider(config.provider)
        return profile_model(graph, feeds, config, runs=runs, warmup=warmup, weights=weights, progress=progress)

    def bench_session(self, graph: Graph, config: SessionConfig, streams: int) -> BenchSession:
        return SyncBenchSession(make_session(graph.path, config), ort_provider(config.provider), failure=failure_of)

    def bisect_runner(self, config: SessionConfig, feeds: Mapping[str, np.ndarray], timing: BisectTiming) -> Runner:
        return OrtRunner(config, feeds, runs_per_visit=timing.runs_per_visit,
                         visit_warmup=SPEC.visit_warmup if timing.visit_warmup is None else timing.visit_warmup,
                         warm_with=timing.warm_with, clock=timing.clock,
                         recompile_every=SPEC.recompile_every if timing.recompile_every is None
                         else timing.recompile_every)

    def fused_groups(self, graph: Graph, config: SessionConfig) -> tuple[tuple[str, ...], ...] | None:
        return None

    def chosen_precision(self, runner: Runner) -> str | None:
        return None

    def kernel_runner(self) -> KernelRunner:
        return OrtKernels(SPEC.name)


def _require_onnxruntime() -> None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise BackendUnavailable("onnxruntime is not installed", hint="pip install onnxruntime") from None
