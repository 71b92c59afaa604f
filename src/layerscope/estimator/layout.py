"""Layout Transposes: the Transposes an NPU that stores feature maps channels-innermost does not run as a data move.

Three kinds:

- a 4-D Transpose that only carries a feature map's channel axis to or from the last position for a normalisation
  over that last axis (timm's ``LayerNorm2d``: NCHW -> NHWC, LayerNorm over C, NHWC -> NCHW);
- a 4-D Transpose to channels-first of a ``Reshape``'s output (``x.reshape(B, H, W, C).permute(0, 3, 1, 2)``);
- a Transpose and the Transposes by its inverse permutation that close the softmax it wraps (ReduceMax, Sub, Exp,
  ReduceSum, Div and Mul/Add in between, at least one reduction, the reductions keeping their axes): the softmax
  runs over the other axis instead, and the pair cancels.

The first kind a profile prices apart (:func:`layout_transposes`, ``Profile.layout_transpose_efficiency``); the other
two (:func:`dropped_transposes`) the NPU roofline leaves out, as the RDK X5 compiler's node lists show: in
``hb_mapper_log_yolo12n.txt`` each area-attention block (ten Transposes as exported: ``export_monkey_patch.py``'s
``AAttn_forward``) keeps five on the BPU, one of its three on the N x N scores, and none after the two ``Reshape`` to
(B, H, W, C) (D-Robotics/rdk_model_zoo@be4f89bd178ffe9b668bd3d431e0499df6b37fb1,
``samples/vision/ultralytics_yolo/source/reference_logs/``). A detection head's output permutes to NHWC
(:func:`output_transposes`) are not on the BPU either (``hb_mapper_log_yolov8n.txt`` lists no Transpose; its hbdk-cc
runs with ``--output-layout NHWC``): the roofline leaves them out where the profile prices the runtime's hand-over of
the outputs as float32 NHWC (``output_bytes_per_s``; ``hrt_model_exec model_info``: ``HB_DNN_TENSOR_TYPE_F32``,
``HB_DNN_LAYOUT_NHWC``), and keeps them priced elsewhere, where they are the only term that grows with the outputs.

An NPU that stores a feature map with its channels innermost (the D-Robotics BPUs' 32C / 8W4C alignment) holds an
NCHW tensor and its NHWC transpose in the same memory order, so its compiler can drop a Transpose of the first kind:
the normalisation reduces over the innermost axis either way. Which layers belong to each kind is a question of the
graph alone, answered here.

A last-axis normalisation (:func:`last_axis_normalisations`) is a ``LayerNormalization`` over the last axis, or the
primitive ops torch exports for ``layer_norm`` below opset 17: ``ReduceMean`` over the last axis (keeping it),
``Sub`` of it from the input, the square (``Pow`` by 2 or ``Mul`` by itself) reduced the same way, ``Add`` eps,
``Sqrt``, ``Div`` of the centred input by it, then optionally ``Mul`` by a constant weight and ``Add`` a constant
bias.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from layerscope.model.types import Graph, Node
from layerscope.targets.rules import consumers

#: A 4-D Transpose's permutation that moves the channel axis last (NCHW -> NHWC), and the one that moves it back.
TO_CHANNELS_LAST = (0, 2, 3, 1)
TO_CHANNELS_FIRST = (0, 3, 1, 2)


@dataclass(frozen=True)
class Normalisation:
    """One normalisation over the last axis: the tensor it normalises, the tensor it yields and its layers' ids."""

    input: str
    output: str
    layers: frozenset[str]


def last_axis_normalisations(graph: Graph) -> tuple[Normalisation, ...]:
    """Every normalisation over the last axis in ``graph`` (see the module docstring), in layer order."""
    readers = consumers(graph)
    producers = {name: node for node in graph.layers for name in node.outputs if name}
    found: list[Normalisation] = []
    for node in graph.layers:
        if node.op_type == "LayerNormalization" and node.inputs and node.outputs and _last_axis(node, graph):
            found.append(Normalisation(node.inputs[0], node.outputs[0], frozenset({node.id})))
        elif node.op_type == "ReduceMean":
            norm = _decomposed(node, graph, readers, producers)
            if norm is not None:
                found.append(norm)
    return tuple(found)


def dropped_transposes(graph: Graph) -> frozenset[str]:
    """The ids of ``graph``'s layout Transposes of the other two kinds (see the module docstring), which the RDK X5
    compiler's node lists show it does not run: by :data:`TO_CHANNELS_FIRST` of a ``Reshape``'s output; a pair around
    a softmax (:func:`softmax_transposes`)."""
    producers = {name: node for node in graph.layers for name in node.outputs if name}
    found: set[str] = set()
    for node in graph.layers:
        if node.op_type != "Transpose" or not node.inputs or not node.outputs or _rank(graph, node.inputs[0]) != 4:
            continue
        perm = tuple(node.attr("perm") or ())
        src = producers.get(node.inputs[0])
        if perm == TO_CHANNELS_FIRST and src is not None and src.op_type == "Reshape":
            found.add(node.id)
    found.update(softmax_transposes(graph))
    return frozenset(found)


def output_transposes(graph: Graph) -> frozenset[str]:
    """The ids of ``graph``'s 4-D Transposes to channels-last (:data:`TO_CHANNELS_LAST`) whose output is a model
    output (the RDK zoos' detection heads, ``permute(0, 2, 3, 1)``): an NPU that stores feature maps
    channels-innermost writes the output in that memory order (hbdk-cc ``--output-layout NHWC``)."""
    outputs = {t.name for t in graph.outputs}
    return frozenset(node.id for node in graph.layers
                     if node.op_type == "Transpose" and node.inputs and node.outputs and node.outputs[0] in outputs
                     and _rank(graph, node.inputs[0]) == 4 and tuple(node.attr("perm") or ()) == TO_CHANNELS_LAST)


def layout_transposes(graph: Graph) -> frozenset[str]:
    """The ids of ``graph``'s layout Transposes of the first kind (see the module docstring), which a profile prices
    apart: a Transpose by :data:`TO_CHANNELS_LAST` whose output only a last-axis normalisation reads, or by
    :data:`TO_CHANNELS_FIRST` of a last-axis normalisation's output."""
    norms = last_axis_normalisations(graph)
    if not norms:
        return frozenset()
    readers = consumers(graph)
    by_input = {n.input: n for n in norms}
    outputs = {n.output for n in norms}
    found: set[str] = set()
    for node in graph.layers:
        if node.op_type != "Transpose" or not node.inputs or not node.outputs:
            continue
        perm = tuple(node.attr("perm") or ())
        if perm == TO_CHANNELS_LAST:
            norm = by_input.get(node.outputs[0])
            if norm is not None and all(r.id in norm.layers for r in readers.get(node.outputs[0], ())):
                found.add(node.id)
        elif perm == TO_CHANNELS_FIRST and node.inputs[0] in outputs:
            found.add(node.id)
    return frozenset(found)


#: The ops of a softmax as the RDK X5 zoo exports and compiles it (``ReduceMax``, ``Sub``, ``Exp``, ``ReduceSum``,
#: ``Div``; a scale ``Mul`` or mask ``Add``): a Transpose and its inverse around only these cancel.
_SOFTMAX_OPS = frozenset({"ReduceMax", "ReduceSum", "Sub", "Exp", "Div", "Mul", "Add"})
_REDUCTIONS = frozenset({"ReduceMax", "ReduceSum"})


def softmax_transposes(graph: Graph) -> frozenset[str]:
    """The ids of each Transpose whose output only softmax ops (:data:`_SOFTMAX_OPS`, at least one reduction, every
    reduction keeping its axes) read, up to Transposes by the inverse permutation that read nothing else of the
    region, with those Transposes: the pair cancels (the softmax runs over the permuted axis instead)."""
    readers = consumers(graph)
    found: set[str] = set()
    for node in graph.layers:
        if node.op_type != "Transpose" or not node.inputs or not node.outputs:
            continue
        perm = tuple(int(p) for p in node.attr("perm") or ())
        if not perm:
            continue
        inverse = tuple(perm.index(i) for i in range(len(perm)))
        closers = _softmax_region(node.outputs[0], inverse, readers)
        if closers:
            found.add(node.id)
            found.update(closers)
    return frozenset(found)


def _softmax_region(start: str, inverse: tuple[int, ...], readers: Mapping[str, tuple[Node, ...]]) -> set[str]:
    """The ids of the Transposes by ``inverse`` that close the softmax region read from ``start``; empty when a
    reader of the region is neither a softmax op nor such a Transpose, or when the region has no reduction."""
    closers: set[str] = set()
    seen: set[str] = set()
    pending = [start]
    reduced = False
    while pending:
        name = pending.pop()
        for reader in readers.get(name, ()):
            if reader.id in seen:
                continue
            seen.add(reader.id)
            if reader.op_type == "Transpose":
                if tuple(int(p) for p in reader.attr("perm") or ()) != inverse:
                    return set()
                closers.add(reader.id)
                continue
            if reader.op_type not in _SOFTMAX_OPS:
                return set()
            if reader.op_type in _REDUCTIONS:
                if not int(reader.attr("keepdims", 1)):
                    return set()
                reduced = True
            pending.extend(o for o in reader.outputs if o)
    return closers if reduced else set()


def _rank(graph: Graph, name: str) -> int | None:
    tensor = graph.tensors.get(name) if name else None
    return len(tensor.shape) if tensor is not None else None


def _last_axis(node: Node, graph: Graph) -> bool:
    """Whether a LayerNormalization normalises its input's last axis only."""
    axis = int(node.attr("axis", -1))
    rank = _rank(graph, node.inputs[0])
    return axis == -1 or (rank is not None and axis == rank - 1)


def _reduces_last_axis(node: Node, graph: Graph) -> bool:
    """Whether a ReduceMean averages its input's last axis only and keeps it (``axes`` an attribute, or a constant
    input from opset 18)."""
    if node.op_type != "ReduceMean" or not int(node.attr("keepdims", 1)):
        return False
    axes = node.attr("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        value = graph.value(node.inputs[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    rank = _rank(graph, node.inputs[0]) if node.inputs else None
    if axes is None or len(axes) != 1:
        return False
    return int(axes[0]) == -1 or (rank is not None and int(axes[0]) == rank - 1)


def _decomposed(mean: Node, graph: Graph, readers: Mapping[str, tuple[Node, ...]],
                producers: Mapping[str, Node]) -> Normalisation | None:
    """The decomposed normalisation whose first ``ReduceMean`` is ``mean``, else ``None``."""
    if not _reduces_last_axis(mean, graph) or not mean.outputs:
        return None
    x, mu = mean.inputs[0], mean.outputs[0]
    subs = [n for n in readers.get(mu, ()) if n.op_type == "Sub" and n.inputs[:2] == (x, mu)]
    if len(subs) != 1:
        return None
    centred = subs[0].outputs[0]
    divs = [n for n in readers.get(centred, ()) if n.op_type == "Div" and n.inputs[0] == centred]
    if len(divs) != 1 or len(divs[0].inputs) < 2:
        return None
    chain = _spread(divs[0].inputs[1], centred, graph, producers)
    if chain is None:
        return None
    layers = {mean.id, subs[0].id, divs[0].id, *chain}
    out = divs[0].outputs[0]
    for op_type in ("Mul", "Add"):  # the affine weight and bias
        nxt = readers.get(out, ())
        if len(nxt) == 1 and nxt[0].op_type == op_type and any(i in graph.constants for i in nxt[0].inputs):
            layers.add(nxt[0].id)
            out = nxt[0].outputs[0]
    return Normalisation(x, out, frozenset(layers))


def _spread(std: str, centred: str, graph: Graph, producers: Mapping[str, Node]) -> list[str] | None:
    """The ids of ``Sqrt(Add(ReduceMean(square of centred), eps))`` producing ``std``, else ``None``."""
    sqrt = producers.get(std)
    if sqrt is None or sqrt.op_type != "Sqrt" or not sqrt.inputs:
        return None
    add = producers.get(sqrt.inputs[0])
    if add is None or add.op_type != "Add":
        return None
    variance = next((p for i in add.inputs if (p := producers.get(i)) is not None and p.op_type == "ReduceMean"),
                    None)
    if variance is None or not _reduces_last_axis(variance, graph):
        return None
    square = producers.get(variance.inputs[0])
    if square is None or not (
            (square.op_type == "Pow" and square.inputs[0] == centred and _is_two(graph, square.inputs[1:]))
            or (square.op_type == "Mul" and square.inputs[:2] == (centred, centred))):
        return None
    return [sqrt.id, add.id, variance.id, square.id]


def _is_two(graph: Graph, names: tuple[str, ...]) -> bool:
    """Whether the exponent (the first of ``names``) is the constant 2."""
    value = graph.value(names[0]) if names and names[0] else None
    return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 2.0
