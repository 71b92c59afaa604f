"""Compare two runs: the before/after table users post (latency, FPS, P99, utilization, CPU-fallback count, peak
memory, MACs) and per-layer deltas matched by layer id.

Contract (pure functions of two typed runs, or their documents):
- a metric is taken from the measurement when the run has one (``latency``, ``measurement``), else from the
  estimate (``summary``, ``timeline``); each side says which (``source``); a metric neither side has is omitted;
- layers are matched by id; the rest are matched as *renamed* when op type, output shapes, MACs and weight bytes
  agree (first unmatched candidate in graph order); what is left is *added* (after only) or *removed* (before
  only) -- every layer of both runs is in exactly one of matched, renamed, added, removed;
- a layer's time is its measured median when both runs measured layers, else its estimate; the same basis on
  both sides, named in :attr:`Comparison.time_source`;
- *two runtimes* (:func:`compare_runtimes`, :attr:`Comparison.runtimes`): when both runs measured layers and their
  runtimes differ (backend, device or precision), the layers matched by id with, on each side, the kernel that
  ran the layer, the layers that kernel fused with it (the layer alone when it ran alone) and the kernel's
  precision (else the run's, else the layer's own type: ONNX Runtime runs the model's types); per op type, the
  time each runtime spends. A layer is *fused differently* when its groups differ as sets of layers; a runtime
  that eliminated a layer runs it in no group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from layerscope.runfile.io import as_run
from layerscope.runfile.models import Layer, RunFile


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
class RuntimeSide:
    """Which runtime measured a run: backend, device (ONNX Runtime: its provider) and precision (``""``:
    unknown)."""

    backend: str
    device: str
    precision: str

    @property
    def text(self) -> str:
        return " ".join(part for part in (self.backend, self.device, self.precision) if part)


@dataclass(frozen=True)
class LayerRuntime:
    """One layer as each runtime ran it: time, kernel, the layers of its kernel (fused group), precision."""

    layer_id: str
    op_type: str
    before_us: float
    after_us: float
    before_kernel: str
    after_kernel: str
    before_group: tuple[str, ...]
    after_group: tuple[str, ...]
    before_precision: str
    after_precision: str

    @property
    def fused_differently(self) -> bool:
        return set(self.before_group) != set(self.after_group)

    @property
    def precision_differs(self) -> bool:
        return bool(self.before_precision and self.after_precision) and self.before_precision != self.after_precision


@dataclass(frozen=True)
class RuntimeComparison:
    """The same model on two runtimes: the layers lined up (graph order) and the time per op type."""

    before: RuntimeSide
    after: RuntimeSide
    layers: tuple[LayerRuntime, ...]
    by_op: tuple[tuple[str, float, float], ...]

    @property
    def fused_differently(self) -> tuple[LayerRuntime, ...]:
        return tuple(layer for layer in self.layers if layer.fused_differently)

    @property
    def precision_differs(self) -> tuple[LayerRuntime, ...]:
        return tuple(layer for layer in self.layers if layer.precision_differs)

    @property
    def differing(self) -> tuple[LayerRuntime, ...]:
        """The layers fused differently or run at another precision, the largest time (either side) first."""
        return tuple(sorted((x for x in self.layers if x.fused_differently or x.precision_differs),
                            key=lambda x: (-max(x.before_us, x.after_us), x.layer_id)))


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
    #: Two runtimes measured the runs (see :func:`compare_runtimes`); ``None`` otherwise.
    runtimes: RuntimeComparison | None = None

    @property
    def renamed(self) -> tuple[LayerDelta, ...]:
        return tuple(d for d in self.layers if d.renamed)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _latency(run: RunFile, key: str) -> tuple[float | None, str]:
    value = _num(getattr(run.latency, key, None)) if run.latency is not None else None
    if value is not None:
        return value, "measured"
    if key == "p50_us":
        return _num(run.summary.est_latency_us), "estimate"
    return None, "-"


def _fps(run: RunFile) -> tuple[float | None, str]:
    fps = _num(run.latency.fps) if run.latency is not None else None
    if fps is not None:
        return fps, "measured"
    if _num(run.summary.est_fps) is not None:
        return _num(run.summary.est_fps), "estimate"
    return None, "-"


def _measurement_extra(run: RunFile, key: str) -> float | None:
    """A number a command added to the measurement section beyond the schema (``bench``: ``cpu_util``,
    ``peak_rss_bytes``)."""
    return _num(getattr(run.measurement, key, None)) if run.measurement is not None else None


def _utilization(run: RunFile) -> tuple[float | None, str]:
    cpu_util = _measurement_extra(run, "cpu_util")
    if cpu_util is not None:
        return cpu_util, "measured (CPU)"
    timeline = run.timeline.summary if run.timeline is not None else None
    if timeline is not None and timeline.busiest_unit_busy_us is not None and timeline.latency_us:
        return timeline.busiest_unit_busy_us / timeline.latency_us, f"estimate ({timeline.busiest_unit})"
    return None, "-"


def _fallbacks(run: RunFile) -> tuple[float | None, str]:
    if _num(run.summary.cpu_fallback_count) is not None:
        return _num(run.summary.cpu_fallback_count), "estimate"
    if any(layer.estimate is not None for layer in run.layers):
        return float(sum(1 for layer in run.layers if layer.est.fallback_reason)), "estimate"
    return None, "-"


def _memory(run: RunFile) -> tuple[float | None, str]:
    peak_rss = _measurement_extra(run, "peak_rss_bytes")
    if peak_rss is not None:
        return peak_rss, "measured (peak RSS)"
    memory = run.timeline.memory if run.timeline is not None else None
    if memory is not None and memory.minimum_requirement_bytes is not None:
        return float(memory.minimum_requirement_bytes), "estimate (memory plan)"
    return None, "-"


def _macs(run: RunFile) -> tuple[float | None, str]:
    return _num(run.summary.macs), "model"


METRICS: tuple[tuple[str, str, str, Callable[[RunFile], tuple[float | None, str]]], ...] = (
    ("latency P50", "us", "lower", lambda r: _latency(r, "p50_us")),
    ("latency P99", "us", "lower", lambda r: _latency(r, "p99_us")),
    ("FPS", "fps", "higher", _fps),
    ("utilization", "fraction", "higher", _utilization),
    ("CPU-fallback layers", "count", "lower", _fallbacks),
    ("peak memory", "bytes", "lower", _memory),
    ("MACs", "count", "lower", _macs),
)


def _signature(layer: Layer) -> tuple[Any, ...]:
    shapes = tuple(tuple(s) if isinstance(s, list) else None for s in layer.output_shapes)
    return (layer.op_type, shapes, layer.macs, layer.weight_bytes)


def compare_runs(before: RunFile | Mapping[str, Any], after: RunFile | Mapping[str, Any], *,
                 before_label: str = "before", after_label: str = "after") -> Comparison:
    """Compare ``before`` and ``after`` (typed runs, or their documents; see the module docstring)."""
    b_run, a_run = as_run(before, before_label), as_run(after, after_label)
    metrics = []
    for name, unit, better, getter in METRICS:
        (b, sb), (a, sa) = getter(b_run), getter(a_run)
        if b is not None or a is not None:
            metrics.append(MetricDelta(name, unit, b, a, sb, sa, better))
    measured = b_run.has_measurement and a_run.has_measurement
    a_by_id = {layer.id: layer for layer in a_run.layers}
    matched: list[LayerDelta] = []
    left_before = []
    for layer in b_run.layers:
        other = a_by_id.pop(layer.id, None)
        if other is None:
            left_before.append(layer)
        else:
            matched.append(_delta(layer, other, measured))
    left_after = [layer for layer in a_run.layers if layer.id in a_by_id]
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

    def rows(layers: list[Layer]) -> tuple[tuple[str, str, float], ...]:
        return tuple((x.id, str(x.op_type), x.time_us(prefer_measured=measured)) for x in layers)

    return Comparison(before_label, after_label, tuple(metrics), tuple(matched), rows(left_after), rows(removed),
                      "measured" if measured else "estimated", compare_runtimes(b_run, a_run))


def runtime_side(run: RunFile) -> RuntimeSide:
    """The runtime that measured ``run`` (empty fields where the run does not say)."""
    m = run.measurement
    if m is None:
        return RuntimeSide("", "", "")
    device = getattr(m, "device", None) or getattr(m, "provider", None) or ""
    return RuntimeSide(str(m.backend or ""), str(device), str(getattr(m, "precision", None) or ""))


def compare_runtimes(before: RunFile | Mapping[str, Any], after: RunFile | Mapping[str, Any]
                     ) -> RuntimeComparison | None:
    """The same model measured on two runtimes, lined up by layer id (see the module docstring); ``None`` unless
    both runs measured layers and their runtimes differ."""
    b_run, a_run = as_run(before, "before"), as_run(after, "after")
    if not (b_run.has_measurement and a_run.has_measurement):
        return None
    b_side, a_side = runtime_side(b_run), runtime_side(a_run)
    if b_side == a_side:
        return None
    a_by_id = {layer.id: layer for layer in a_run.layers}
    b_kernels, a_kernels = _kernel_precisions(b_run), _kernel_precisions(a_run)
    rows = []
    by_op: dict[str, list[float]] = {}
    for layer in b_run.layers:
        other = a_by_id.get(layer.id)
        if other is None:
            continue
        b_kernel, b_group, b_precision = _ran(layer, b_kernels, b_side.precision)
        a_kernel, a_group, a_precision = _ran(other, a_kernels, a_side.precision)
        row = LayerRuntime(layer.id, str(layer.op_type), layer.time_us(), other.time_us(), b_kernel, a_kernel,
                           b_group, a_group, b_precision, a_precision)
        rows.append(row)
        totals = by_op.setdefault(row.op_type, [0.0, 0.0])
        totals[0] += row.before_us
        totals[1] += row.after_us
    ops = sorted(((op, b, a) for op, (b, a) in by_op.items()), key=lambda item: (-max(item[1], item[2]), item[0]))
    return RuntimeComparison(b_side, a_side, tuple(rows), tuple(ops))


def _kernel_precisions(run: RunFile) -> dict[str, str]:
    return {k.name: k.precision for k in run.kernels or () if k.precision}


def _ran(layer: Layer, precisions: Mapping[str, str], default: str) -> tuple[str, tuple[str, ...], str]:
    """(kernel, fused group, precision) of a measured layer; an eliminated or unmeasured layer runs in none."""
    m = layer.measured
    if m is None or layer.eliminated:
        return "", (), ""
    kernel = m.kernel or ""
    group = tuple(m.fused_group) if m.fused_group else (layer.id,)
    # a runtime that reports no precision (ONNX Runtime) runs the layer in the model's own type
    return kernel, group, precisions.get(kernel, default) or _DTYPES.get(layer.dtype or "", layer.dtype or "")


#: ONNX element types as runtimes name precisions.
_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int8": "i8", "uint8": "u8",
           "int32": "i32", "int64": "i64"}


def _delta(before: Layer, after: Layer, measured: bool) -> LayerDelta:
    return LayerDelta(before.id, after.id, str(after.op_type),
                      before.time_us(prefer_measured=measured), after.time_us(prefer_measured=measured))


def _side(run: RunFile, label: str) -> dict[str, Any]:
    model = run.model
    return {"label": label, "model": model.name, "path": model.path, "sha256": model.sha256,
            "target": run.target_or_empty.name}


def comparison_section(cmp: Comparison, before: RunFile | Mapping[str, Any], after: RunFile | Mapping[str, Any]
                       ) -> dict[str, Any]:
    """The run file's ``comparison`` section (stored in the *after* run)."""

    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    return {
        "before": _side(as_run(before, cmp.before_label), cmp.before_label),
        "after": _side(as_run(after, cmp.after_label), cmp.after_label),
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
        **({"runtimes": _runtimes_section(cmp.runtimes)} if cmp.runtimes is not None else {}),
    }


def _runtimes_section(rt: RuntimeComparison) -> dict[str, Any]:
    return {
        "before": {"backend": rt.before.backend, "device": rt.before.device, "precision": rt.before.precision},
        "after": {"backend": rt.after.backend, "device": rt.after.device, "precision": rt.after.precision},
        "by_op": [{"op_type": op, "before_us": round(b, 3), "after_us": round(a, 3)} for op, b, a in rt.by_op],
        "layers": [{"id": x.layer_id, "op_type": x.op_type, "before_us": round(x.before_us, 3),
                    "after_us": round(x.after_us, 3), "before_kernel": x.before_kernel, "after_kernel": x.after_kernel,
                    "before_group": list(x.before_group), "after_group": list(x.after_group),
                    "before_precision": x.before_precision, "after_precision": x.after_precision,
                    "fused_differently": x.fused_differently} for x in rt.layers],
        "fused_differently": len(rt.fused_differently), "precision_differs": len(rt.precision_differs),
    }
