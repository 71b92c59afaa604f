"""Compare two runs: the before/after table users post (latency, FPS, P99, utilization, CPU-fallback count, peak
memory, MACs) and per-layer deltas matched by layer id.

Contract (pure functions of two typed runs):
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
  that eliminated a layer runs it in no group;
- *is it real* (:mod:`layerscope.analysis.compare_stats`): the end-to-end latency P50 (when both runs measured it)
  and every matched layer (when both runs measured layers) carry ``after - before`` with a 95% interval and a
  verdict (faster, slower, no change detectable at this noise), the interval widened by the steadiness of both
  runs (:attr:`Comparison.noise`); each side says which runtime, provider, threads and machine measured it and
  how steady it was (:class:`MeasuredSide`);
- *the gate* (:func:`gate`): a regression is a time judged slower whose change is above the threshold
  (``--fail-if-slower`` for the end-to-end latency, ``--fail-if-layer-slower`` for any matched layer), in percent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from layerscope.analysis.compare_stats import (
    LAYER_RESOLUTION_US,
    SLOWER,
    DeltaStat,
    RunNoise,
    delta_stat,
    latency_sample,
    layer_sample,
    noise_of,
    run_noise,
    unjudged,
)
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
    #: ``after - before`` with its interval and verdict (the end-to-end latency P50 of two measured runs only).
    stat: DeltaStat | None = None

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
    #: ``after - before`` with its interval and verdict (not judged when either time is an estimate).
    stat: DeltaStat | None = None

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
class MeasuredSide:
    """What measured one of the two runs, as text (``-``: the run does not say): runtime and version, provider
    (OpenVINO: the device), precision, intra-op threads, machine; and how steady it was."""

    runtime: str
    provider: str
    precision: str
    threads: str
    machine: str
    noise: RunNoise


@dataclass(frozen=True)
class Gate:
    """The CI gate: the thresholds (percent; ``None``: not asked) and one line per regression found."""

    fail_if_slower: float | None
    fail_if_layer_slower: float | None
    failures: tuple[str, ...]

    @property
    def regression(self) -> bool:
        return bool(self.failures)


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
    #: What measured each run, and how steady it was.
    before_side: MeasuredSide | None = None
    after_side: MeasuredSide | None = None
    #: The relative widening of every interval (:func:`layerscope.analysis.compare_stats.noise_of`).
    noise: float | None = None
    #: The gate's outcome, when thresholds were given (:func:`gate`).
    gate: Gate | None = None

    @property
    def latency(self) -> MetricDelta | None:
        """The end-to-end latency P50 row."""
        return next((m for m in self.metrics if m.name == LATENCY_P50), None)

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


#: The metric judged with an interval: the end-to-end latency.
LATENCY_P50 = "latency P50"

METRICS: tuple[tuple[str, str, str, Callable[[RunFile], tuple[float | None, str]]], ...] = (
    (LATENCY_P50, "us", "lower", lambda r: _latency(r, "p50_us")),
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


def compare_runs(before: RunFile, after: RunFile, *,
                 before_label: str = "before", after_label: str = "after") -> Comparison:
    """Compare ``before`` and ``after`` (see the module docstring)."""
    b_noise, a_noise = run_noise(before), run_noise(after)
    noise = noise_of(b_noise, a_noise)
    metrics = []
    for name, unit, better, getter in METRICS:
        (b, sb), (a, sa) = getter(before), getter(after)
        if b is not None or a is not None:
            metrics.append(MetricDelta(name, unit, b, a, sb, sa, better,
                                       _latency_stat(before, after, noise) if name == LATENCY_P50 else None))
    measured = before.has_measurement and after.has_measurement
    a_by_id = {layer.id: layer for layer in after.layers}
    matched: list[LayerDelta] = []
    left_before = []
    for layer in before.layers:
        other = a_by_id.pop(layer.id, None)
        if other is None:
            left_before.append(layer)
        else:
            matched.append(_delta(layer, other, measured, noise))
    left_after = [layer for layer in after.layers if layer.id in a_by_id]
    removed = []
    for layer in left_before:
        sig = _signature(layer)
        twin = next((o for o in left_after if _signature(o) == sig), None)
        if twin is None:
            removed.append(layer)
        else:
            left_after.remove(twin)
            matched.append(_delta(layer, twin, measured, noise))
    matched.sort(key=lambda d: (-abs(d.delta_us), d.before_id))

    def rows(layers: list[Layer]) -> tuple[tuple[str, str, float], ...]:
        return tuple((x.id, str(x.op_type), x.time_us(prefer_measured=measured)) for x in layers)

    return Comparison(before_label, after_label, tuple(metrics), tuple(matched), rows(left_after), rows(removed),
                      "measured" if measured else "estimated", compare_runtimes(before, after),
                      measured_side(before, b_noise), measured_side(after, a_noise), noise)


def _latency_stat(before: RunFile, after: RunFile, noise: float) -> DeltaStat | None:
    """The end-to-end P50's difference judged; not judged when a side has only an estimate."""
    b, a = latency_sample(before), latency_sample(after)
    if b is not None and a is not None:
        return delta_stat(b, a, noise)
    (b_us, _), (a_us, _) = _latency(before, "p50_us"), _latency(after, "p50_us")
    if b_us is None or a_us is None:
        return None
    return unjudged(b_us, a_us, "estimates only" if b is None and a is None else "one side is an estimate")


def measured_side(run: RunFile, noise: RunNoise) -> MeasuredSide:
    """What measured ``run`` (see :class:`MeasuredSide`)."""
    m = run.measurement
    if m is None:
        return MeasuredSide("-", "-", "-", "-", "-", noise)
    runtime = " ".join(str(part) for part in (m.backend, m.backend_version) if part) or "-"
    provider = str(getattr(m, "device", None) or m.provider or "-")
    threads = "runtime default" if not m.threads else str(m.threads)
    streams = getattr(m, "streams", None)
    if isinstance(streams, int) and streams > 1:
        threads += f" x {streams} streams"
    machine = m.machine.describe() if m.machine is not None else "-"
    return MeasuredSide(runtime, provider, str(getattr(m, "precision", None) or "-"), threads, machine, noise)


def gate(cmp: Comparison, fail_if_slower: float | None = None, fail_if_layer_slower: float | None = None
         ) -> Comparison:
    """``cmp`` with its :class:`Gate`: a regression is the end-to-end latency P50 judged slower by more than
    ``fail_if_slower`` percent, or a matched layer judged slower by more than ``fail_if_layer_slower`` percent."""
    failures = []
    latency = cmp.latency
    if fail_if_slower is not None and latency is not None and _over(latency.stat, fail_if_slower):
        assert latency.stat is not None
        failures.append(f"end-to-end {LATENCY_P50} {_judged(latency.stat)}, over --fail-if-slower {fail_if_slower:g}%")
    if fail_if_layer_slower is not None:
        failures += [f"layer {d.after_id} ({d.op_type}) {_judged(d.stat)}, over --fail-if-layer-slower "
                     f"{fail_if_layer_slower:g}%" for d in cmp.layers
                     if d.stat is not None and _over(d.stat, fail_if_layer_slower)]
    return replace(cmp, gate=Gate(fail_if_slower, fail_if_layer_slower, tuple(failures)))


def _over(stat: DeltaStat | None, percent: float) -> bool:
    change = stat.change if stat is not None else None
    return stat is not None and stat.verdict == SLOWER and change is not None and 100 * change > percent


def _judged(stat: DeltaStat) -> str:
    """``+312.4% slower (95% interval +290.0% to +335.0%)``."""
    low, high, change = stat.relative(stat.low_us), stat.relative(stat.high_us), stat.change or 0.0
    interval = f" (95% interval {100 * low:+.1f}% to {100 * high:+.1f}%)" if low is not None and high is not None \
        else ""
    return f"{100 * change:+.1f}% {stat.verdict}{interval}"


def runtime_side(run: RunFile) -> RuntimeSide:
    """The runtime that measured ``run`` (empty fields where the run does not say)."""
    m = run.measurement
    if m is None:
        return RuntimeSide("", "", "")
    device = getattr(m, "device", None) or getattr(m, "provider", None) or ""
    return RuntimeSide(str(m.backend or ""), str(device), str(getattr(m, "precision", None) or ""))


def compare_runtimes(before: RunFile, after: RunFile) -> RuntimeComparison | None:
    """The same model measured on two runtimes, lined up by layer id (see the module docstring); ``None`` unless
    both runs measured layers and their runtimes differ."""
    if not (before.has_measurement and after.has_measurement):
        return None
    b_side, a_side = runtime_side(before), runtime_side(after)
    if b_side == a_side:
        return None
    a_by_id = {layer.id: layer for layer in after.layers}
    b_kernels, a_kernels = _kernel_precisions(before), _kernel_precisions(after)
    rows = []
    by_op: dict[str, list[float]] = {}
    for layer in before.layers:
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


def _delta(before: Layer, after: Layer, measured: bool, noise: float) -> LayerDelta:
    b_us, a_us = before.time_us(prefer_measured=measured), after.time_us(prefer_measured=measured)
    b, a = layer_sample(before), layer_sample(after)
    if not measured:
        stat = unjudged(b_us, a_us, "estimates only")
    elif b is None or a is None:  # eliminated by the runtime (0 µs), or joined without a median
        stat = unjudged(b_us, a_us, "no measured median on both sides")
    else:
        stat = delta_stat(b, a, noise, resolution_us=LAYER_RESOLUTION_US)
    return LayerDelta(before.id, after.id, str(after.op_type), b_us, a_us, stat)


def _side(run: RunFile, label: str, measured: MeasuredSide | None) -> dict[str, Any]:
    model = run.model
    side: dict[str, Any] = {"label": label, "model": model.name, "path": model.path, "sha256": model.sha256,
                            "target": run.target_or_empty.name}
    if measured is None:
        return side
    noise = measured.noise
    return {**side, "measured": {
        "runtime": measured.runtime, "provider": measured.provider, "precision": measured.precision,
        "threads": measured.threads, "machine": measured.machine,
        "noise": {"recorded": noise.recorded, "moved": _round(noise.moved, 6), "text": noise.text}}}


def _round(value: float | None, ndigits: int = 3) -> float | None:
    return None if value is None else round(value, ndigits)


def _stat(stat: DeltaStat | None) -> dict[str, Any] | None:
    """A :class:`DeltaStat` as the section stores it (µs to the nanosecond)."""
    if stat is None:
        return None
    return {"before_us": round(stat.before_us, 3), "delta_us": round(stat.delta_us, 3),
            "low_us": _round(stat.low_us), "high_us": _round(stat.high_us),
            "systematic_us": round(stat.systematic_us, 3), "method": stat.method, "verdict": stat.verdict,
            "note": stat.note}


def comparison_section(cmp: Comparison, before: RunFile, after: RunFile) -> dict[str, Any]:
    """The run file's ``comparison`` section (stored in the *after* run): :class:`Comparison` field by field, each
    side with what measured it (``measured``), the widening ``noise`` and the ``gate`` when one was asked."""

    def r(value: float | None) -> float | None:
        return _round(value, 6)

    return {
        "before": _side(before, cmp.before_label, cmp.before_side),
        "after": _side(after, cmp.after_label, cmp.after_side),
        "time_source": cmp.time_source,
        **({"noise": round(cmp.noise, 6)} if cmp.noise is not None else {}),
        **({"gate": {"fail_if_slower": cmp.gate.fail_if_slower, "fail_if_layer_slower": cmp.gate.fail_if_layer_slower,
                     "regression": cmp.gate.regression, "failures": list(cmp.gate.failures)}}
           if cmp.gate is not None else {}),
        "metrics": [{"name": m.name, "unit": m.unit, "before": r(m.before), "after": r(m.after),
                     "change": r(m.change), "better": m.better, "source_before": m.source_before,
                     "source_after": m.source_after, **({"stat": _stat(m.stat)} if m.stat is not None else {})}
                    for m in cmp.metrics],
        "layers": [{"before_id": d.before_id, "after_id": d.after_id, "op_type": d.op_type,
                    "before_us": round(d.before_us, 3), "after_us": round(d.after_us, 3),
                    "delta_us": round(d.delta_us, 3), "renamed": d.renamed,
                    **({"stat": _stat(d.stat)} if d.stat is not None else {})} for d in cmp.layers],
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
