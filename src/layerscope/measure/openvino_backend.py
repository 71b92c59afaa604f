"""OpenVINO as a measuring backend: a compiling runtime whose compiler reports its own fusion map.

Contract of :class:`OpenVinoBackend` (what :mod:`layerscope.runtimes.openvino` measures with; ``openvino`` is
imported only when a method needs it):

- ``provider`` is an OpenVINO device (``CPU``, ``GPU``, ``NPU``, ``AUTO``; case-insensitive);
  :meth:`~OpenVinoBackend.check_provider` returns OpenVINO's name for it or raises ``BackendUnavailable``
  (exit 3) naming the devices this installation sees (``AUTO`` is there whenever one device is);
- the model is read and compiled for the device with the backend's hints: inference precision
  (``f32``/``bf16``/``f16``; empty: the device's default, which picks bf16 where the CPU has it),
  performance hint (``LATENCY``/``THROUGHPUT``/``CUMULATIVE_THROUGHPUT``), ``config.threads``
  (``INFERENCE_NUM_THREADS``, 0: OpenVINO's default) and streams (``NUM_STREAMS``, 0: the hint's default);
- end-to-end latency: a model compiled without performance counters, ``warmup`` then ``runs`` timed
  ``InferRequest.infer`` calls;
- per executed node: a second compilation with ``PERF_COUNT`` on; after each of ``runs`` profiled runs (after
  ``warmup`` untimed ones) ``InferRequest.profiling_info`` gives every node's real time in that run (nodes
  whose status is not ``EXECUTED`` count 0 µs); a kernel's median, P90 and CV are over those runs, with the
  node's exec type (``jit_avx2_f32``) and its runtime precision from the runtime model;
- the fusion map is the compiler's: the runtime model's (``compiled.get_runtime_model()``) nodes carry
  ``originalLayersNames``, the names of the operations of the model as read (``Core.read_model``); each of
  those is tied to an ONNX node by :func:`source_layers_of_ops` (its name, the ONNX tensor it writes, or the
  layer whose inputs it computes); a node's layers are the source layers of its original names. Executed
  nodes with source layers are ``layer`` kernels; reorders, inputs and outputs are ``layout``; constants
  ``constant``; anything else ``unmapped`` (reported, never dropped). Source layers no executed node covers are
  ``eliminated`` (the compiler removed or folded them); layers sharing one node are ``fused`` and its time is
  split over them by ``weights`` as on ONNX Runtime (:func:`~layerscope.measure.profile.layer_results`);
- ``coverage`` = Σ node medians / median profiled run; ``overhead`` = median profiled / median plain − 1;
- Ctrl-C during the profiled runs keeps the runs done so far (``interrupted``); before the first profiled
  run it raises :class:`~layerscope.measure.profile.PartialProfile` with the end-to-end runs done by then;
- a model OpenVINO cannot read or compile is ``ModelError`` (exit 2, :func:`compile_failure`); an inference that
  fails is a :class:`~layerscope.errors.RuntimeFailure` (exit 2, :func:`infer_failure`) naming the seeded inputs;
  both keep OpenVINO's whole reason on one line (:func:`~layerscope.errors.condensed`) and, when the precision
  was bf16 or f16 (this CPU's default where it has bf16), say to retry with ``--precision f32``;
- the precision the compiled model runs at is read back from it (:func:`run_precision`), never assumed from the
  hint: the measurement records it and the reports print it;
- a model with top-level ``If`` layers is read with each folded to the branch the run's inputs take
  (:func:`~layerscope.model.fold_if.fold_ifs`: OpenVINO's ONNX frontend cannot convert an ``If`` whose branches'
  ranks it cannot infer): exact for those input values only, which the measurement's ``machine`` records under
  ``openvino_folded_if``; the inlined nodes keep the subgraph layers' ids, so their times join those layers.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from layerscope.errors import BackendUnavailable, LayerscopeError, ModelError, RuntimeFailure, condensed
from layerscope.measure.fusion import FusionMap, KernelMapping
from layerscope.measure.memory import OPENVINO_SOURCE, measured_memory
from layerscope.measure.ort_profile import KernelMemory, KernelSamples, TraceEvent
from layerscope.measure.profile import (
    KernelResult,
    Measurement,
    PartialProfile,
    Progress,
    layer_results,
)
from layerscope.measure.session import SessionConfig, machine_info
from layerscope.model.ml_domain import openvino_ml_failure
from layerscope.model.random_inputs import runtime_failure
from layerscope.model.types import Graph
from layerscope.stats import drift, summarize

__all__ = ["DEVICES", "PERFORMANCE_HINTS", "PRECISIONS", "InferSession", "OpenVinoBackend", "OpenVinoOptions",
           "compile_failure", "compile_for", "compiled_settings", "infer_failure", "infer_shared", "precision_hint",
           "run_precision", "source_layers_of_ops"]

#: Devices OpenVINO may offer (``AUTO`` picks among those present).
DEVICES = ("CPU", "GPU", "NPU", "AUTO")
#: Inference precision hints ("" = the device's default).
PRECISIONS = ("", "f32", "bf16", "f16")
PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")
#: Runtime-model layer types that move or hold data without computing a source layer.
_LAYOUT_TYPES = frozenset({"Reorder", "Input", "Output", "Parameter", "Result", "MemoryInput", "MemoryOutput"})
#: The runtime graph's nodes that are a model input.
_INPUT_TYPES = frozenset({"Input", "Parameter"})
_CONSTANT_TYPES = frozenset({"Const", "Constant"})
#: ONNX ops a compiler may drop outright (no work): never given to a neighbour's node by consumption alone.
_NO_WORK_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Shape",
                          "Transpose", "Concat", "Split", "Slice", "Expand", "Cast"})


@dataclass(frozen=True)
class OpenVinoOptions:
    """OpenVINO's compile settings beyond ``SessionConfig``: precision hint ("" = device default),
    performance hint, streams (0 = the hint's default)."""

    precision: str = ""
    performance_hint: str = "LATENCY"
    streams: int = 0


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
        return core.compile_model(model if model is not None else core.read_model(str(graph.path)), device,
                                  properties)
    except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
        precision = options.precision or _device_precision(core, device)
        raise openvino_ml_failure(graph.name, graph.path, device) or compile_failure(graph.name, device, exc,
                                                                                      precision) from None


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


def source_layers_of_ops(graph: Graph, read_model: Any) -> dict[str, str]:
    """Each operation of the model as OpenVINO read it (friendly name) -> the id of the source layer it is part
    of; constants, parameters and operations of folded subgraphs are absent.

    An operation is a layer's when its name is the layer's name or id, when it writes one of the layer's
    output tensors, or when its name is ``<name>/<suffix>`` of such an operation (the ONNX frontend splits a
    Conv with bias into ``n0/WithoutBiases`` and ``n0``). Any other non-constant operation belongs to the
    layer of the first consumer it leads to (frontends decompose one node into a chain ending in the
    operation that writes the node's output)."""
    by_name: dict[str, str] = {}
    for node in graph.layers:
        by_name.setdefault(node.id, node.id)
        if node.name:
            by_name.setdefault(node.name, node.id)
    producer = {t: node.id for node in graph.layers for t in node.outputs if t}
    ops = list(read_model.get_ordered_ops())
    owner: dict[str, str] = {}
    pending = []
    for op in ops:
        kind = op.get_type_name()
        if kind in ("Parameter", "Result", "Constant"):
            continue
        name = op.get_friendly_name()
        layer = by_name.get(name)
        if layer is None:
            layer = next((producer[t] for out in op.outputs() for t in out.get_names() if t in producer), None)
        if layer is None and "/" in name:
            layer = by_name.get(name.split("/", 1)[0])
        if layer is not None:
            owner[name] = layer
        else:
            pending.append(op)
    for op in reversed(pending):  # consumers first: a chain resolves back to front
        name = op.get_friendly_name()
        for out in op.outputs():
            for target in out.get_target_inputs():
                consumer = target.get_node().get_friendly_name()
                if consumer in owner:
                    owner[name] = owner[consumer]
                    break
            if name in owner:
                break
    return owner


@dataclass(frozen=True)
class _ExecNode:
    """One node of the runtime model: type, exec type, precision and the source layers it does."""

    name: str
    layer_type: str
    exec_type: str
    precision: str
    original: tuple[str, ...]
    layers: tuple[str, ...]
    category: str
    #: For a layout node: the source layers whose data it converts (:func:`_served`).
    serves: tuple[str, ...] = ()
    #: Bytes of the node's outputs in the compiled model (static shapes x runtime element size); ``None`` when a
    #: shape is dynamic.
    output_bytes: int | None = None


def _output_bytes(op: Any) -> int | None:
    """The bytes an OpenVINO runtime-model node writes: its outputs' static shapes times their element sizes."""
    total = 0
    for index in range(op.get_output_size()):
        shape = op.get_output_partial_shape(index)
        if not shape.is_static:
            return None
        total += math.prod(int(d) for d in shape.to_shape()) * int(op.get_output_element_type(index).size)
    return total


def _rt(info: Any, key: str) -> str:
    try:
        return str(info[key].astype(str)) if key in info else ""
    except Exception:  # an rt_info entry of another type
        return ""


#: Runtime-model layer types -> the ONNX op types a node of that type may run (for nodes a transformation
#: created without carrying the original names along: OpenVINO's VariadicSplit, RNNSeq, Convert).
_COMPATIBLE_OPS: Mapping[str, frozenset[str]] = {
    "Split": frozenset({"Split", "Slice"}),
    "RNNSeq": frozenset({"LSTM", "GRU", "RNN"}),
    "RNNCell": frozenset({"LSTM", "GRU", "RNN"}),
    "Convert": frozenset({"Cast"}),
    "Transpose": frozenset({"Transpose"}),
    "Gather": frozenset({"Gather"}),
}


#: ONNX op type -> the OpenVINO operation type that computes it, where the names differ (for rule (e) of
#: :func:`runtime_nodes`: the names OpenVINO makes up are ``<OpenVINO type>_<id>``).
_OPENVINO_TYPE: Mapping[str, str] = {
    "Mul": "Multiply", "Sub": "Subtract", "Div": "Divide", "Pow": "Power", "Clip": "Clamp", "Sum": "Add",
    "Conv": "Convolution", "ConvTranspose": "ConvolutionBackpropData", "Gemm": "MatMul", "Slice": "StridedSlice",
    "LeakyRelu": "PRelu", "Neg": "Negative", "Resize": "Interpolate", "Softmax": "SoftMax",
}


def _moved_into(layer: str, op_type: str, *, original: Mapping[str, tuple[str, ...]], owner: Mapping[str, str],
                layers: Mapping[str, set[str]], feeds: Mapping[str, set[str]],
                consumers: Mapping[str, set[str]], depth: int = 4) -> str | None:
    """The node rule (e) of :func:`runtime_nodes` gives ``layer`` to, or ``None``."""
    made_up = f"{_OPENVINO_TYPE.get(op_type, op_type)}_"
    candidates = {name for name, names in original.items() if layers[name] and any(
        n not in owner and n.startswith(made_up) and n[len(made_up):].isdigit() for n in names)}
    if not candidates:
        return None
    seen, frontier = {layer}, [layer]
    for _ in range(depth):  # breadth first, both ways: the nearest holder wins
        frontier = [n for f in frontier for n in feeds.get(f, set()) | consumers.get(f, set()) if n not in seen]
        seen.update(frontier)
        near = sorted(name for name in candidates if layers[name] & set(frontier))
        if near:
            return near[0]
    return None


def runtime_nodes(compiled: Any, graph: Graph, owner: Mapping[str, str]) -> dict[str, _ExecNode]:
    """The compiled model's runtime nodes by name, each tied to its source layers.

    A node's layers are those its ``originalLayersNames`` name (through ``owner``). Transformations rename
    what they fuse (Conv+BatchNormalization becomes ``Multiply_9004`` with ``n1,n2`` but not ``n0``) or create
    nodes without original names (``VariadicSplit_6742``); source layers no name covers are then given, until
    nothing changes, to (a) the nodes with no source layer whose type can run them (:data:`_COMPATIBLE_OPS`) and
    whose neighbours in the runtime model (four steps either way) hold a layer next to them in the source graph
    (four steps, through layers no node holds); or else (b) the one node holding every layer that consumes them
    (or every layer they consume), when that node also holds a name no source layer has, or holds both what they
    read and what reads them (a Sigmoid inside a fused SiLU), or, once nothing else applies, consumes them and
    they are not an op a compiler drops for free (:data:`_NO_WORK_OPS`: a MatMul folded into the
    FullyConnected named after its Add). Last, (c): a node still without a source layer whose type can run a
    layer that a neighbour (two steps) holds takes that layer too (the frontend decomposed an ONNX LSTM into
    Transpose/Gather pieces named after it; the compiler's ``LSTMSequence_4435`` does the work). Then (d): a
    computing node still without one (a ``Convert`` or dequantizing ``Multiply`` the compiler inserted) works
    for the one node it feeds that has source layers (following nodes without layers), and takes its layers.
    Before the relaxed part of (b): (e) a layer still without a node goes to the node that carries a name the
    compiler made up for an operation of its type (``Sigmoid_8276``: OpenVINO names a node it creates
    ``<Type>_<id>``) and holds a layer at most four steps from it in the source graph (a detector head's Sigmoid
    moved ahead of its Reshape and Transpose and fused into the Conv), the nearest such node when several do.
    Layout nodes (reorders, inputs, outputs) and constants keep none; a layout node *serves* the layers of the
    nearest nodes with layers it feeds, else of those feeding it (:func:`_served`)."""
    order = {node.id: i for i, node in enumerate(graph.layers)}
    ops = list(compiled.get_runtime_model().get_ordered_ops())
    infos = {op.get_friendly_name(): op.get_rt_info() for op in ops}
    original = {name: tuple(n for n in _rt(info, "originalLayersNames").split(",") if n)
                for name, info in infos.items()}
    types = {name: _rt(info, "layerType") for name, info in infos.items()}
    layers: dict[str, set[str]] = {name: {owner[n] for n in orig if n in owner} for name, orig in original.items()}
    renamed = {name for name, orig in original.items() if any(n not in owner for n in orig)
               and types[name] not in _LAYOUT_TYPES | _CONSTANT_TYPES}
    consumers_of, producers_of = _runtime_edges(ops)
    neighbours = _runtime_neighbours(ops, consumers_of, producers_of, depth=4)
    producers = {t: node.id for node in graph.layers for t in node.outputs if t}
    consumers: dict[str, set[str]] = {}
    for node in graph.layers:
        for t in node.inputs:
            if t in producers:
                consumers.setdefault(producers[t], set()).add(node.id)
    feeds = {node.id: {producers[t] for t in node.inputs if t in producers} for node in graph.layers}
    for strict in (True, False):  # the relaxed consumer rule only once nothing else applies
        if not strict:  # (e) before it: a layer a transformation moved and renamed into another node
            held_now = {lid for ls in layers.values() for lid in ls}
            for node in graph.layers:
                target = None if node.id in held_now else _moved_into(
                    node.id, node.op_type, original=original, owner=owner, layers=layers, feeds=feeds,
                    consumers=consumers)
                if target is not None:
                    layers[target].add(node.id)
                    held_now.add(node.id)
        changed = True
        while changed:
            changed = False
            holder = {lid: name for name, ls in layers.items() for lid in ls}
            for node in graph.layers:
                if node.id in holder:
                    continue
                target_names = _compatible_nodes(node.id, node.op_type, feeds, consumers, holder=holder,
                                                 layers=layers, types=types, neighbours=neighbours)
                if not target_names:
                    target = _holding_node(node.id, node.op_type, feeds, consumers, holder=holder, renamed=renamed,
                                           strict=strict)
                    target_names = [target] if target is not None else []
                for name in target_names:
                    layers[name].add(node.id)
                    holder.setdefault(node.id, name)
                    changed = True
    op_types = {node.id: node.op_type for node in graph.layers}
    near_nodes = _runtime_neighbours(ops, consumers_of, producers_of, depth=2)
    for name, held in list(layers.items()):  # (c) a decomposed node's pieces hold it, the real kernel does not
        if not held and types[name] in _COMPATIBLE_OPS:
            held.update(lid for other in near_nodes.get(name, ()) for lid in layers[other]
                        if op_types[lid] in _COMPATIBLE_OPS[types[name]])
    for name, held in list(layers.items()):  # (d) a helper the compiler inserted works for the node it feeds
        if not held and types[name] not in _LAYOUT_TYPES | _CONSTANT_TYPES:
            frontier, seen = [name], {name}
            while frontier and not held:
                targets = {c for f in frontier for c in consumers_of.get(f, ())} - seen
                with_layers = [t for t in targets if layers[t]]
                if len(with_layers) == 1:
                    held.update(layers[with_layers[0]])
                seen |= targets
                frontier = [t for t in targets if not layers[t]] if len(seen) < 64 else []
    nodes: dict[str, _ExecNode] = {}
    written = {op.get_friendly_name(): _output_bytes(op) for op in ops}
    for name, info in infos.items():
        layer_type = types[name]
        ids = tuple(sorted(layers[name], key=order.__getitem__))
        serves: tuple[str, ...] = ()
        if ids:
            category = "layer"
        elif layer_type in _LAYOUT_TYPES:
            category = "layout"
            serves = tuple(sorted(_served(name, layers, types, consumers_of, producers_of), key=order.__getitem__))
        elif layer_type in _CONSTANT_TYPES:
            category = "constant"
        else:
            category = "unmapped"
        nodes[name] = _ExecNode(name, layer_type, _rt(info, "primitiveType"), _rt(info, "runtimePrecision"),
                                original[name], ids, category, serves, written[name])
    return nodes


def _served(name: str, layers: Mapping[str, set[str]], types: Mapping[str, str],
            consumers_of: Mapping[str, set[str]], producers_of: Mapping[str, set[str]]) -> set[str]:
    """The source layers layout node ``name`` converts data for: those of the nearest runtime nodes with layers that
    it feeds (through other layout nodes: a Reorder out of a Convolution's blocked layout for the Reshape after it),
    else of the nearest ones feeding it (a conversion into the model's output); none when neither side reaches one,
    and none for the conversion of a model input (the caller's tensor taken into the runtime: a differential
    segment does not hold it -- SqueezeNet's input Reorder, 220-250 µs in the counters, is in no prefix's increment)."""
    if any(types.get(n) in _INPUT_TYPES for n in producers_of.get(name, ())):
        return set()
    for step in (consumers_of, producers_of):
        frontier, seen = {name}, {name}
        while frontier:
            reached = {n for f in frontier for n in step.get(f, ())} - seen
            seen |= reached
            found = {lid for n in reached for lid in layers.get(n, ())}
            if found:
                return found
            frontier = {n for n in reached if types.get(n) in _LAYOUT_TYPES}
    return set()


def _holding_node(layer: str, op_type: str, feeds: Mapping[str, set[str]], consumers: Mapping[str, set[str]], *,
                  holder: Mapping[str, str], renamed: set[str], strict: bool) -> str | None:
    """Rule (b) of :func:`runtime_nodes`: the node that holds ``layer``'s consumers (or feeds), or ``None``."""
    before, after = feeds[layer], consumers.get(layer, set())
    inside = {holder.get(lid) for lid in before | after}
    for side in (after, before):
        nodes_of = {holder.get(lid) for lid in side}
        target = next(iter(nodes_of)) if len(nodes_of) == 1 else None
        if not side or target is None:
            continue
        if target in renamed or (len(inside) == 1 and before and after):
            return target
        if not strict and side is after and op_type not in _NO_WORK_OPS:
            return target
    return None


def _compatible_nodes(layer: str, op_type: str, feeds: Mapping[str, set[str]], consumers: Mapping[str, set[str]], *,
                      holder: Mapping[str, str], layers: Mapping[str, set[str]], types: Mapping[str, str],
                      neighbours: Mapping[str, set[str]]) -> list[str]:
    """Rule (a) of :func:`runtime_nodes`: nodes with no source layer that can run ``layer`` next to it."""
    near: set[str] = set()
    frontier = {layer}
    for _ in range(4):  # source neighbours, through layers no node holds yet (dropped reshapes)
        frontier = {n for f in frontier for n in feeds[f] | consumers.get(f, set())} - near - {layer}
        near |= frontier
        frontier = {n for n in frontier if n not in holder}
    return [name for name, held in layers.items()
            if not held and op_type in _COMPATIBLE_OPS.get(types[name], ())
            and any(lid in near for other in neighbours.get(name, ()) for lid in layers[other])]


def _runtime_edges(ops: Sequence[Any]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Each runtime node -> the nodes that read its outputs, and each -> the nodes whose outputs it reads."""
    consumers: dict[str, set[str]] = {}
    producers: dict[str, set[str]] = {}
    for op in ops:
        name = op.get_friendly_name()
        for port in op.inputs():
            source = port.get_source_output().get_node().get_friendly_name()
            consumers.setdefault(source, set()).add(name)
            producers.setdefault(name, set()).add(source)
    return consumers, producers


def _runtime_neighbours(ops: Sequence[Any], consumers: Mapping[str, set[str]], producers: Mapping[str, set[str]],
                        depth: int) -> dict[str, set[str]]:
    """Each runtime node -> the nodes within ``depth`` edges of it, either direction (``consumers`` and ``producers``:
    :func:`_runtime_edges`)."""
    adjacent = {name: consumers.get(name, set()) | producers.get(name, set())
                for name in (op.get_friendly_name() for op in ops)}
    reach: dict[str, set[str]] = {}
    for name in adjacent:
        seen, frontier = {name}, {name}
        for _ in range(depth):
            frontier = {n for f in frontier for n in adjacent.get(f, ())} - seen
            seen |= frontier
        reach[name] = seen - {name}
    return reach


class OpenVinoBackend:
    """OpenVINO through its Python API: ``profiling_info`` for node times, the runtime model's
    ``originalLayersNames`` for the fusion map. See the module docstring."""

    name = "openvino"

    def __init__(self, options: OpenVinoOptions | None = None) -> None:
        self.options = options or OpenVinoOptions()

    def check_provider(self, provider: str) -> str:
        return device_name(provider)

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        openvino = _require_openvino()
        device = self.check_provider(config.provider)
        read_model, folded = folded_reader(graph, feeds, device)
        plain = compile_for(graph, config, self.options, profiling=False, model=read_model())
        request = plain.create_infer_request()
        inputs = _feed_dict(plain, feeds)
        with _infer_failures(feeds, run_precision(plain)):
            latency_samples, interrupted = _timed(request, inputs, warmup, runs, phases=("warmup", "latency"),
                                                 progress=progress)
        del request, plain
        if not latency_samples:
            raise KeyboardInterrupt

        def partial() -> PartialProfile:
            return PartialProfile(latency_samples, config=config, warmup=warmup, planned_runs=runs)

        if interrupted:
            raise partial()
        try:
            read = read_model()
            compiled = compile_for(graph, config, self.options, profiling=True, model=read)
            request = compiled.create_infer_request()
            inputs = _feed_dict(compiled, feeds)
            per_run: list[dict[str, float]] = []
            with _infer_failures(feeds, run_precision(compiled)):
                run_us, interrupted = _timed(request, inputs, warmup, runs, phases=("warmup-profiled", "profiled"),
                                             progress=progress, after=lambda: per_run.append(_counters(request)))
        except KeyboardInterrupt:
            raise partial() from None
        if not run_us:
            raise partial()
        owner = source_layers_of_ops(graph, read)
        nodes = runtime_nodes(compiled, graph, owner)
        precision = run_precision(compiled)
        kernels = _kernel_results(nodes, per_run, device)
        fusion = _fusion_map(graph, nodes, kernels)
        layers = layer_results(graph, kernels, weights or {})
        latency, instrumented = summarize(latency_samples), summarize(run_us)
        kernel_total = sum(k.stats.median_us for k in kernels)
        machine = {**machine_info(), "openvino": openvino.get_version(), "device": device,
                   "device_name": str(_core().get_property(device.split(".")[0], "FULL_DEVICE_NAME"))
                   if device != "AUTO" else "AUTO",
                   **({"openvino_folded_if": folded} if folded else {})}
        return Measurement(
            config=config, backend_version=openvino.get_version(), provider=device, runs=len(run_us),
            warmup=warmup, latency=latency, instrumented=instrumented, kernels=kernels, layers=layers,
            fusion=fusion, coverage=kernel_total / instrumented.median_us if instrumented.median_us else 0.0,
            overhead=instrumented.median_us / latency.median_us - 1.0 if latency.median_us else 0.0,
            machine=machine, median_run=_median_run(kernels, nodes), interrupted=interrupted,
            latency_drift=drift(latency_samples), profiled_drift=drift(run_us),
            latency_samples_us=tuple(latency_samples), backend=self.name, device=device, precision=precision,
            memory=measured_memory(graph, kernels, OPENVINO_SOURCE),
            performance_hint=str(compiled.get_property("PERFORMANCE_HINT")),
            streams=int(compiled.get_property("NUM_STREAMS")), latency_source="uninstrumented InferRequest.infer")


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
                raise openvino_ml_failure(graph.name, graph.path, device) or ModelError(
                    f"{graph.name}: OpenVINO cannot read the model with its If layers folded: {_reason(exc)}"
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
        raise openvino_ml_failure(graph.name, graph.path, device) or ModelError(
            f"{graph.name}: OpenVINO cannot read the model: {_reason(exc)}") from None


def _timed(request: Any, inputs: Mapping[Any, np.ndarray], warmup: int, runs: int, *, phases: tuple[str, str],
           progress: Progress | None, after: Any = None) -> tuple[list[float], bool]:
    """``warmup`` untimed then ``runs`` timed ``infer`` calls (µs); on Ctrl-C in the timed ones, those done and
    ``True`` (Ctrl-C in the warm-up propagates)."""
    for i in range(warmup):
        infer_shared(request, inputs)
        if progress:
            progress(phases[0], i + 1, warmup)
    samples: list[float] = []
    try:
        for i in range(runs):
            start = time.perf_counter()
            infer_shared(request, inputs)
            samples.append((time.perf_counter() - start) * 1e6)
            if after is not None:
                after()
            if progress:
                progress(phases[1], i + 1, runs)
    except KeyboardInterrupt:
        return samples, True
    return samples, False


def _counters(request: Any) -> dict[str, float]:
    """The last inference's real time per executed node (µs)."""
    times: dict[str, float] = {}
    for info in request.profiling_info:
        if info.status.name == "EXECUTED":
            times[info.node_name] = times.get(info.node_name, 0.0) + info.real_time.total_seconds() * 1e6
    return times


def _kernel_results(nodes: Mapping[str, _ExecNode], per_run: Sequence[Mapping[str, float]],
                    device: str) -> tuple[KernelResult, ...]:
    """One kernel per node that executed in any profiled run, in runtime-model order."""
    executed = {name for run in per_run for name in run}
    results = []
    for name, node in nodes.items():
        if name not in executed:
            continue
        series = tuple(run.get(name, 0.0) for run in per_run)
        samples = KernelSamples(name, node.layer_type, device, series, exec_type=node.exec_type,
                                precision=node.precision,
                                memory=None if node.output_bytes is None else KernelMemory(node.output_bytes))
        results.append(KernelResult(samples, summarize(series), node.layers, node.category, node.serves))
    for name in sorted(executed - set(nodes)):  # counters for a node the runtime model lacks: keep, unmapped
        series = tuple(run.get(name, 0.0) for run in per_run)
        results.append(KernelResult(KernelSamples(name, "", device, series), summarize(series), (), "unmapped"))
    return tuple(results)


def _fusion_map(graph: Graph, nodes: Mapping[str, _ExecNode], executed: Sequence[KernelResult]) -> FusionMap:
    """Every runtime node's layers; eliminated: the source layers no *executed* node covers (a reshape done in
    place, a node the compiler kept but never runs, a layer folded away)."""
    kernels = {n.name: KernelMapping(n.name, n.layer_type, "", n.layers, n.category) for n in nodes.values()}
    covered = {lid for k in executed if k.category == "layer" for lid in k.layers}
    return FusionMap(kernels, tuple(node.id for node in graph.layers if node.id not in covered))


def _median_run(kernels: Sequence[KernelResult], nodes: Mapping[str, _ExecNode]) -> tuple[TraceEvent, ...]:
    """The executed nodes back to back in execution order, each lasting its median (the counters have no
    timestamps; OpenVINO's CPU plugin runs one node after another within a stream)."""
    events, start = [], 0.0
    for kernel in kernels:
        duration = kernel.stats.median_us
        if duration <= 0:
            continue
        events.append(TraceEvent(kernel.samples.name, 0, start, duration))
        start += duration
    return tuple(events)


def async_bench(compiled: Any, feeds: Mapping[str, np.ndarray], config: Any, requests: int = 0,
                progress: Any = None) -> Any:
    """OpenVINO's throughput mode: an ``AsyncInferQueue`` of ``requests`` infer requests (0: the compiled
    model's ``OPTIMAL_NUMBER_OF_INFER_REQUESTS``) kept busy; ``config`` is a
    :class:`~layerscope.measure.bench.BenchConfig` (``warmup_runs`` per request, then ``runs`` in all or
    ``duration_s``). One sample per run: ``perf_counter_ns`` when ``start_async`` hands it to an idle request
    to its completion callback; the inputs shared, not copied (:func:`infer_shared`). Throughput = runs / wall time
    from the first start to the last completion. The result is a :class:`~layerscope.measure.bench.BenchResult`
    with one stream (the queue); Ctrl-C stops handing out runs and keeps those completed (``interrupted``)."""
    from layerscope.measure.bench import BenchResult, ProcessUsage, StreamResult, available_cores, peak_rss_bytes
    from layerscope.measure.cputime import CpuClock

    openvino = _require_openvino()
    jobs = requests or int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    queue = openvino.AsyncInferQueue(compiled, jobs)
    done: list[tuple[int, int]] = []
    queue.set_callback(lambda _request, started: done.append((started, time.perf_counter_ns())))
    inputs = dict(feeds)
    with _infer_failures(feeds, run_precision(compiled)):
        for i in range(config.warmup_runs * jobs):
            queue.start_async(inputs, time.perf_counter_ns(), share_inputs=True)
            if progress:
                progress("warmup", float(i + 1), float(config.warmup_runs * jobs))
        queue.wait_all()
    done.clear()
    clock = CpuClock()
    interrupted, started = False, 0
    deadline = time.perf_counter() + config.duration_s if config.duration_s is not None else None
    try:
        while (started < config.runs) if deadline is None else (time.perf_counter() < deadline):
            queue.start_async(inputs, time.perf_counter_ns(), share_inputs=True)
            started += 1
            if progress:
                progress("measure", float(started), float(config.runs or 0))
    except KeyboardInterrupt:
        interrupted = True
    with _infer_failures(feeds, run_precision(compiled)):
        queue.wait_all()
    span = clock.stop()
    if not done:
        raise KeyboardInterrupt
    samples_us = np.asarray([end - start for start, end in done], dtype=np.float64) / 1e3
    wall_s = (max(end for _, end in done) - min(start for start, _ in done)) / 1e9
    latency = summarize(samples_us)
    usage = ProcessUsage(cpu_time_s=span.cpu_s, wall_s=span.wall_s, cores=available_cores(),
                         peak_rss_bytes=peak_rss_bytes())
    return BenchResult(config=config, latency=latency, streams=(StreamResult(0, len(done), wall_s, latency),),
                       wall_s=wall_s, usage=usage, interrupted=interrupted)
