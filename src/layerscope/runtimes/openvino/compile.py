"""OpenVINO's compilation: devices, compile settings, reading a model (each top-level ``If`` folded), one
synchronous inference, and OpenVINO's failures as layerscope's errors.

Contract (``openvino`` is imported only when a function needs it):

- a device (``CPU``, ``GPU``, ``NPU``, ``AUTO``; case-insensitive) is resolved by :func:`device_name` to OpenVINO's
  name for it, or ``BackendUnavailable`` (exit 3) naming the devices this installation sees (``AUTO`` is there
  whenever one device is);
- :func:`compile_for` compiles a model for ``config.provider`` with :class:`OpenVinoOptions`: inference precision
  (``f32``/``bf16``/``f16``; empty: the device's default, which picks bf16 where the CPU has it), performance hint
  (``LATENCY``/``THROUGHPUT``/``CUMULATIVE_THROUGHPUT``), ``config.threads`` (``INFERENCE_NUM_THREADS``, 0:
  OpenVINO's default) and streams (``NUM_STREAMS``, 0: the hint's default); ``PERF_COUNT`` when profiling;
- a model OpenVINO cannot read or compile is ``ModelError`` (exit 2, :func:`compile_failure`); an inference that
  fails is a :class:`~layerscope.errors.RuntimeFailure` (exit 2, :func:`infer_failure`) naming the seeded inputs;
  both keep OpenVINO's whole reason on one line (:func:`~layerscope.errors.condensed`) and, when the precision
  was bf16 or f16 (this CPU's default where it has bf16), say to retry with ``--precision f32``;
- the precision the compiled model runs at is read back from it (:func:`run_precision`), never assumed from the
  hint;
- a model with top-level ``If`` layers is read with each folded to the branch the run's inputs take
  (:func:`folded_reader`, :func:`~layerscope.model.fold_if.fold_ifs`: OpenVINO's ONNX frontend cannot convert an
  ``If`` whose branches' ranks it cannot infer): exact for those input values only; the inlined nodes keep the
  subgraph layers' ids.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Protocol

import numpy as np

from layerscope.errors import BackendUnavailable, LayerscopeError, ModelError, RuntimeFailure, condensed
from layerscope.measure.session import SessionConfig
from layerscope.model.ml_domain import openvino_ml_failure
from layerscope.model.random_inputs import runtime_failure
from layerscope.model.types import Graph
from layerscope.runtimes.openvino.signal_stack import keeping_signal_stack

__all__ = ["DEVICES", "PERFORMANCE_HINTS", "PRECISIONS", "InferSession", "ModelFile", "OpenVinoOptions",
           "available_devices", "compile_failure", "compile_for", "compiled_settings", "device_name", "folded_reader",
           "infer_failure", "infer_shared", "machine_record", "precision_hint", "run_precision"]

#: Devices OpenVINO may offer (``AUTO`` picks among those present).
DEVICES = ("CPU", "GPU", "NPU", "AUTO")
#: Inference precision hints ("" = the device's default).
PRECISIONS = ("", "f32", "bf16", "f16")
PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")


@dataclass(frozen=True)
class OpenVinoOptions:
    """OpenVINO's compile settings beyond ``SessionConfig``: precision hint ("" = device default),
    performance hint, streams (0 = the hint's default); ``fallback``: ``profile`` runs the layers OpenVINO cannot
    convert on ONNX Runtime (:mod:`~layerscope.runtimes.openvino.fallback`) instead of failing."""

    precision: str = ""
    performance_hint: str = "LATENCY"
    streams: int = 0
    fallback: bool = True


def _require_openvino() -> Any:
    try:
        import openvino
    except ImportError:
        raise BackendUnavailable("openvino is not installed", hint="pip install openvino") from None
    return openvino


def _core() -> Any:
    return _require_openvino().Core()


def available_devices() -> tuple[str, ...]:
    """The devices this OpenVINO sees, ``AUTO`` added when there is any; ``()`` when it is not installed."""
    try:
        import openvino
    except ImportError:
        return ()
    found = tuple(str(d) for d in openvino.Core().available_devices)
    return (*found, "AUTO") if found else ()


def device_name(device: str) -> str:
    """OpenVINO's name for ``device`` (``cpu`` -> ``CPU``; ``GPU`` matches ``GPU.0``); exit 3 naming the
    devices present when this installation does not see it."""
    _require_openvino()
    present = available_devices()
    wanted = device.strip().upper()
    for name in present:
        if name == wanted or name.split(".")[0] == wanted:
            return name
    raise BackendUnavailable(f"OpenVINO device {device!r} is not available here; available: "
                             f"{', '.join(present) or 'none'}")


def machine_record(device: str) -> dict[str, Any]:
    """A measurement's ``machine`` section on OpenVINO ``device``: this host (:func:`~layerscope.runtimes.machine.
    machine_info`), OpenVINO's version, the device and the device's full name (``AUTO`` names no device)."""
    from layerscope.runtimes.machine import machine_info

    openvino = _require_openvino()
    return {**machine_info(), "openvino": openvino.get_version(), "device": device,
            "device_name": str(_core().get_property(device.split(".", maxsplit=1)[0], "FULL_DEVICE_NAME"))
            if device != "AUTO" else "AUTO"}


class ModelFile(Protocol):
    """What :func:`compile_for` reads of a model: its name (for messages) and the path of its file."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...


def compile_for(graph: ModelFile, config: SessionConfig, options: OpenVinoOptions, *, profiling: bool,
                model: Any = None) -> Any:
    """``model`` (default: ``graph.path`` read) compiled for ``config.provider`` with ``options`` (``PERF_COUNT`` when
    ``profiling``); ``ModelError`` (exit 2) when OpenVINO cannot read or compile it."""
    core = _core()
    device = device_name(config.provider)
    properties: dict[str, Any] = {"PERF_COUNT": profiling, "PERFORMANCE_HINT": options.performance_hint}
    if config.threads:
        properties["INFERENCE_NUM_THREADS"] = config.threads
    if options.streams:
        properties["NUM_STREAMS"] = options.streams
    if options.precision:
        properties["INFERENCE_PRECISION_HINT"] = options.precision
    try:
        with keeping_signal_stack():  # OpenVINO's CPU plugin leaves the thread a stack of its own (signal_stack)
            return core.compile_model(model if model is not None else core.read_model(str(graph.path)), device,
                                      properties)
    except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
        precision = options.precision or _device_precision(core, device)
        raise openvino_ml_failure(PurePath(graph.path).name, graph.path, device) or compile_failure(
            graph.name, device, exc, precision) from None


def _device_precision(core: Any, device: str) -> str:
    """The inference precision ``device`` compiles at without a hint (``bf16`` on a CPU with AMX/AVX512-bf16);
    ``""`` when it does not say."""
    try:
        return _type_name(core.get_property(device.split(".", maxsplit=1)[0], "INFERENCE_PRECISION_HINT"))
    except Exception:  # a device without the property (AUTO, some plugins)
        return ""


def run_precision(compiled: Any) -> str:
    """The inference precision ``compiled`` runs at (``f32``, ``bf16``, ``f16``), read from it; ``""`` when it
    does not say."""
    try:
        return _type_name(compiled.get_property("INFERENCE_PRECISION_HINT"))
    except Exception:  # a device without the property
        return ""


def precision_hint(precision: str) -> str | None:
    """What to try when a model fails at ``precision``: f32, when it was a reduced precision (bf16, f16: a
    value out of their range overflows, e.g. in a ``Range`` or a large sum); ``None`` otherwise."""
    if precision not in ("bf16", "f16"):
        return None
    return f"OpenVINO ran it at {precision} (the device's default unless --precision says): retry with --precision f32"


def _reason(error: BaseException | str) -> str:
    """OpenVINO's whole (multi-line) message as one line."""
    text = condensed(str(error))
    return text or (type(error).__name__ if isinstance(error, BaseException) else "no reason given")


def compile_failure(name: str, device: str, error: BaseException | str, precision: str) -> ModelError:
    """The error for OpenVINO failing to compile model ``name`` for ``device`` at ``precision`` (``""``: unknown):
    its whole reason on one line, and :func:`precision_hint`."""
    at = f" at {precision}" if precision else ""
    return ModelError(f"{name}: OpenVINO cannot compile the model for {device}{at}: {_reason(error)}",
                      hint=precision_hint(precision))


def infer_failure(error: BaseException | str, feeds: Mapping[str, np.ndarray], precision: str,
                  what: str = "the model") -> RuntimeFailure:
    """The error for an OpenVINO inference of ``what`` on ``feeds`` failing at ``precision``: its whole reason on
    one line, the seeded inputs named (:func:`~layerscope.model.random_inputs.runtime_failure`), and
    :func:`precision_hint`."""
    return runtime_failure("OpenVINO", _reason(error), feeds, what=f"{what} at {precision}" if precision else what,
                           hint=precision_hint(precision))


class InferSession:
    """A compiled model behind ``run(None, feeds)``, the call :func:`~layerscope.measure.bench.run_bench` times:
    ``requests`` infer requests are created up front; a call takes a free one, runs one synchronous
    ``InferRequest.infer`` and gives it back (so concurrent streams are concurrent requests). More concurrent
    calls than ``requests`` is ``RuntimeError``."""

    def __init__(self, compiled: Any, requests: int = 1) -> None:
        self.compiled = compiled
        self._free = [compiled.create_infer_request() for _ in range(max(1, requests))]

    def run(self, _outputs: object, feeds: Mapping[str, np.ndarray]) -> None:
        """One inference; OpenVINO's failure is :func:`infer_failure` (exit 2)."""
        try:
            request = self._free.pop()  # atomic under the GIL
        except IndexError:
            raise RuntimeError("more concurrent calls than OpenVINO infer requests") from None
        try:
            infer_shared(request, feeds)
        except Exception as exc:
            raise infer_failure(exc, feeds, run_precision(self.compiled)) from exc
        finally:
            self._free.append(request)


def infer_shared(request: Any, inputs: Mapping[Any, np.ndarray]) -> None:
    """One synchronous inference, the call every OpenVINO time of layerscope's is of: the inputs and outputs shared
    with OpenVINO, not copied (its data dispatcher copies only an input it must convert), as ``benchmark_app`` runs
    on tensors it filled once. A copy is the caller's work, not the model's: a cut's tensors copied in and out had
    made a bisect's segments read up to 20% over the performance counters (YOLOv5s-320's last one)."""
    request.infer(inputs, share_inputs=True, share_outputs=True)


def compiled_settings(compiled: Any) -> dict[str, Any]:
    """What the compiler chose: inference precision, performance hint, streams, threads."""
    return {"precision": _type_name(compiled.get_property("INFERENCE_PRECISION_HINT")),
            "performance_hint": str(compiled.get_property("PERFORMANCE_HINT")),
            "num_streams": int(compiled.get_property("NUM_STREAMS")),
            "inference_threads": int(compiled.get_property("INFERENCE_NUM_THREADS"))}


def _feed_dict(compiled: Any, feeds: Mapping[str, np.ndarray]) -> dict[Any, np.ndarray]:
    """Feeds keyed by the compiled model's inputs (matched by any of their names)."""
    out: dict[Any, np.ndarray] = {}
    for port in compiled.inputs:
        name = next((n for n in port.get_names() if n in feeds), None)
        if name is None:
            raise ModelError(f"OpenVINO input {port.get_any_name()!r} has no feed; feeds: {', '.join(feeds)}")
        out[port] = np.require(feeds[name], requirements="C")  # ascontiguousarray makes a scalar 1-D
    return out


def _type_name(value: Any) -> str:
    """``f32`` for OpenVINO's ``Type.f32`` (other values as text)."""
    getter = getattr(value, "get_type_name", None)
    return str(getter()) if callable(getter) else str(value)


@contextlib.contextmanager
def _infer_failures(feeds: Mapping[str, np.ndarray], precision: str, what: str = "the model") -> Iterator[None]:
    """OpenVINO's failures inside the block as :func:`infer_failure`; layerscope's own errors and interrupts pass."""
    try:
        yield
    except LayerscopeError:
        raise
    except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
        raise infer_failure(exc, feeds, precision, what) from exc


def folded_reader(graph: Graph, feeds: Mapping[str, np.ndarray], device: str) -> tuple[Callable[[], Any], str]:
    """What reads the model for ``device`` as OpenVINO takes it (a fresh ``ov.Model`` each call), each top-level
    ``If`` folded to the branch ``feeds`` take (:func:`~layerscope.model.fold_if.fold_ifs`, run once here), and a
    line saying what was folded (``""``: the model has no top-level ``If``, read as it is)."""
    if not any(n.op_type == "If" and not n.parent for n in graph.layers):
        return lambda: _read(graph, device), ""
    import onnx

    from layerscope.model.fold_if import fold_ifs

    try:
        model, folds = fold_ifs(onnx.load(str(graph.path)), feeds)
    except Exception as exc:  # ONNX Runtime failing on the inputs: the plain model, and OpenVINO's own verdict
        return lambda: _read(graph, device), f"If layers not folded ({_reason(exc)})"

    def read() -> Any:
        from pathlib import Path

        from layerscope.tempdirs import scratch

        with scratch("openvino") as folder:
            path = Path(folder) / Path(str(graph.path)).name
            onnx.save(model, str(path))
            try:
                return _core().read_model(str(path))
            except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
                raise openvino_ml_failure(graph.label, graph.path, device) or ModelError(
                    f"{graph.label}: OpenVINO cannot read the model with its If layers folded: {_reason(exc)}"
                ) from None

    taken = ", ".join(f"{f.layer_id} -> {f.branch}" for f in folds[:4]) + (
        f" and {len(folds) - 4} more" if len(folds) > 4 else "")
    return read, (f"{len(folds)} If layer(s) folded to the branch this run's inputs take ({taken}): the measurement "
                  f"holds for these input values only")


def _read(graph: Graph, device: str) -> Any:
    """``graph``'s file as OpenVINO reads it; ``ModelError`` (exit 2) naming the ``ai.onnx.ml`` ops it holds, if any
    (:func:`~layerscope.model.ml_domain.openvino_ml_failure`), else OpenVINO's reason."""
    try:
        return _core().read_model(str(graph.path))
    except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
        raise openvino_ml_failure(graph.label, graph.path, device) or ModelError(
            f"{graph.label}: OpenVINO cannot read the model: {_reason(exc)}") from None
