"""Static estimates: roofline per layer on a hardware profile; the timeline of one frame over units,
cores and DDR, with its memory plan."""

from typing import TYPE_CHECKING

from layerscope._lazy import from_module, lazy_names
from layerscope.estimator.roofline import deployed_bytes, estimate_graph, resident_tensors
from layerscope.estimator.types import Bound, Estimate, LayerEstimate

if TYPE_CHECKING:
    from layerscope.estimator.memory import MemoryPlan, plan_memory
    from layerscope.estimator.timeline import (
        Busy,
        Interval,
        LayerSpan,
        TimeBins,
        Timeline,
        Track,
        core_share,
        simulate_timeline,
    )

#: Names of the timeline and the memory plan, imported on first use: a plain estimate (the roofline) never
#: schedules a frame, and their modules were a tenth of ``layerscope estimate``'s own imports.
__getattr__ = lazy_names(__name__, {
    **from_module("layerscope.estimator.memory", "MemoryPlan", "plan_memory"),
    **from_module("layerscope.estimator.timeline", "Busy", "Interval", "LayerSpan", "TimeBins", "Timeline", "Track",
                  "core_share", "simulate_timeline")})

__all__ = [
    "Bound",
    "Busy",
    "Estimate",
    "Interval",
    "LayerEstimate",
    "LayerSpan",
    "MemoryPlan",
    "TimeBins",
    "Timeline",
    "Track",
    "core_share",
    "deployed_bytes",
    "estimate_graph",
    "plan_memory",
    "resident_tensors",
    "simulate_timeline",
]

