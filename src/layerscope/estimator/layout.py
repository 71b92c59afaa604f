"""Layout Transposes: the 4-D Transposes that only carry a feature map's channel axis to or from the last position
for a normalisation over that last axis (timm's ``LayerNorm2d``: NCHW -> NHWC, LayerNorm over C, NHWC -> NCHW).

An NPU that stores a feature map with its channels innermost (the D-Robotics BPUs' 32C / 8W4C alignment) holds an
NCHW tensor and its NHWC transpose in the same memory order, so its compiler can drop such a Transpose: the
normalisation reduces over the innermost axis either way. A profile prices this class apart from other Transposes
(``Profile.layout_transpose_efficiency``); which layers belong to it is a question of the graph alone, answered
here.

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


def layout_transposes(graph: Graph) -> frozenset[str]:
    """The ids of ``graph``'s layout Transposes: a Transpose by :data:`TO_CHANNELS_LAST` whose output only a last-axis
    normalisation reads, or by :data:`TO_CHANNELS_FIRST` of a last-axis normalisation's output."""
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
