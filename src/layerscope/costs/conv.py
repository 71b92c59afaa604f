"""Convolutions: Conv, ConvTranspose, QLinearConv, ConvInteger, com.microsoft FusedConv.

MAC counts (the usual convention of fvcore, onnx-tool, ptflops): every kernel tap of every output
counts, padding taps included; strides, pads, dilations and ``auto_pad`` only act through the
output shape, which the loader resolved.

- Conv: ``MACs = output elements × (Cin/groups) × k1 × ... × kn``. The weight is
  ``(Cout, Cin/groups, k1, ..., kn)``, so the factor is ``prod(W.shape[1:])``: depthwise
  (groups = Cin) gives 1 × kernel, a 1×1 conv gives Cin.
- ConvTranspose: every *input* element scatters into ``Cout/groups × kernel`` outputs:
  ``MACs = input elements × (Cout/groups) × k1 × ... × kn``; the weight is
  ``(Cin, Cout/groups, k1, ..., kn)``, so again the factor is ``prod(W.shape[1:])``.
- FLOPs = 2 × MACs, + 1 per output element for a bias, + the per-element post-processing below.
"""

from __future__ import annotations

import math

from layerscope.costs._common import (
    MS,
    CostTable,
    attr_str,
    has_input,
    in_elements,
    in_shape,
    layer_cost,
    out_elements,
    table,
    tensor_only,
)
from layerscope.costs.elementwise import REQUANT, activation_flops
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node


def taps_per_output(node: Node, graph: Graph, weight_index: int) -> int:
    """``prod(W.shape[1:])`` of a conv weight: channels-per-group × kernel elements."""
    weight = in_shape(node, graph, weight_index)
    if len(weight) < 3:
        raise LayerscopeError(f"layer {node.id!r} ({node.op_type}): weight of rank {len(weight)}, "
                              f"expected (C, C/groups, k1, ...)")
    return math.prod(weight[1:])


def conv_macs(node: Node, graph: Graph, weight_index: int = 1) -> int:
    """Conv-style MACs: output elements × Cin/groups × kernel elements."""
    return out_elements(node, graph) * taps_per_output(node, graph, weight_index)


def _bias_flops(node: Node, graph: Graph, bias_index: int) -> int:
    return out_elements(node, graph) if has_input(node, bias_index) else 0


@tensor_only
def _conv(node: Node, graph: Graph) -> LayerCost:
    """Conv(X, W, B?)."""
    macs = conv_macs(node, graph)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + _bias_flops(node, graph, 2))


@tensor_only
def _conv_transpose(node: Node, graph: Graph) -> LayerCost:
    """ConvTranspose(X, W, B?): input elements × Cout/groups × kernel elements."""
    macs = in_elements(node, graph, 0) * taps_per_output(node, graph, 1)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + _bias_flops(node, graph, 2))


@tensor_only
def _qlinear_conv(node: Node, graph: Graph) -> LayerCost:
    """QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?): weight at 3, bias at 8.

    Params: the (int8/uint8) weight and the int32 bias.
    """
    macs = conv_macs(node, graph, weight_index=3)
    flops = 2 * macs + _bias_flops(node, graph, 8) + REQUANT * out_elements(node, graph)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=(3, 8))


@tensor_only
def _conv_integer(node: Node, graph: Graph) -> LayerCost:
    """ConvInteger(x, w, x_zp?, w_zp?): int32 output, no requantization; params: the weight."""
    macs = conv_macs(node, graph, weight_index=1)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs, params_from=(1,))


def _ms_fused_conv(node: Node, graph: Graph) -> LayerCost:
    """com.microsoft FusedConv(X, W, B?, Z?): Conv + optional sum input Z + ``activation``."""
    macs = conv_macs(node, graph)
    per_output = (1 if has_input(node, 2) else 0) + (1 if has_input(node, 3) else 0) + \
        activation_flops(attr_str(node, "activation", ""))
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs,
                      flops=2 * macs + per_output * out_elements(node, graph), params_from=(1, 2))


COSTS: CostTable = {
    **table(("Conv",), _conv),
    **table(("ConvTranspose",), _conv_transpose),
    **table(("QLinearConv",), _qlinear_conv),
    **table(("ConvInteger",), _conv_integer),
    **table(("FusedConv",), _ms_fused_conv, MS),
    # com.microsoft QLinearConv: the ONNX op's inputs, with an NHWC variant (``channels_last``) of the same work.
    **table(("QLinearConv",), _qlinear_conv, MS),
}
