"""Sequence and optional values: SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase, SequenceLength,
SequenceEmpty, SequenceMap; Optional, OptionalGetElement, OptionalHasElement.

Sources: the ONNX operator specs (onnx/docs/Operators.md, Sequence*-11, SequenceMap-17, Optional-15/18).
A sequence or an optional is a container of tensors with no shape of its own in the graph, so only the tensors a
node names can be counted: the cost is the movement of the tensors it copies, no arithmetic, on the move unit.

- SequenceConstruct copies each input tensor into the new sequence: reads them, writes as many bytes;
- SequenceInsert(S, tensor, position?) copies ``tensor`` in (the elements already in S are shared or copied
  depending on the runtime; their sizes are not in the graph: not counted);
- SequenceAt(S, position) copies the element out: reads and writes the output's bytes;
- SequenceErase(S, position?) and SequenceEmpty move no tensor the graph sizes: 0 bytes;
- SequenceLength reads only the sequence's length (scalar unit, metadata);
- SequenceMap is control flow: when its body's nodes are layers of their own (as for Loop) it costs nothing
  itself; when they are not (ONNX Runtime runs it as its function body, whose nodes the loader does not observe),
  its work is unknown: the bytes-only ``known=False`` cost, never a free layer;
- Optional(x) and OptionalGetElement(x) wrap or unwrap a tensor: views (a runtime passes the buffer on);
  OptionalHasElement reads only whether there is one (scalar unit, metadata).
"""

from __future__ import annotations

from dataclasses import replace

from layerscope.costs._common import (
    CostTable,
    has_input,
    layer_cost,
    table,
    tensor_of,
    tensor_only,
    unknown_cost,
    zero_copy_cost,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node


def _copied_in(node: Node, graph: Graph, positions: tuple[int, ...] | None) -> LayerCost:
    """A move that writes a copy of the tensor inputs at ``positions`` (``None``: all) into a sequence: the
    written bytes are theirs (the sequence output has no shape); each tensor is read once."""
    cost = layer_cost(node, graph, UnitKind.MOVE, params_from=())
    indices = range(len(node.inputs)) if positions is None else positions
    names = dict.fromkeys(node.inputs[i] for i in indices if has_input(node, i) and graph.tensor(node.inputs[i]))
    written = sum(tensor_of(graph, name, node).nbytes for name in names)
    return replace(cost, bytes_written=cost.bytes_written + written)


@tensor_only
def _sequence_construct(node: Node, graph: Graph) -> LayerCost:
    """SequenceConstruct(inputs...): reads every input, writes a copy of each."""
    return _copied_in(node, graph, None)


@tensor_only
def _sequence_insert(node: Node, graph: Graph) -> LayerCost:
    """SequenceInsert(S, tensor, position?): reads and writes ``tensor``; the position is a setting."""
    return _copied_in(node, graph, (1,))


@tensor_only
def _sequence_at(node: Node, graph: Graph) -> LayerCost:
    """SequenceAt(S, position) -> tensor: the element's copy, read and written (the output's bytes)."""
    cost = layer_cost(node, graph, UnitKind.MOVE, params_from=())
    return replace(cost, bytes_read_act=cost.bytes_read_act + cost.bytes_written)


@tensor_only
def _sequence_erase(node: Node, graph: Graph) -> LayerCost:
    """SequenceErase(S, position?): drops an element; no tensor the graph sizes moves (the position is read)."""
    return layer_cost(node, graph, UnitKind.MOVE, params_from=())


@tensor_only
def _metadata(node: Node, graph: Graph) -> LayerCost:
    """SequenceLength, OptionalHasElement: read a container's metadata, write a scalar."""
    return layer_cost(node, graph, UnitKind.SCALAR, reads_data=False, params_from=())


def _sequence_map(node: Node, graph: Graph) -> LayerCost:
    """SequenceMap: a view when layers of its body (``parent`` = its id) carry the work, else unknown."""
    if any(layer.parent == node.id for layer in graph.layers):
        return zero_copy_cost(node, graph)
    return unknown_cost(node, graph)


COSTS: CostTable = {
    **table(("SequenceConstruct",), _sequence_construct),
    **table(("SequenceInsert",), _sequence_insert),
    **table(("SequenceAt",), _sequence_at),
    **table(("SequenceErase",), _sequence_erase),
    **table(("SequenceLength", "OptionalHasElement"), _metadata),
    **table(("SequenceMap",), _sequence_map),
    **table(("SequenceEmpty", "Optional", "OptionalGetElement"), zero_copy_cost),
}
