"""Reductions: the Reduce* family, ArgMax/ArgMin, CumSum.

A reduction does per-input-element work (accumulate, and for some a transform first) and
per-output-element work (a divide for the mean, a final sqrt/log). The axes (attribute or, from
opset 18, an input) act through the output shape; they are settings, never params.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from layerscope.costs._common import CostTable, scan_cost, table
from layerscope.costs.types import UnitKind

#: op -> (FLOPs per input element, FLOPs per output element).
REDUCE_FLOPS: Mapping[str, tuple[int, int]] = MappingProxyType({
    "ReduceSum": (1, 0),  # add
    "ReduceMax": (1, 0),  # compare
    "ReduceMin": (1, 0),  # compare
    "ReduceProd": (1, 0),  # multiply
    "ReduceMean": (1, 1),  # add; divide
    "ReduceL1": (2, 0),  # |x| + add
    "ReduceL2": (2, 1),  # square + add; sqrt
    "ReduceSumSquare": (2, 0),  # square + add
    "ReduceLogSum": (1, 1),  # add; log
    "ReduceLogSumExp": (2, 1),  # exp + add; log (no max-subtraction; assumption)
})


COSTS: CostTable = {
    **{("", op): scan_cost(per_in, per_out, UnitKind.VECTOR, params_from=())
       for op, (per_in, per_out) in REDUCE_FLOPS.items()},
    # ArgMax/ArgMin: one compare per input element; an index-producing scan (scalar unit).
    **table(("ArgMax", "ArgMin"), scan_cost(1, 0, UnitKind.SCALAR, params_from=())),
    # CumSum: one add per element (a prefix scan).
    **table(("CumSum",), scan_cost(1, 0, UnitKind.VECTOR, params_from=())),
}
