"""Static estimates: roofline per layer on a hardware profile; the timeline of one frame over units,
cores and DDR, with its memory plan."""

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from layerscope._lazy import from_module, lazy_names
from layerscope.estimate.roofline import deployed_bytes, estimate_graph, resident_tensors
from layerscope.estimate.types import Bound, Estimate, LayerEstimate

if TYPE_CHECKING:
    from layerscope.estimate.memory import MemoryPlan, plan_memory
    from layerscope.estimate.timeline import (
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
    **from_module("layerscope.estimate.memory", "MemoryPlan", "plan_memory"),
    **from_module("layerscope.estimate.timeline", "Busy", "Interval", "LayerSpan", "TimeBins", "Timeline", "Track",
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


class _EstimatePackage(ModuleType):
    """This package, callable as the API's :func:`layerscope.api.estimate`: ``layerscope.estimate(model, ...)``
    names both this package and that function, and once the package is imported Python binds the name to it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from layerscope.api import estimate

        return estimate(*args, **kwargs)


sys.modules[__name__].__class__ = _EstimatePackage
