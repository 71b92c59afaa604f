"""OpenVINO's compiled runtime model read back: which source layers each runtime node does (the compiler's own
fusion map).

Contract: the runtime model's (``compiled.get_runtime_model()``) nodes carry ``originalLayersNames``, the names of
the operations of the model as read (``Core.read_model``); each of those is tied to an ONNX node by
:func:`source_layers_of_ops` (its name, the ONNX tensor it writes, or the layer whose inputs it computes); a node's
layers (:func:`runtime_nodes`) are the source layers of its original names. Nodes with source layers are ``layer``
nodes; reorders, inputs and outputs are ``layout``; constants ``constant``; anything else ``unmapped``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.model.types import Graph

__all__ = ["ExecNode", "runtime_nodes", "source_layers_of_ops"]

#: Runtime-model layer types that move or hold data without computing a source layer.
_LAYOUT_TYPES = frozenset({"Reorder", "Input", "Output", "Parameter", "Result", "MemoryInput", "MemoryOutput"})
#: The runtime graph's nodes that are a model input.
_INPUT_TYPES = frozenset({"Input", "Parameter"})
_CONSTANT_TYPES = frozenset({"Const", "Constant"})
#: ONNX ops a compiler may drop outright (no work): never given to a neighbour's node by consumption alone.
_NO_WORK_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Shape",
                          "Transpose", "Concat", "Split", "Slice", "Expand", "Cast"})


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
class ExecNode:
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


def runtime_nodes(compiled: Any, graph: Graph, owner: Mapping[str, str]) -> dict[str, ExecNode]:
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
    nodes: dict[str, ExecNode] = {}
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
        nodes[name] = ExecNode(name, layer_type, _rt(info, "primitiveType"), _rt(info, "runtimePrecision"),
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
