"""Reconcile a static estimate with a board measurement of the same part of a model: the scale factor k.

The board tool measures an accelerator subgraph as one block; the compiler's static report estimates
every layer of it. The workflow Horizon's engineers give (see the forum thread in the design notes):
take ``k = board time / static estimate`` for the same part of the model (e.g. the BPU subgraph:
``processor_latency.BPU_inference_time_cost`` over the static report's ``latency``), keep the static
report's per-layer *shares*, and scale them once by k, so that the per-layer figures add up to the
board's time. The result ranks hot spots; per-layer absolute values are an estimate, not a measurement.

Contract (pure functions, no I/O):
- :func:`scale_factor` refuses a non-positive or non-finite time with ``InputError`` (the numbers come
  from the user's files);
- :func:`scale_layers` keeps the input order; shares add up to 1 and ``scaled_us`` to the measured time
  (when any layer has a cost), each ``scaled_us == k * share * estimated_total_us``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from layerscope.errors import InputError


@dataclass(frozen=True)
class ScaleFactor:
    """``k = measured_us / estimated_us`` for one part of a model."""

    measured_us: float
    estimated_us: float

    @property
    def k(self) -> float:
        return self.measured_us / self.estimated_us


@dataclass(frozen=True)
class ScaledLayer:
    """One layer's static cost, its share of all the layers' cost, and that share of the measured time."""

    layer_id: str
    estimated_us: float
    share: float
    scaled_us: float


def scale_factor(measured_us: float, estimated_us: float) -> ScaleFactor:
    """The scale factor between a measurement and an estimate of the same part, both in µs."""
    for label, value in (("measured", measured_us), ("estimated", estimated_us)):
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"cannot scale: the {label} time is {value} µs (it must be a positive number)")
    return ScaleFactor(measured_us=measured_us, estimated_us=estimated_us)


def scale_layers(layers: Iterable[tuple[str, float]], factor: ScaleFactor) -> tuple[ScaledLayer, ...]:
    """Each ``(layer id, estimated µs)`` with its share of the layers' total and that share of the
    measured time. All shares are 0 when no layer has a cost."""
    items = [(layer_id, max(0.0, cost)) for layer_id, cost in layers]
    total = sum(cost for _, cost in items)
    scaled = []
    for layer_id, cost in items:
        share = cost / total if total > 0 else 0.0
        scaled.append(ScaledLayer(layer_id=layer_id, estimated_us=cost, share=share,
                                  scaled_us=share * factor.measured_us))
    return tuple(scaled)
