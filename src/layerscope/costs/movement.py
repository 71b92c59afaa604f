"""Data movement (move unit), views (zero_copy) and shape queries.

- move: Transpose, Concat, Split, Slice, Pad, Gather, GatherElements, GatherND, ScatterND,
  ScatterElements, Scatter, Tile, Expand, DepthToSpace, SpaceToDepth, ... : no arithmetic (0 FLOPs,
  their cost is the bytes they move), except a Scatter with a ``reduction``, which does one op per
  update element. A Slice reads only what it keeps (:func:`slice_read_bytes`), not its whole input.
- zero_copy: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference): views, 0 bytes.
- Shape, Size: read only metadata (0 bytes read), write a tiny tensor; scalar unit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from layerscope.costs._common import (
    CostTable,
    attr_str,
    has_input,
    in_elements,
    layer_cost,
    table,
    tensor_only,
    zero_copy_cost,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

MOVE_OPS = (
    "Transpose", "Concat", "Split", "Gather", "GatherElements", "GatherND", "Tile", "Expand",
    "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Compress", "Trilu", "CenterCropPad",
    "ConstantOfShape", "EyeLike", "SplitToSequence", "ConcatFromSequence",
)

ZERO_COPY_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")


@tensor_only
def _move(node: Node, graph: Graph) -> LayerCost:
    """A copy: 0 FLOPs. Constant float inputs (an embedding table read by Gather, a learned token
    concatenated to activations) count as params; integer shapes/indices/axes never do."""
    return layer_cost(node, graph, UnitKind.MOVE)


#: Bytes one memory access brings (a cache line; an NPU's DMA burst is no finer): a Slice with a step along the
#: innermost axis touches every line of the rows it keeps until the step spans a line.
LINE_BYTES = 64


def _slice_steps(node: Node, graph: Graph) -> dict[int, int] | None:
    """The step of each axis ``node`` (a Slice) slices, by axis (negative axes as given), when every operand that
    decides them is known: ``{}`` for unit steps; ``None`` when an axis or a step is computed at run time."""
    if not node.inputs or node.inputs[0] == "":
        return None
    if len(node.inputs) == 1:  # opset 1: attributes, unit steps
        return {}

    def operand(index: int) -> list[int] | None:
        if index >= len(node.inputs) or not node.inputs[index]:
            return []
        value = graph.const_values.get(node.inputs[index])
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]

    starts, axes, steps = operand(1), operand(3), operand(4)
    if starts is None or axes is None or steps is None:
        return None
    axes = axes or list(range(len(starts)))
    steps = steps or [1] * len(axes)
    return dict(zip(axes, steps, strict=False))


def slice_read_bytes(node: Node, graph: Graph) -> int | None:
    """The activation bytes a Slice reads: the elements it keeps, times the cache lines a step along the innermost
    axis wastes (a step of s touches min(s, elements a line holds) elements per element kept); ``None`` when the
    data is a constant or the steps are not known (then the whole input is counted)."""
    data = graph.tensor(node.inputs[0]) if node.inputs else None
    out = graph.tensor(node.outputs[0]) if node.outputs else None
    steps = _slice_steps(node, graph)
    if data is None or out is None or steps is None or node.inputs[0] in graph.constants or not data.shape:
        return None
    rank = len(data.shape)
    inner = max((abs(step) for axis, step in steps.items() if axis % rank == rank - 1), default=1)
    return min(data.nbytes, out.nbytes * min(max(inner, 1), max(1, LINE_BYTES // data.itemsize)))


def _slice(node: Node, graph: Graph) -> LayerCost:
    """Slice(data, starts, ends, axes?, steps?): a copy of the part it keeps (:func:`slice_read_bytes`; it reads
    the steps' values, so it is not :func:`~layerscope.costs._common.tensor_only`)."""
    cost = layer_cost(node, graph, UnitKind.MOVE)
    kept = slice_read_bytes(node, graph)
    return cost if kept is None else replace(cost, bytes_read_act=kept)


@tensor_only
def _pad(node: Node, graph: Graph) -> LayerCost:
    """Pad(data, pads, constant_value?, axes?): a copy; the fill value is a setting, not a param."""
    return layer_cost(node, graph, UnitKind.MOVE, params_from=())


def _scatter(node: Node, graph: Graph) -> LayerCost:
    """ScatterND/ScatterElements/Scatter(data, indices, updates): a copy of data, plus one op per
    update element when ``reduction`` is add/mul/min/max (opset 16+)."""
    reduction = attr_str(node, "reduction", "none")
    flops = in_elements(node, graph, 2) if reduction != "none" and has_input(node, 2) else 0
    return layer_cost(node, graph, UnitKind.MOVE, flops=flops)


@tensor_only
def _shape_query(node: Node, graph: Graph) -> LayerCost:
    """Shape/Size of a tensor whose shape is not static at fold time: metadata only, no data read."""
    return layer_cost(node, graph, UnitKind.SCALAR, reads_data=False, params_from=())


COSTS: CostTable = {
    **table(MOVE_OPS, _move),
    **table(("Slice",), _slice),
    **table(("Pad",), _pad),
    **table(("ScatterND", "ScatterElements", "Scatter"), _scatter),
    **table(ZERO_COPY_OPS, zero_copy_cost),
    **table(("Shape", "Size"), _shape_query),
}
