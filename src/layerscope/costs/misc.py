"""Irregular, control-like ops on the scalar unit: TopK, NonMaxSuppression, NonZero, Range, OneHot,
Unique; and MaxUnpool (a scatter, move unit).

Their work depends on data; the counts below are worst-case or typical-case estimates, each
labelled as an assumption.
"""

from __future__ import annotations

import math

from layerscope.costs._common import (
    CostTable,
    has_input,
    in_elements,
    in_shape,
    layer_cost,
    out_shape,
    per_output_cost,
    scan_cost,
    table,
    tensor_only,
    zero_copy_cost,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

#: One IoU test of NonMaxSuppression with the box areas precomputed: 4 max/min for the
#: intersection corners, 2 subtracts, 2 clamps at 0, 1 multiply (intersection area), 2 adds/subtracts
#: (union), 1 divide, 1 compare with the threshold = 13.
IOU_FLOPS = 13


def _log2_ceil(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def _topk(node: Node, graph: Graph) -> LayerCost:
    """TopK(X, K): a heap of k per row: input elements × ⌈log2 k⌉ compares (assumption); k is
    read from the Values output's extent along ``axis``."""
    axis = int(node.attr("axis", -1))
    values = out_shape(node, graph, 0)
    k = values[axis] if values else 1
    return layer_cost(node, graph, UnitKind.SCALAR, flops=in_elements(node, graph) * _log2_ceil(k),
                      params_from=())


def _nms(node: Node, graph: Graph) -> LayerCost:
    """NonMaxSuppression(boxes (B, N, 4), scores (B, C, N), max_output_boxes_per_class?, iou?, score?).

    Per batch and class: a score threshold (N compares), a sort (N·⌈log2 N⌉ compares), and IoU tests
    of each kept box against the remaining candidates: kept × N tests, kept = min(N,
    max_output_boxes_per_class) when that value is a known constant, else N (worst case, assumption).
    The output shape is data-dependent; the loader gives its static upper bound.
    """
    batches, classes, n = in_shape(node, graph, 1)
    kept = n
    limit = graph.value(node.inputs[2]) if has_input(node, 2) else None
    if limit is not None and limit.size == 1:
        kept = min(n, int(limit.reshape(())))
    per_class = n + n * _log2_ceil(n) + kept * n * IOU_FLOPS
    return layer_cost(node, graph, UnitKind.SCALAR, flops=batches * classes * per_class, params_from=())


@tensor_only
def _unique(node: Node, graph: Graph) -> LayerCost:
    """Unique: a sort, n·⌈log2 n⌉ compares (assumption)."""
    n = in_elements(node, graph)
    return layer_cost(node, graph, UnitKind.SCALAR, flops=n * _log2_ceil(n), params_from=())


@tensor_only
def _max_unpool(node: Node, graph: Graph) -> LayerCost:
    """MaxUnpool(X, I, output_shape?): zero-fill the output and scatter X by its indices; no arithmetic."""
    return layer_cost(node, graph, UnitKind.MOVE, params_from=())


COSTS: CostTable = {
    **table(("TopK",), _topk),
    **table(("NonMaxSuppression",), _nms),
    # NonZero: one compare per input element.
    **table(("NonZero",), scan_cost(1, 0, UnitKind.SCALAR, params_from=())),
    # Range: one add per output element; OneHot: one compare-select per output element.
    **table(("Range", "OneHot"), per_output_cost(1, UnitKind.SCALAR, params_from=())),
    **table(("Unique",), _unique),
    **table(("MaxUnpool",), _max_unpool),
    # Control flow: the work is done by the subgraph's nodes, which the loader makes layers of their own.
    **table(("If", "Loop", "Scan"), zero_copy_cost),
}
