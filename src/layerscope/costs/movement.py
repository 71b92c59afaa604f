"""Data movement (move unit), views (zero_copy) and shape queries.

- move: Transpose, Concat, Split, Slice, Pad, Gather, GatherElements, GatherND, ScatterND,
  ScatterElements, Scatter, Tile, Expand, DepthToSpace, SpaceToDepth, ... : no arithmetic (0 FLOPs,
  their cost is the bytes they move), except a Scatter with a ``reduction``, which does one op per
  update element.
- zero_copy: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference): views, 0 bytes.
- Shape, Size: read only metadata (0 bytes read), write a tiny tensor; scalar unit.
"""

from __future__ import annotations

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
    "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Tile", "Expand",
    "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Compress", "Trilu", "CenterCropPad",
    "ConstantOfShape", "EyeLike", "SplitToSequence", "ConcatFromSequence",
)

ZERO_COPY_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")


@tensor_only
def _move(node: Node, graph: Graph) -> LayerCost:
    """A copy: 0 FLOPs. Constant float inputs (an embedding table read by Gather, a learned token
    concatenated to activations) count as params; integer shapes/indices/axes never do."""
    return layer_cost(node, graph, UnitKind.MOVE)


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
    **table(("Pad",), _pad),
    **table(("ScatterND", "ScatterElements", "Scatter"), _scatter),
    **table(ZERO_COPY_OPS, zero_copy_cost),
    **table(("Shape", "Size"), _shape_query),
}
