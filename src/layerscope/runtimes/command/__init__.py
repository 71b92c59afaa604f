"""A device command timed as a black box (``bisect --run-cmd``, the device command of ``calibrate --kernels`` and
``sweep``): a shell command per model, its latency read from what it prints
(:class:`~layerscope.measure.runners.CommandRunner`). It measures nothing in this process: no kernel profile, no
bench, no ``--backend`` choice; bisect times each prefix with it and keeps the prefix models beside the cache;
``calibrate --kernels`` times each kernel model with it (:func:`kernel_runner`), the layers grouped into kernels
as ONNX Runtime groups them (its compiler's grouping is not visible here), and so are a predictor's predictions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from layerscope.errors import InputError
from layerscope.runtimes.spec import RuntimeSpec

if TYPE_CHECKING:
    from layerscope.measure.kernels import KernelRunner
    from layerscope.measure.runners import CommandRunner
    from layerscope.runtimes.base import BackendInfo, OpenRuntime, Runtime, RuntimeOptions

SPEC = RuntimeSpec(name="command", title="a device command",
                   capabilities=frozenset({"device-command", "model-files", "kernel-timing"}),
                   options=("run_cmd", "compile_cmd", "latency_regex", "latency_json", "latency_unit", "timeout_s"))


class DeviceCommand:
    """The device command as a registry entry: what it is; it is opened with :func:`device_runner`."""

    spec = SPEC

    def info(self) -> BackendInfo:
        from layerscope.runtimes.base import BackendInfo

        return BackendInfo(SPEC.name, "", (), (), (), ())

    def open(self, options: RuntimeOptions) -> OpenRuntime:
        raise InputError("a device command times whole models only: give it with --run-cmd, not --backend")

    def runtime_record(self, recorded: Mapping[str, Any]) -> tuple[dict[str, Any] | None, KernelRunner]:
        """Nothing here to compare with a device; the kernels grouped as ONNX Runtime groups them."""
        from layerscope.runtimes.onnxruntime.kernels import OrtKernels

        return None, OrtKernels()


def create() -> Runtime:
    """The device command's registry entry."""
    return DeviceCommand()


def device_runner(run_cmd: str, compile_cmd: str | None = None, *, latency_regex: str | None = None,
                  latency_json: str | None = None, latency_unit: str = "ms",
                  timeout_s: float | None = None) -> CommandRunner:
    """The runner of ``run_cmd`` (and ``compile_cmd`` once per model), the latency read with ``latency_regex`` or
    ``latency_json`` in ``latency_unit``; a bad template or reader is an ``InputError`` (exit 2)."""
    from layerscope.measure.runners import CommandRunner, CommandTemplate, LatencyReader

    reader = LatencyReader.create(latency_regex, latency_json, latency_unit or "ms")
    return CommandRunner(CommandTemplate.parse(run_cmd, "--run-cmd"), reader,
                         compile=CommandTemplate.parse(compile_cmd, "--compile-cmd") if compile_cmd else None,
                         timeout_s=timeout_s)


def kernel_runner(command: CommandRunner) -> KernelRunner:
    """What times ``calibrate --kernels``' kernel models with ``command`` (:func:`device_runner`'s)."""
    from layerscope.measure.kernels import CommandKernels
    from layerscope.runtimes.onnxruntime.kernels import OrtKernels

    return CommandKernels(command, OrtKernels(), name=SPEC.name)
