"""Compare two runs: the before/after table users post (latency, FPS, P99, utilization, CPU-fallback count, peak
memory, MACs) and per-layer deltas matched by layer id.

Contract (pure functions of two run dicts):
- a metric is taken from the measurement when the run has one (``latency``, ``measurement``), else from the
  estimate (``summary``, ``timeline``); each side says which (``source``); a metric neither side has is omitted;
- layers are matched by id; the rest are matched as *renamed* when op type, output shapes, MACs and weight bytes
  agree (first unmatched candidate in graph order); what is left is *added* (after only) or *removed* (before
  only) -- every layer of both runs is in exactly one of matched, renamed, added, removed;
- a layer's time is its measured median when both runs measured layers, else its estimate; the same basis on
  both sides, named in :attr:`Comparison.time_source`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from layerscope.analysis.diagnose import has_measurement, layer_time_us


@dataclass(frozen=True)
class MetricDelta:
    """One row of the before/after table; ``better`` says which direction is an improvement."""

    name: str
    unit: str
    before: float | None
    after: float | None
    source_before: str
    source_after: str
    better: str  # "lower" | "higher"

    @property
    def change(self) -> float | None:
        """(after - before) / before; ``None`` when either side is missing or before is 0."""
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / self.before


@dataclass(frozen=True)
class LayerDelta:
    """One layer in both runs (same id, or renamed): its time before and after."""

    before_id: str
    after_id: str
    op_type: str
    before_us: float
    after_us: float

    @property
    def delta_us(self) -> float:
        return self.after_us - self.before_us

    @property
    def renamed(self) -> bool:
        return self.before_id != self.after_id


@dataclass(frozen=True)
class Comparison:
    """Before vs after: metrics, matched layers (largest change first), renamed, added and removed layers."""

    before_label: str
    after_label: str
    metrics: tuple[MetricDelta, ...]
    layers: tuple[LayerDelta, ...]
    added: tuple[tuple[str, str, float], ...]
    removed: tuple[tuple[str, str, float], ...]
    time_source: str

    @property
    def renamed(self) -> tuple[LayerDelta, ...]:
        return tuple(d for d in self.layers if d.renamed)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _latency(run: Mapping[str, Any], key: str) -> tuple[float | None, str]:
    latency = run.get("latency") or {}
    value = _num(latency.get(key))
    if value is not None:
        return value, "measured"
    if key == "p50_us":
        return _num((run.get("summary") or {}).get("est_latency_us")), "estimate"
    return None, "-"


def _fps(run: Mapping[str, Any]) -> tuple[float | None, str]:
    latency = run.get("latency") or {}
    if _num(latency.get("fps")) is not None:
        return _num(latency.get("fps")), "measured"
    summary = run.get("summary") or {}
    if _num(summary.get("est_fps")) is not None:
        return _num(summary.get("est_fps")), "estimate"
    return None, "-"


def _utilization(run: Mapping[str, Any]) -> tuple[float | None, str]:
    measurement = run.get("measurement") or {}
    if _num(measurement.get("cpu_util")) is not None:
        return _num(measurement.get("cpu_util")), "measured (CPU)"
    timeline = (run.get("timeline") or {}).get("summary") or {}
    busy, latency = _num(timeline.get("busiest_unit_busy_us")), _num(timeline.get("latency_us"))
    if busy is not None and latency:
        return busy / latency, f"estimate ({timeline.get('busiest_unit')})"
    return None, "-"


def _fallbacks(run: Mapping[str, Any]) -> tuple[float | None, str]:
    summary = run.get("summary") or {}
    if _num(summary.get("cpu_fallback_count")) is not None:
        return _num(summary.get("cpu_fallback_count")), "estimate"
    layers = run.get("layers") or []
    if any(isinstance(layer.get("estimate"), Mapping) for layer in layers):
        return float(sum(1 for layer in layers if (layer.get("estimate") or {}).get("fallback_reason"))), "estimate"
    return None, "-"


def _memory(run: Mapping[str, Any]) -> tuple[float | None, str]:
    measurement = run.get("measurement") or {}
    if _num(measurement.get("peak_rss_bytes")) is not None:
        return _num(measurement.get("peak_rss_bytes")), "measured (peak RSS)"
    memory = (run.get("timeline") or {}).get("memory") or {}
    if _num(memory.get("minimum_requirement_bytes")) is not None:
        return _num(memory.get("minimum_requirement_bytes")), "estimate (memory plan)"
    return None, "-"


def _macs(run: Mapping[str, Any]) -> tuple[float | None, str]:
    return _num((run.get("summary") or {}).get("macs")), "model"


METRICS = (
    ("latency P50", "us", "lower", lambda r: _latency(r, "p50_us")),
    ("latency P99", "us", "lower", lambda r: _latency(r, "p99_us")),
    ("FPS", "fps", "higher", _fps),
    ("utilization", "fraction", "higher", _utilization),
    ("CPU-fallback layers", "count", "lower", _fallbacks),
    ("peak memory", "bytes", "lower", _memory),
    ("MACs", "count", "lower", _macs),
)


def _signature(layer: Mapping[str, Any]) -> tuple[Any, ...]:
    shapes = tuple(tuple(s) if isinstance(s, list) else None for s in layer.get("output_shapes") or [])
    return (layer.get("op_type"), shapes, layer.get("macs"), layer.get("weight_bytes"))


def compare_runs(before: Mapping[str, Any], after: Mapping[str, Any], *, before_label: str = "before",
                 after_label: str = "after") -> Comparison:
    """Compare ``before`` and ``after`` (see the module docstring)."""
    metrics = []
    for name, unit, better, getter in METRICS:
        (b, sb), (a, sa) = getter(before), getter(after)
        if b is not None or a is not None:
            metrics.append(MetricDelta(name, unit, b, a, sb, sa, better))
    measured = has_measurement(before) and has_measurement(after)
    b_layers = [layer for layer in before.get("layers", []) if isinstance(layer, Mapping)]
    a_layers = [layer for layer in after.get("layers", []) if isinstance(layer, Mapping)]
    a_by_id = {str(layer.get("id")): layer for layer in a_layers}
    matched: list[LayerDelta] = []
    left_before = []
    for layer in b_layers:
        other = a_by_id.pop(str(layer.get("id")), None)
        if other is None:
            left_before.append(layer)
        else:
            matched.append(_delta(layer, other, measured))
    left_after = [layer for layer in a_layers if str(layer.get("id")) in a_by_id]
    removed = []
    for layer in left_before:
        sig = _signature(layer)
        twin = next((o for o in left_after if _signature(o) == sig), None)
        if twin is None:
            removed.append(layer)
        else:
            left_after.remove(twin)
            matched.append(_delta(layer, twin, measured))
    matched.sort(key=lambda d: (-abs(d.delta_us), d.before_id))

    def rows(layers: list[Mapping[str, Any]]) -> tuple[tuple[str, str, float], ...]:
        return tuple((str(x.get("id")), str(x.get("op_type")), layer_time_us(x, prefer_measured=measured))
                     for x in layers)

    return Comparison(before_label, after_label, tuple(metrics), tuple(matched), rows(left_after), rows(removed),
                      "measured" if measured else "estimated")


def _delta(before: Mapping[str, Any], after: Mapping[str, Any], measured: bool) -> LayerDelta:
    return LayerDelta(str(before.get("id")), str(after.get("id")), str(after.get("op_type")),
                      layer_time_us(before, prefer_measured=measured), layer_time_us(after, prefer_measured=measured))


def _side(run: Mapping[str, Any], label: str) -> dict[str, Any]:
    model = run.get("model") or {}
    return {"label": label, "model": model.get("name"), "path": model.get("path"), "sha256": model.get("sha256"),
            "target": (run.get("target") or {}).get("name")}


def comparison_section(cmp: Comparison, before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The run file's ``comparison`` section (stored in the *after* run)."""

    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    return {
        "before": _side(before, cmp.before_label),
        "after": _side(after, cmp.after_label),
        "time_source": cmp.time_source,
        "metrics": [{"name": m.name, "unit": m.unit, "before": r(m.before), "after": r(m.after),
                     "change": r(m.change), "better": m.better, "source_before": m.source_before,
                     "source_after": m.source_after} for m in cmp.metrics],
        "layers": [{"before_id": d.before_id, "after_id": d.after_id, "op_type": d.op_type,
                    "before_us": round(d.before_us, 3), "after_us": round(d.after_us, 3),
                    "delta_us": round(d.delta_us, 3), "renamed": d.renamed} for d in cmp.layers],
        "renamed": [{"before_id": d.before_id, "after_id": d.after_id} for d in cmp.renamed],
        "added": [{"id": i, "op_type": op, "time_us": round(t, 3)} for i, op, t in cmp.added],
        "removed": [{"id": i, "op_type": op, "time_us": round(t, 3)} for i, op, t in cmp.removed],
    }
