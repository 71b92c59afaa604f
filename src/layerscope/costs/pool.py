"""Pooling and resampling, the aux unit: MaxPool, AveragePool, LpPool, the Global pools, Resize,
Upsample, GridSample, RoiAlign.

Pools: kernel, strides, pads, dilations and ``ceil_mode`` act through the output shape the loader
resolved; every window tap of every output costs one op (padding taps included, as for Conv).
Resampling costs per output element, by interpolation mode over the ``k`` axes it interpolates:
nearest 1 (an index computation and a copy; assumption), linear ``2^k`` taps, cubic ``4^k`` taps,
a weighted sum of ``t`` taps being ``t`` multiplies + ``t-1`` adds.
"""

from __future__ import annotations

import math

from layerscope.costs._common import (
    CostTable,
    attr_ints,
    attr_str,
    in_shape,
    layer_cost,
    out_elements,
    out_shape,
    scan_cost,
    table,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

#: Extra ops per output of a pool, on top of one op per tap: AveragePool divides once.
_POOL_TAP_FLOPS = {"MaxPool": 1, "AveragePool": 1, "LpPool": 3}  # LpPool tap: |x|, pow p, add
_POOL_OUTPUT_FLOPS = {"MaxPool": 0, "AveragePool": 1, "LpPool": 1}  # LpPool: the p-th root


def _window_pool(node: Node, graph: Graph) -> LayerCost:
    """MaxPool/AveragePool/LpPool: output elements × (taps × per-tap ops + per-output ops).

    Optional outputs (MaxPool's Indices) count in the bytes written when present.
    """
    kernel = math.prod(attr_ints(node, "kernel_shape"))
    if not kernel:
        raise ValueError(f"layer {node.id!r} ({node.op_type}): no kernel_shape")
    per_output = kernel * _POOL_TAP_FLOPS[node.op_type] + _POOL_OUTPUT_FLOPS[node.op_type]
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * per_output)


def interpolation_flops(mode: str, axes: int) -> int:
    """FLOPs per output element of resampling with ``mode`` over ``axes`` interpolated axes.

    ``mode``: ONNX's names (nearest, linear, cubic) and the older ones (bilinear, trilinear,
    bicubic). An unrecognised mode costs as linear (assumption).
    """
    if mode == "nearest" or axes <= 0:
        return 1
    taps: int = 4 ** axes if "cubic" in mode else 2 ** axes  # int ** int is typed Any (a negative power is a float)
    return 2 * taps - 1


def resized_axes(before: tuple[int, ...], after: tuple[int, ...]) -> int:
    """How many axes change size (those Resize interpolates along)."""
    return sum(1 for a, b in zip(before, after, strict=False) if a != b)


def _resize(node: Node, graph: Graph) -> LayerCost:
    """Resize / Upsample (mode attribute, default nearest). Scales and roi are settings, not params."""
    axes = resized_axes(in_shape(node, graph, 0), out_shape(node, graph))
    per_output = interpolation_flops(attr_str(node, "mode", "nearest"), axes)
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * per_output, params_from=())


def _grid_sample(node: Node, graph: Graph) -> LayerCost:
    """GridSample(X, grid): per output element, unnormalize one coordinate per spatial axis (mul +
    add = 2, assumption) and interpolate over all spatial axes (``mode`` default bilinear)."""
    spatial = max(len(in_shape(node, graph, 0)) - 2, 1)
    per_output = 2 * spatial + interpolation_flops(attr_str(node, "mode", "bilinear"), spatial)
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * per_output, params_from=())


#: RoiAlign's ``sampling_ratio = 0`` means adaptive (ceil(roi size / output size)), unknown before
#: run time; 2 samples per axis is the common case of Mask R-CNN configurations (assumption).
ROI_ALIGN_ADAPTIVE_SAMPLES = 2


def _roi_align(node: Node, graph: Graph) -> LayerCost:
    """RoiAlign(X, rois, batch_indices): per output element, s×s bilinear samples (7 FLOPs each, see
    :func:`interpolation_flops`) pooled by avg (add) or max (compare), + a divide for avg."""
    ratio = int(node.attr("sampling_ratio", 0)) or ROI_ALIGN_ADAPTIVE_SAMPLES
    samples = ratio * ratio
    per_output = samples * (interpolation_flops("linear", 2) + 1)
    if attr_str(node, "mode", "avg") == "avg":
        per_output += 1
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * per_output, params_from=())


COSTS: CostTable = {
    **table(("MaxPool", "AveragePool", "LpPool"), _window_pool),
    # Global pools: ops per input element, then per output element.
    **table(("GlobalMaxPool",), scan_cost(1, 0, UnitKind.AUX)),  # compare
    **table(("GlobalAveragePool",), scan_cost(1, 1, UnitKind.AUX)),  # add; divide
    **table(("GlobalLpPool",), scan_cost(3, 1, UnitKind.AUX)),  # |x|, pow, add; p-th root
    **table(("Resize", "Upsample"), _resize),
    **table(("GridSample",), _grid_sample),
    **table(("RoiAlign",), _roi_align),
}
