"""Diagnose a run: hot spots, what bounds each layer (by the roofline and by measured efficiency), CPU fallback.

Contract (pure functions of the typed run and a profile; no I/O):
- a layer's time is its measured time (:attr:`layerscope.runfile.models.Layer.measured_us`: the median, 0 when the
  runtime eliminated it) when it was measured, else its estimate; :attr:`Diagnosis.time_source` says which the
  ranking used (``"measured"`` when any layer was);
- ``top20_share`` = the share of all layer time spent in the slowest 20% of the layers (at least one);
- measured efficiency: achieved ops/s = ops / measured time against the peak of the unit the layer runs on at
  its dtype, achieved bytes/s = bytes moved / measured time against the profile's attainable DDR bandwidth; the
  larger utilization names the measured bound when it reaches :data:`LOW_UTILIZATION`, else ``"latency"``
  (neither the unit nor memory is busy: dispatch, synchronization or a poor kernel);
- CPU-fallback layers carry the profile's reason from the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from layerscope.runfile.models import Layer, RunFile
from layerscope.targets.profile import Profile

#: Below this utilization of both compute and bandwidth a measured layer is "latency"-bound.
LOW_UTILIZATION = 0.05


@dataclass(frozen=True)
class LayerDiagnosis:
    """One layer: its time and share, its roofline bound, and (when measured) its achieved rates."""

    layer_id: str
    op_type: str
    time_us: float
    share: float
    measured: bool
    roofline_bound: str
    measured_bound: str | None
    achieved_ops_per_s: float | None
    achieved_bytes_per_s: float | None
    compute_utilization: float | None
    bandwidth_utilization: float | None
    unit: str
    fallback_reason: str | None


@dataclass(frozen=True)
class Diagnosis:
    """Layers ranked by time (slowest first), the top-20% share, the fallback layers and bound counts."""

    layers: tuple[LayerDiagnosis, ...]
    time_source: str
    total_us: float
    top20_share: float
    fallbacks: tuple[LayerDiagnosis, ...]
    roofline_bounds: Mapping[str, int]
    measured_bounds: Mapping[str, int]

    def hotspots(self, n: int) -> tuple[LayerDiagnosis, ...]:
        return self.layers[:n]


def layer_time_us(layer: Layer, *, prefer_measured: bool = True) -> float:
    """The layer's measured time (0 when eliminated) when it was measured, else its estimated latency, else 0
    (:meth:`layerscope.runfile.models.Layer.time_us`)."""
    return layer.time_us(prefer_measured=prefer_measured)


def has_measurement(run: RunFile) -> bool:
    """True when any layer of ``run`` was measured."""
    return run.has_measurement


def _peak_ops_per_s(layer: Layer, profile: Profile | None) -> float | None:
    estimate = layer.est
    if profile is None or not estimate.unit or estimate.unit == "-":
        return None
    try:
        unit = profile.unit(estimate.unit)
    except KeyError:
        return None
    return unit.ops_per_s(str(estimate.dtype or profile.default_dtype))


def _measured_rates(layer: Layer, time_us: float, profile: Profile | None
                    ) -> tuple[float | None, float | None, float | None, float | None, str | None]:
    if time_us <= 0:
        return None, None, None, None, None
    ops_rate = layer.ops / (time_us * 1e-6)
    bytes_rate = float(layer.bytes_moved) / (time_us * 1e-6)
    peak = _peak_ops_per_s(layer, profile)
    compute_util = ops_rate / peak if peak else None
    bandwidth = profile.attainable_ddr_bytes_per_s if profile is not None else None
    bandwidth_util = bytes_rate / bandwidth if bandwidth else None
    utils = {"compute": compute_util or 0.0, "bandwidth": bandwidth_util or 0.0}
    best = max(utils, key=lambda k: utils[k])
    bound: str | None = best if utils[best] >= LOW_UTILIZATION else "latency"
    if compute_util is None and bandwidth_util is None:
        bound = None
    return ops_rate, bytes_rate, compute_util, bandwidth_util, bound


def _or(value: str | None, missing: str) -> str:
    """``value`` as text, ``missing`` when the run has none."""
    return missing if value is None else str(value)


def diagnose(run: RunFile, profile: Profile | None = None) -> Diagnosis:
    """Diagnose ``run`` (see the module docstring); ``profile`` gives the peaks
    for measured efficiency."""
    measured_any = run.has_measurement
    rows = []
    for layer in run.layers:
        time_us = layer.time_us(prefer_measured=measured_any)
        is_measured = measured_any and layer.measured_us is not None and not layer.eliminated
        rates = _measured_rates(layer, time_us, profile) if is_measured else (None, None, None, None, None)
        rows.append((layer, time_us, is_measured, rates, layer.est))
    total = sum(t for _, t, _, _, _ in rows)
    diags = tuple(sorted((
        LayerDiagnosis(layer.id, _or(layer.op_type, "?"), t, t / total if total else 0.0, m,
                       _or(est.bound, "?"), r[4], r[0], r[1], r[2], r[3], _or(est.unit, "-"),
                       est.fallback_reason)
        for layer, t, m, r, est in rows), key=lambda d: (-d.time_us, d.layer_id)))
    top_count = max(1, math.ceil(0.2 * len(diags))) if diags else 0
    top20 = sum(d.time_us for d in diags[:top_count]) / total if total else 0.0
    roofline: dict[str, int] = {}
    measured_bounds: dict[str, int] = {}
    for d in diags:
        roofline[d.roofline_bound] = roofline.get(d.roofline_bound, 0) + 1
        if d.measured_bound is not None:
            measured_bounds[d.measured_bound] = measured_bounds.get(d.measured_bound, 0) + 1
    return Diagnosis(diags, "measured" if measured_any else "estimated", total, top20,
                     tuple(d for d in diags if d.fallback_reason), roofline, measured_bounds)


def diagnosis_section(diag: Diagnosis, top: int = 10) -> dict[str, Any]:
    """A compact JSON form: the top-N hot spots, the top-20% share, bound counts, fallback layers."""

    def row(d: LayerDiagnosis) -> dict[str, Any]:
        return {"id": d.layer_id, "op_type": d.op_type, "time_us": round(d.time_us, 3), "share": round(d.share, 6),
                "measured": d.measured, "roofline_bound": d.roofline_bound, "measured_bound": d.measured_bound,
                "compute_utilization": None if d.compute_utilization is None else round(d.compute_utilization, 6),
                "bandwidth_utilization": None if d.bandwidth_utilization is None
                else round(d.bandwidth_utilization, 6), "unit": d.unit, "fallback_reason": d.fallback_reason}

    return {"time_source": diag.time_source, "total_us": round(diag.total_us, 3),
            "top20_share": round(diag.top20_share, 6), "hotspots": [row(d) for d in diag.hotspots(top)],
            "roofline_bounds": dict(sorted(diag.roofline_bounds.items())),
            "measured_bounds": dict(sorted(diag.measured_bounds.items())),
            "fallbacks": [row(d) for d in diag.fallbacks]}
