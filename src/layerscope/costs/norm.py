"""Normalizations and softmax: BatchNormalization, LayerNormalization (+ com.microsoft Skip/Simplified
variants and EmbedLayerNormalization), InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
LRN, LpNormalization, Softmax, LogSoftmax, Hardmax.

All run on the vector unit. Constants are FLOPs per element (see :mod:`layerscope.costs.elementwise`
for the counting convention); per-row/per-group terms (a sqrt, a divide) are ignored unless noted:
they are a vanishing share of the per-element work.
"""

from __future__ import annotations

from dataclasses import replace

from layerscope.costs._common import (
    MS,
    CostFn,
    CostTable,
    has_input,
    layer_cost,
    out_elements,
    per_output_cost,
    table,
    tensor_of,
    tensor_only,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

#: BatchNormalization at inference: the statistics fold into a per-channel scale and shift,
#: y = x·a + b: mul + add = 2.
BATCHNORM = 2
#: Mean-and-variance normalization with a learned scale and shift: mean (add) + subtract + square
#: + variance (add) + multiply by 1/std + scale + shift = 7, the decomposition of onnx-tool's
#: LayerNormalization (3 MUL + 4 ADD per element); per-row: 2 divides + add eps + sqrt.
MEAN_VAR_AFFINE = 7
#: Without the affine scale/shift (MeanVarianceNormalization): 5.
MEAN_VAR = 5
#: RMS normalization (SimplifiedLayerNormalization): square + add + multiply by 1/rms + scale = 4.
RMS_AFFINE = 4
#: Softmax, numerically stable: max (compare) + subtract + exp + sum (add) + divide = 5.
SOFTMAX = 5
#: LogSoftmax: max + subtract + exp + sum, then subtract log(sum) = 5 (+ a log per row).
LOG_SOFTMAX = 5
#: Hardmax: an argmax scan (compare) + writing 0/1 (select) = 2 (assumption).
HARDMAX = 2
#: LpNormalization: |x|^p (p=2: mul) + sum (add) + divide by the norm = 3 (+ a sqrt per row).
LP_NORM = 3


def lrn_flopsper_output_cost(size: int) -> int:
    """LRN y = x / (bias + α/size · Σ_window x²)^β: size squares + (size-1) adds + scale + add
    bias + pow + divide = 2·size + 3 (onnx-tool's LRN also grows with ``size``)."""
    return 2 * size + 3


def _lrn(node: Node, graph: Graph) -> LayerCost:
    per_element = lrn_flopsper_output_cost(int(node.attr("size", 1)))
    return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element)


def _skip_layer_norm(per_element: int) -> CostFn:
    """com.microsoft Skip(Simplified)LayerNormalization(input, skip, gamma, beta?, bias?):
    input + skip (+ bias), then the normalization."""
    @tensor_only
    def cost(node: Node, graph: Graph) -> LayerCost:
        adds = 1 + (1 if has_input(node, 4) else 0)
        flops = out_elements(node, graph) * (adds + per_element)
        return layer_cost(node, graph, UnitKind.VECTOR, flops=flops)

    return cost


#: EmbedLayerNormalization's embedding tables: word, position, segment (input positions).
_EMBEDDING_TABLES = (2, 3, 4)


def _embed_layer_norm(node: Node, graph: Graph) -> LayerCost:
    """com.microsoft EmbedLayerNormalization(input_ids (B, S), segment_ids?, word_embedding, position_embedding,
    segment_embedding?, gamma, beta, mask?, position_ids?) -> output (B, S, H), mask_index, embedding_sum?
    (ONNX Runtime ContribOperators.md).

    Per output element: the sum of one row of each table (2 tables: 1 add, 3: 2 adds) + :data:`MEAN_VAR_AFFINE`.
    A constant table is read only at its gathered rows: B·S·H elements at most (as Gather's table, see
    :func:`layerscope.costs.constant_elements_read`); all its elements are params, as are gamma and beta.
    """
    outputs = out_elements(node, graph)
    tables = [i for i in _EMBEDDING_TABLES if has_input(node, i)]
    cost = layer_cost(node, graph, UnitKind.VECTOR, flops=outputs * (len(tables) - 1 + MEAN_VAR_AFFINE),
                      params_from=(*tables, 5, 6))
    unread = 0
    for name in dict.fromkeys(node.inputs[i] for i in tables):
        if graph.is_constant(name):
            info = tensor_of(graph, name, node)
            unread += (info.elements - min(info.elements, outputs)) * info.itemsize
    return replace(cost, bytes_read_weight=cost.bytes_read_weight - unread)


COSTS: CostTable = {
    **table(("BatchNormalization",), per_output_cost(BATCHNORM)),
    # GroupNormalization: statistics per group instead of per row; the same per-element work.
    **table(("LayerNormalization", "InstanceNormalization", "GroupNormalization"),
            per_output_cost(MEAN_VAR_AFFINE)),
    **table(("MeanVarianceNormalization",), per_output_cost(MEAN_VAR)),
    **table(("LRN",), _lrn),
    **table(("LpNormalization",), per_output_cost(LP_NORM)),
    **table(("Softmax",), per_output_cost(SOFTMAX)),
    **table(("LogSoftmax",), per_output_cost(LOG_SOFTMAX)),
    **table(("Hardmax",), per_output_cost(HARDMAX)),
    # ONNX Runtime registers its pre-opset-17 LayerNormalization and SimplifiedLayerNormalization in
    # the ONNX domain; some exporters write them under com.microsoft.
    **table(("SimplifiedLayerNormalization",), per_output_cost(RMS_AFFINE)),
    **table(("LayerNormalization",), per_output_cost(MEAN_VAR_AFFINE), MS),
    **table(("SimplifiedLayerNormalization",), per_output_cost(RMS_AFFINE), MS),
    **table(("SkipLayerNormalization",), _skip_layer_norm(MEAN_VAR_AFFINE), MS),
    **table(("SkipSimplifiedLayerNormalization",), _skip_layer_norm(RMS_AFFINE), MS),
    **table(("EmbedLayerNormalization",), _embed_layer_norm, MS),
}
