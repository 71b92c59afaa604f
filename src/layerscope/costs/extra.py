"""The rest of the ONNX set: CumProd (vector unit), Det (tensor unit), NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (vector unit).

Sources: the ONNX operator specs (onnx/docs/Operators.md, CumProd-26, Det-11/22, NegativeLogLikelihoodLoss-12/22,
SoftmaxCrossEntropyLoss-12/13). Counting convention of :mod:`layerscope.costs.elementwise`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from layerscope.costs._common import (
    CostTable,
    attr_str,
    has_input,
    in_shape,
    layer_cost,
    scan_cost,
    table,
    tensor_of,
    tensor_only,
)
from layerscope.costs.norm import LOG_SOFTMAX
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node


def lu_macs(n: int) -> int:
    """Multiply-adds of the LU elimination of an n×n matrix: Σ_{k=1}^{n-1} k² = (n-1)·n·(2n-1)/6 (≈ n³/3)."""
    return (n - 1) * n * (2 * n - 1) // 6


@tensor_only
def _det(node: Node, graph: Graph) -> LayerCost:
    """Det(X (*, n, n)) -> (*): per matrix an LU factorisation with partial pivoting, :func:`lu_macs` (n) MACs
    (≈ n³/3), n·(n-1)/2 divides for the multipliers and n - 1 multiplies for the product of the diagonal (the
    pivot search's compares are not counted). FLOPs = 2 × MACs + those."""
    shape = in_shape(node, graph, 0)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise LayerscopeError(f"layer {node.id!r} (Det): input of shape {shape}, expected (..., n, n)")
    n, matrices = shape[-1], math.prod(shape[:-2])
    macs = matrices * lu_macs(n)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs,
                      flops=2 * macs + matrices * (n * (n - 1) // 2 + max(n - 1, 0)), params_from=())


def _nll_flops(node: Node, samples: int) -> int:
    """The negative log-likelihood part of a loss over ``samples`` targets: per sample a negation, a multiply by
    the class weight when given (input 2), a compare with ``ignore_index`` when set; a ``sum``/``mean`` reduction
    adds one add per sample (``mean`` with weights also sums the weights: one more) and ``mean`` one divide."""
    weighted = has_input(node, 2)
    per_sample = 1 + (1 if weighted else 0) + (1 if node.attr("ignore_index") is not None else 0)
    reduction = attr_str(node, "reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise LayerscopeError(f"layer {node.id!r} ({node.op_type}): reduction {reduction!r}, expected none, sum "
                              f"or mean")
    if reduction != "none":
        per_sample += 1 + (1 if reduction == "mean" and weighted else 0)
    return samples * per_sample + (1 if reduction == "mean" else 0)


def _nll_loss(node: Node, graph: Graph) -> LayerCost:
    """NegativeLogLikelihoodLoss(input (N, C, d..), target (N, d..), weight? (C)) -> loss: :func:`_nll_flops` over
    the N·d.. targets. Each target reads one element of ``input`` (a gather): input bytes read = targets × its
    item size, not the whole tensor. The class weights are a setting, not params."""
    samples = math.prod(in_shape(node, graph, 1))
    cost = layer_cost(node, graph, UnitKind.VECTOR, flops=_nll_flops(node, samples), params_from=())
    data = tensor_of(graph, node.inputs[0], node)
    if node.inputs[0] in node.inputs[1:]:
        return cost
    unread = (data.elements - min(data.elements, samples)) * data.itemsize
    if graph.is_constant(data.name):
        return replace(cost, bytes_read_weight=cost.bytes_read_weight - unread)
    return replace(cost, bytes_read_act=cost.bytes_read_act - unread)


def _softmax_cross_entropy(node: Node, graph: Graph) -> LayerCost:
    """SoftmaxCrossEntropyLoss(scores (N, C, d..), labels (N, d..), weights? (C)) -> output, log_prob?:
    a log-softmax over C (:data:`layerscope.costs.norm.LOG_SOFTMAX` per score), then :func:`_nll_flops` over the
    N·d.. labels. The class weights are a setting, not params."""
    scores = math.prod(in_shape(node, graph, 0))
    samples = math.prod(in_shape(node, graph, 1))
    return layer_cost(node, graph, UnitKind.VECTOR, flops=scores * LOG_SOFTMAX + _nll_flops(node, samples),
                      params_from=())


COSTS: CostTable = {
    # CumProd: one multiply per element (a prefix scan, as CumSum's add); the axis is a setting.
    **table(("CumProd",), scan_cost(1, 0, UnitKind.VECTOR, params_from=())),
    **table(("Det",), _det),
    **table(("NegativeLogLikelihoodLoss",), _nll_loss),
    **table(("SoftmaxCrossEntropyLoss",), _softmax_cross_entropy),
}
