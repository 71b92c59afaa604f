"""What a runtime's profiler recorded, in the form every runtime's trace reader gives it: each kernel's duration in
each measured run (µs), the sizes it reports for a kernel (bytes), the kernel executions of one run.

Readers: :mod:`layerscope.runtimes.onnxruntime.trace` (ONNX Runtime's Chrome-trace JSON) and
:mod:`layerscope.runtimes.openvino.profile` (OpenVINO's per-node performance counts). Consumers:
:mod:`layerscope.measure.profile` (kernel and layer results) and :mod:`layerscope.measure.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KernelMemory", "KernelSamples", "ProfileData", "TraceEvent"]


@dataclass(frozen=True)
class KernelSamples:
    """One kernel's duration in each measured run (µs), with what the profiler says of it."""

    name: str
    op_type: str
    provider: str
    durations_us: tuple[float, ...]
    #: What a compiling runtime says of the kernel (OpenVINO: ``jit_avx2_f32``, ``f32``); "" when it does not.
    exec_type: str = ""
    precision: str = ""
    #: The sizes the profiler reports for the kernel; ``None`` when it reports none.
    memory: KernelMemory | None = None


@dataclass(frozen=True)
class KernelMemory:
    """Sizes (bytes) a runtime's profiler reports for one kernel, the largest over the measured runs; a size the
    profiler did not report is ``None``. ``in_use_bytes``: the CPU arena's bytes in use after the kernel ran."""

    output_bytes: int | None = None
    activation_bytes: int | None = None
    parameter_bytes: int | None = None
    in_use_bytes: int | None = None


@dataclass(frozen=True)
class TraceEvent:
    """One kernel execution of one run, relative to the run's start: for timelines."""

    name: str
    thread: int
    start_us: float
    duration_us: float


@dataclass(frozen=True)
class ProfileData:
    """What one profiled session recorded over its measured runs."""

    run_durations_us: tuple[float, ...]
    kernels: tuple[KernelSamples, ...]
    median_run: tuple[TraceEvent, ...]
