"""Static estimates: roofline per layer on a hardware profile."""

from layerscope.estimate.roofline import deployed_bytes, estimate_graph
from layerscope.estimate.types import Bound, Estimate, LayerEstimate

__all__ = ["Bound", "Estimate", "LayerEstimate", "deployed_bytes", "estimate_graph"]
