"""Spatial ops beyond the plain conv and pool: DeformConv (tensor unit), AffineGrid and MaxRoiPool (aux unit),
Col2Im (move unit).

Sources: the ONNX operator specs (onnx/docs/Operators.md, DeformConv-19/22, AffineGrid-20, MaxRoiPool-1/22,
Col2Im-18). Counting convention of :mod:`layerscope.costs.elementwise`: one elementary operation = 1 FLOP.
"""

from __future__ import annotations

import math

from layerscope.costs._common import (
    CostTable,
    has_input,
    in_shape,
    layer_cost,
    out_elements,
    out_shape,
    table,
    tensor_only,
)
from layerscope.costs.conv import conv_macs
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node

#: One bilinear sample at a fractional position: the weighted sum of the 4 neighbours read (4 multiplies + 3 adds = 7,
#: as :func:`layerscope.costs.pool.interpolation_flops` counts 2-D linear interpolation) + 1 to place the sample
#: (the offset added to the tap's coordinate) = 8 (assumption: the interpolation weights, made from the
#: fractions once per sample position, are shared by the channels of an offset group and not counted).
BILINEAR_SAMPLE = 8


@tensor_only
def _deform_conv(node: Node, graph: Graph) -> LayerCost:
    """DeformConv(X (N, C, D1..Dn), W (oC, C/group, k1..kn), offset, B?, mask?) -> Y (N, oC, o1..on).

    MACs = the conv's (output elements × C/group × kernel elements, :func:`layerscope.costs.conv.conv_macs`).
    Sampling: every input channel is sampled once per kernel tap and output position, samples = N × C ×
    o1..on × k1..kn, each a bilinear interpolation of 4 neighbours (:data:`BILINEAR_SAMPLE` FLOPs) + 1 multiply
    by the mask when given. FLOPs = 2 × MACs + samples × (8 + mask) + output elements for the bias. The 4
    neighbour reads are gathers from X, counted as X read once (neighbours share cache lines, as a conv's
    taps do). Params: W and B.
    """
    x = in_shape(node, graph, 0)
    weight = in_shape(node, graph, 1)
    y = out_shape(node, graph)
    if len(weight) != len(x) or len(y) != len(x):
        raise LayerscopeError(f"layer {node.id!r} (DeformConv): X, W and Y of ranks {len(x)}, {len(weight)}, "
                              f"{len(y)}; expected one rank (N, C, spatial...)")
    macs = conv_macs(node, graph)
    samples = y[0] * x[1] * math.prod(y[2:]) * math.prod(weight[2:])
    per_sample = BILINEAR_SAMPLE + (1 if has_input(node, 4) else 0)
    bias = math.prod(y) if has_input(node, 3) else 0
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + samples * per_sample + bias,
                      params_from=(1, 3))


@tensor_only
def _affine_grid(node: Node, graph: Graph) -> LayerCost:
    """AffineGrid(theta (N, k, k+1), size) -> grid (N, D.., k): each coordinate of each output point is one row of
    theta applied to the homogeneous base point: k multiplies + k adds (the translation included) = 2k FLOPs per
    output element (k = 2 or 3; the base grid's evenly spaced coordinates are an index scaling, not counted)."""
    k = out_shape(node, graph)[-1]
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * 2 * k, params_from=())


@tensor_only
def _col2im(node: Node, graph: Graph) -> LayerCost:
    """Col2Im(input (N, C·∏block, L), image_shape, block_shape) -> (N, C, image...): every column element is added
    into its image position (overlapping blocks sum): one add per input element, the rest is movement.
    ``image_shape`` and ``block_shape`` are settings."""
    return layer_cost(node, graph, UnitKind.MOVE, flops=math.prod(in_shape(node, graph, 0)), params_from=())


def _max_roi_pool(node: Node, graph: Graph) -> LayerCost:
    """MaxRoiPool(X (N, C, H, W), rois (R, 5)) -> (R, C, ph, pw): each output is the max over its bin of the ROI,
    one compare per element of the bin. The ROIs are data; assumption: each covers the whole feature map, so a
    bin holds ⌈H/ph⌉ × ⌈W/pw⌉ elements (an upper bound). FLOPs = output elements × that bin size."""
    height, width = in_shape(node, graph, 0)[2:4]
    pooled = tuple(int(v) for v in node.attr("pooled_shape", ()))
    if len(pooled) != 2 or min(pooled) < 1:
        raise LayerscopeError(f"layer {node.id!r} (MaxRoiPool): pooled_shape {pooled}, expected (height, width)")
    bin_elements = math.ceil(height / pooled[0]) * math.ceil(width / pooled[1])
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * bin_elements, params_from=())


COSTS: CostTable = {
    **table(("DeformConv",), _deform_conv),
    **table(("AffineGrid",), _affine_grid),
    **table(("Col2Im",), _col2im),
    **table(("MaxRoiPool",), _max_roi_pool),
}
