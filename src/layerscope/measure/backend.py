"""Measuring backends: the runtimes layerscope measures per layer with, behind one protocol.

Contract:

- a :class:`Backend` has a ``name`` and an :meth:`~Backend.info` (:class:`BackendInfo`: runtime version,
  ``capabilities`` from :data:`CAPABILITIES`, the execution providers it knows and those available here);
  :meth:`~Backend.check_provider` returns the runtime's name for a provider or raises ``BackendUnavailable``
  (exit 3) naming the available ones; :meth:`~Backend.profile` measures a model per layer and returns a
  :class:`~layerscope.measure.profile.Measurement` (contract in :mod:`layerscope.measure.profile`);
- :func:`get_backend` resolves a name from :data:`BACKENDS` (unknown: ``InputError``, exit 2); a backend whose
  runtime is not installed still answers :meth:`~Backend.info` (version ``""``, nothing available) and raises
  ``BackendUnavailable`` from the other methods;
- :class:`~layerscope.measure.openvino_backend.OpenVinoBackend` (``openvino``) is the second implementation:
  its providers are OpenVINO devices (``CPU``, ``GPU``, ``NPU``, ``AUTO``);
- devices that only time whole models are not backends: ``layerscope bisect --run-cmd`` measures them by
  differential profiling (:mod:`layerscope.measure.differential`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from layerscope.errors import BackendUnavailable, InputError
from layerscope.measure.profile import Measurement, Progress, profile_model
from layerscope.measure.session import OPT_LEVELS, PROVIDERS, SessionConfig, ort_provider
from layerscope.model.types import Graph

__all__ = ["BACKENDS", "CAPABILITIES", "Backend", "BackendInfo", "OnnxRuntimeBackend", "get_backend"]

#: What a backend can do for layerscope -> what that means for the user.
CAPABILITIES: Mapping[str, str] = {
    "kernel-profile": "times every runtime kernel in every run (per-layer latency)",
    "optimized-graph": "writes the graph it runs, so fused kernels map back to source layers",
    "uninstrumented-timing": "times whole runs without the profiler (end-to-end percentiles)",
    "intra-op-threads": "sets the threads one kernel may use",
    "inter-op-threads": "sets the threads independent kernels may run on",
    "opt-levels": "sets the graph optimization level",
}


@dataclass(frozen=True)
class BackendInfo:
    """What a backend is and can do here."""

    name: str
    version: str
    capabilities: tuple[str, ...]
    providers: tuple[str, ...]
    available_providers: tuple[str, ...]
    opt_levels: tuple[str, ...]


class Backend(Protocol):
    """A runtime that measures every layer (see the module docstring)."""

    name: str

    def info(self) -> BackendInfo:
        """Version, capabilities and providers, without building a session."""

    def check_provider(self, provider: str) -> str:
        """The runtime's name for ``provider``; ``BackendUnavailable`` (exit 3) when it is not available here."""

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        """Measure ``graph`` per layer: end-to-end runs, then profiled runs, kernels mapped to layers."""


class OnnxRuntimeBackend:
    """ONNX Runtime through its Python API: the profiler for kernels, ``optimized_model_filepath`` for the
    fusion map, CPU and whichever other providers the installed build has."""

    name = "onnxruntime"

    def info(self) -> BackendInfo:
        try:
            import onnxruntime as ort
        except ImportError:
            return BackendInfo(self.name, "", tuple(CAPABILITIES), tuple(PROVIDERS), (), OPT_LEVELS)
        available = set(ort.get_available_providers())
        has_layout = hasattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT")
        return BackendInfo(self.name, ort.__version__, tuple(CAPABILITIES), tuple(PROVIDERS),
                           tuple(k for k, v in PROVIDERS.items() if v in available),
                           tuple(level for level in OPT_LEVELS if level != "layout" or has_layout))

    def check_provider(self, provider: str) -> str:
        _require_onnxruntime()
        return ort_provider(provider)

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        self.check_provider(config.provider)
        return profile_model(graph, feeds, config, runs=runs, warmup=warmup, weights=weights, progress=progress)


def _require_onnxruntime() -> None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise BackendUnavailable("onnxruntime is not installed", hint="pip install onnxruntime") from None


def _openvino() -> Backend:
    from layerscope.measure.openvino_backend import OpenVinoBackend  # imports openvino only when used

    return OpenVinoBackend()


#: Backend name -> factory.
BACKENDS: Mapping[str, Callable[[], Backend]] = {"onnxruntime": OnnxRuntimeBackend, "openvino": _openvino}


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (:data:`BACKENDS`); ``InputError`` (exit 2) naming the known ones."""
    factory = BACKENDS.get(name.lower())
    if factory is None:
        raise InputError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    return factory()
