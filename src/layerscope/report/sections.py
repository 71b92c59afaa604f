"""Report sections as data: pure functions from a saved run to the rows, series and tracks every reporter shows.

The HTML report, the Markdown summary, the CSV table and the Perfetto trace are all drawn from these, so a
number is computed once and reads the same everywhere. Contract:

- every function takes the run as loaded (``layerscope.run.load_run``) and never measures or reads files;
- a run may hold an estimate, a measurement, a timeline, an import, or any mix: each function returns
  what the run holds and ``None`` / empty where it holds nothing; :func:`missing_notes` says what is absent
  and which command fills it;
- values a vendor did not report are ``null`` in the run and ``None`` here, never 0;
- the output depends only on the run: the same run gives the same sections, in the same order.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.runfile.derived import (
    fused_group,
    layer_estimated_us,
    layer_measured_us,
    layer_shares,
    steadiness_text,
    time_basis,
)
from layerscope.runfile.derived import scale_factor as runfile_scale_factor
from layerscope.runfile.io import stress_thresholds
from layerscope.stats import summarize

if TYPE_CHECKING:  # imported where used: the analysis package pulls in the target profiles
    from layerscope.analysis.compare import MetricDelta

Run = Mapping[str, Any]


# --------------------------------------------------------------------------------------------------- values


def num(value: Any) -> float | None:
    """``value`` as a float when it is a number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def measured_us(layer: Mapping[str, Any]) -> float | None:
    """A layer's measured time, as :func:`layerscope.runfile.layer_measured_us` defines it (0 when eliminated)."""
    return layer_measured_us(layer)


def estimated_us(layer: Mapping[str, Any]) -> float | None:
    """A layer's estimated latency, ``None`` when the run holds no estimate for it."""
    return layer_estimated_us(layer)


def shape_text(shape: Sequence[Any] | None) -> str:
    """``[1, 3, 640, 640]`` -> ``"1x3x640x640"``; a scalar is ``"scalar"``; unknown is ``"?"``."""
    if shape is None:
        return "?"
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


# --------------------------------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class LayerRow:
    """One layer as the reports show it. ``share`` is of the total on ``basis`` (measured, else estimated)."""

    index: int
    id: str
    name: str
    op_type: str
    domain: str
    input_shapes: tuple[str, ...]
    output_shapes: tuple[str, ...]
    macs: float | None
    flops: float | None
    est_us: float | None
    meas_us: float | None
    ratio: float | None
    share: float | None
    bound: str | None
    unit: str | None
    core: int | None
    status: str | None
    fused_group: tuple[str, ...]
    split: bool
    kernel: str | None
    fallback_reason: str | None
    detail: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def share_basis(run: Run) -> str | None:
    """``"measured"`` when any layer has a measured time, ``"estimated"`` when any has an estimate, else ``None``
    (:func:`layerscope.runfile.time_basis`)."""
    return time_basis(run)


def tensor_shapes(run: Run) -> dict[str, list[Any]]:
    """Tensor name -> shape for the model inputs and every layer output the run knows."""
    shapes: dict[str, list[Any]] = {}
    for tensor in (run.get("model") or {}).get("inputs") or []:
        if tensor.get("shape") is not None:
            shapes[tensor["name"]] = tensor["shape"]
    for layer in run.get("layers") or []:
        for name, shape in zip(layer.get("outputs") or [], layer.get("output_shapes") or [], strict=False):
            if shape is not None:
                shapes[name] = shape
    return shapes


def _timeline_layers(run: Run) -> dict[str, Mapping[str, Any]]:
    return {t["id"]: t for t in (run.get("timeline") or {}).get("layers") or []}


def layer_rows(run: Run) -> list[LayerRow]:
    """Every layer of the run, in the run's (graph) order, with estimate and measurement side by side."""
    layers = run.get("layers") or []
    shares = layer_shares(layers, share_basis(run))
    groups: dict[str, tuple[str, ...]] = {}
    shapes = tensor_shapes(run)
    placed = _timeline_layers(run)
    rows = []
    for index, layer in enumerate(layers):
        est, meas = estimated_us(layer), measured_us(layer)
        estimate = layer.get("estimate") or {}
        measured = layer.get("measured") or {}
        slot = placed.get(layer["id"], {})
        rows.append(LayerRow(
            index=index,
            id=str(layer["id"]),
            name=str(layer.get("name") or layer["id"]),
            op_type=str(layer.get("op_type") or "?"),
            domain=str(layer.get("domain") or ""),
            input_shapes=tuple(shape_text(shapes[i]) for i in layer.get("inputs") or [] if i in shapes),
            output_shapes=tuple(shape_text(s) for s in layer.get("output_shapes") or []),
            macs=num(layer.get("macs")),
            flops=num(layer.get("flops")),
            est_us=est,
            meas_us=meas,
            ratio=meas / est if meas is not None and est else None,
            share=shares[index],
            bound=estimate.get("bound"),
            unit=estimate.get("unit") or layer.get("unit"),
            core=slot.get("core"),
            status=measured.get("status") or ("measured" if measured else None),
            fused_group=fused_group(run, measured, groups),
            split=bool(measured.get("split")),
            kernel=measured.get("kernel"),
            fallback_reason=estimate.get("fallback_reason"),
            detail=_layer_detail(layer, slot),
        ))
    return rows


_COST_KEYS = ("macs", "flops", "params", "bytes_read", "bytes_read_act", "bytes_read_weight", "bytes_written",
              "weight_bytes", "dtype", "unit_kind", "known")


def _layer_detail(layer: Mapping[str, Any], slot: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The groups a layer's detail view shows; keys with ``null`` values are left out."""
    groups = {
        "layer": {"id": layer.get("id"), "name": layer.get("name"), "op_type": layer.get("op_type"),
                  "domain": layer.get("domain") or None, "inputs": layer.get("inputs"),
                  "outputs": layer.get("outputs"), "shape_source": layer.get("shape_source"),
                  "parent": layer.get("parent"), "executions": layer.get("executions"),
                  **{f"observed {k}": v for k, v in (layer.get("observed") or {}).items() if k != "source"}},
        "cost": {k: layer.get(k) for k in _COST_KEYS},
        "estimate": dict(layer.get("estimate") or {}),
        "timeline": {k: v for k, v in slot.items() if k != "id"},
        "measured": dict(layer.get("measured") or {}),
    }
    return {name: kept for name, values in groups.items()
            if (kept := {k: v for k, v in values.items() if v is not None and v != []})}


# --------------------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Row:
    """One line of a summary section: a label and its value, formatted for reading."""

    label: str
    value: str


@dataclass(frozen=True)
class Section:
    """A titled group of summary rows; ``note`` is a sentence shown under it (e.g. "an estimate")."""

    title: str
    rows: tuple[Row, ...]
    note: str | None = None


@dataclass(frozen=True)
class Metric:
    """A headline number: label, value and a short qualifier (its source)."""

    label: str
    value: str
    sub: str


def _section(title: str, rows: Iterable[tuple[str, str | None]], note: str | None = None) -> Section | None:
    kept = tuple(Row(label, value) for label, value in rows if value not in (None, ""))
    return Section(title, kept, note) if kept else None


def headline(run: Run) -> list[Metric]:
    """The numbers at the top of the report: measured percentiles and FPS, estimate, MACs, fallbacks, coverage."""
    metrics: list[Metric] = []
    lat = run.get("latency") or {}
    source = "measured" + (f", {lat['samples']} runs" if lat.get("samples") else "")
    for key, label in (("p50_us", "P50"), ("p90_us", "P90"), ("p99_us", "P99")):
        if num(lat.get(key)) is not None:
            metrics.append(Metric(label, human_us(lat[key]), source))
    if num(lat.get("p50_us")) is None and num(lat.get("mean_us")) is not None:
        metrics.append(Metric("mean", human_us(lat["mean_us"]), source))
    if num(lat.get("fps")) is not None:
        metrics.append(Metric("FPS", f"{lat['fps']:.1f}", source))
    summary = run.get("summary") or {}
    timeline = (run.get("timeline") or {}).get("summary") or {}
    if num(timeline.get("latency_us")) is not None:
        metrics.append(Metric("est. latency", human_us(timeline["latency_us"]), "estimate, timeline"))
        if num(timeline.get("fps_total")) is not None:
            metrics.append(Metric("est. FPS", f"{timeline['fps_total']:.1f}", "estimate, all cores"))
    elif num(summary.get("est_latency_us")) is not None:
        metrics.append(Metric("est. latency", human_us(summary["est_latency_us"]), "estimate"))
        if num(summary.get("est_fps")) is not None:
            metrics.append(Metric("est. FPS", f"{summary['est_fps']:.1f}", "estimate"))
    if num(summary.get("macs")) is not None:
        metrics.append(Metric("MACs", human_count(summary["macs"]), "per run"))
    if summary.get("cpu_fallback_count") is not None:
        metrics.append(Metric("CPU fallback", str(summary["cpu_fallback_count"]), "layers"))
    coverage = num((run.get("measurement") or {}).get("coverage"))
    if coverage is not None:
        metrics.append(Metric("coverage", _pct(coverage), "of each run in kernels"))
    return metrics


def summary_sections(run: Run) -> list[Section]:
    """The Summary tab's sections, in reading order; a section the run has no data for is left out."""
    builders = (_model_section, _target_section, _runtime_section, _latency_section, _compute_section,
                _memory_section, _layers_section, _instrument_section, _import_section)
    return [section for build in builders if (section := build(run)) is not None]


def _model_section(run: Run) -> Section | None:
    model = run.get("model") or {}
    tensors = ", ".join(f"{t['name']} {shape_text(t.get('shape'))} {t.get('dtype') or ''}".strip()
                        for t in model.get("inputs") or [])
    outputs = ", ".join(f"{t['name']} {shape_text(t.get('shape'))}" for t in model.get("outputs") or [])
    return _section("Model", [
        ("name", model.get("name")),
        ("file", model.get("path")),
        ("sha256", model.get("sha256")),
        ("opset", str(model["opset"]) if model.get("opset") is not None else None),
        ("producer", model.get("producer")),
        ("inputs", tensors),
        ("outputs", outputs),
        ("assumed", "; ".join(model.get("assumptions") or []) or None),
        ("shapes", _sources_text(model.get("shape_sources") or {})),
        ("note", model.get("note")),
    ])


def _sources_text(sources: Mapping[str, Any]) -> str | None:
    """``"3 static, 5 executed"``, where a shape came from anything but static inference; else ``None``."""
    if not any(sources.get(k) for k in ("symbolic", "executed")):
        return None
    return ", ".join(f"{sources[k]} {k}" for k in ("static", "symbolic", "executed") if sources.get(k))


def _target_section(run: Run) -> Section | None:
    target = run.get("target") or {}
    info = run.get("estimate_info") or {}
    if not target and not info:
        return None
    return _section("Estimate target", [
        ("profile", target.get("name")),
        ("kind", target.get("kind")),
        ("description", target.get("description")),
        ("dtype", target.get("dtype")),
        ("method", info.get("method")),
    ], note=f"ESTIMATE: {info['note']}." if info.get("note") else None)


def _runtime_section(run: Run) -> Section | None:
    m = run.get("measurement") or {}
    if not m:
        return None
    machine = m.get("machine") or {}
    machine_text = ", ".join(str(v) for v in (machine.get("hostname"), machine.get("cpu"),
                                              f"{machine['cores']} cores" if machine.get("cores") else None,
                                              machine.get("os")) if v)
    threads = m.get("threads")
    return _section("Runtime (measurement)", [
        ("backend", " ".join(str(v) for v in (m.get("backend"), m.get("backend_version")) if v)),
        ("provider", m.get("provider")),
        ("threads", None if threads is None else (str(threads) if threads else "default")),
        ("opt level", m.get("opt_level")),
        ("runs", " ".join(p for p in (f"{m['runs']} measured" if m.get("runs") else "",
                                      f"{m['warmup']} warm-up" if m.get("warmup") else "") if p)),
        ("machine", machine_text),
        ("python", machine.get("python")),
        ("created", m.get("created_utc")),
        ("source", m.get("source")),
    ], note="INTERRUPTED: fewer runs than asked were measured." if m.get("interrupted") else None)


_PERCENTILES = (("p50_us", "P50"), ("p90_us", "P90"), ("p99_us", "P99"), ("p999_us", "P99.9"), ("mean_us", "mean"),
                ("min_us", "min"), ("max_us", "max"))


def _latency_section(run: Run) -> Section | None:
    lat = run.get("latency") or {}
    summary = run.get("summary") or {}
    timeline = (run.get("timeline") or {}).get("summary") or {}
    rows: list[tuple[str, str | None]] = []
    percentiles = "  ".join(f"{label} {human_us(lat[key])}" for key, label in _PERCENTILES
                            if num(lat.get(key)) is not None)
    rows.append(("measured", percentiles or None))
    if num(lat.get("fps")) is not None:
        rows.append(("measured FPS", f"{lat['fps']:.1f}" + (f" ({lat['source']})" if lat.get("source") else "")))
    if num(summary.get("accelerator_us")) is not None:
        rows.append(("accelerator", f"{human_us(summary['accelerator_us'])} per inference (measured by the vendor)"))
    if num(summary.get("est_latency_us")) is not None:
        fps = f"  ({summary['est_fps']:.1f} FPS)" if num(summary.get("est_fps")) is not None else ""
        rows.append(("estimated, layer by layer", human_us(summary["est_latency_us"]) + fps))
    if num(timeline.get("latency_us")) is not None:
        fps_core, fps_total = timeline.get("fps_per_core") or 0.0, timeline.get("fps_total") or 0.0
        rows.append(("estimated, timeline",
                     f"{human_us(timeline['latency_us'])}  ({fps_core:.1f} FPS per core, {fps_total:.1f} total)"))
    k = scale_factor(run)
    if k is not None:
        rows.append(("k = measured / estimated", f"{k.value:.3f}  ({k.source})"))
        if k.warning:
            rows.append(("k WARNING", k.warning))
    return _section("Latency", rows)


def _fmt(value: Any, fmt: Any, suffix: str = "") -> str | None:
    """``fmt(value) + suffix`` when ``value`` is a number, else ``None``."""
    return None if num(value) is None else f"{fmt(value)}{suffix}"


def _compute_section(run: Run) -> Section | None:
    s = run.get("summary") or {}
    timeline = (run.get("timeline") or {}).get("summary") or {}
    macs = _fmt(s.get("macs"), human_count, " total")
    if macs and num(s.get("tensor_macs")) is not None:
        macs += f", {human_count(s['tensor_macs'])} conv/matmul"
    busiest = timeline.get("busiest_unit")
    return _section("Compute and traffic", [
        ("MACs", macs),
        ("FLOPs", _fmt(s.get("flops"), human_count)),
        ("params", _fmt(s.get("params"), human_count)),
        ("weights", _fmt(s.get("weight_bytes"), human_bytes, " as stored in the model")),
        ("DDR traffic", _fmt(s.get("ddr_bytes"), human_bytes, " per run (estimate)")),
        ("bound by", timeline.get("bound")),
        ("busiest unit", f"{busiest} ({human_us(timeline.get('busiest_unit_busy_us') or 0)} busy)" if busiest
         else None),
    ])


#: Horizon's memory categories: run-file key, label (Horizon's summary names).
HORIZON_MEMORY_ROWS: tuple[tuple[str, str], ...] = (
    ("static_bytes", "static (weights)"),
    ("input_bytes", "model input"),
    ("output_bytes", "model output"),
    ("shared_temporary_bytes", "shared temporary"),
    ("exclusive_intermediate_bytes", "exclusive intermediate"),
    ("minimum_requirement_bytes", "minimum requirement"),
)
#: The memory plan's rows in the reports: Horizon's categories, then the on-chip peak.
MEMORY_ROWS: tuple[tuple[str, str], ...] = (*HORIZON_MEMORY_ROWS, ("on_chip_peak_bytes", "on-chip peak (SRAM)"))


def _memory_section(run: Run) -> Section | None:
    memory = (run.get("timeline") or {}).get("memory") or {}
    frames = memory.get("frames_in_flight")
    return _section("Memory (estimate)", [
        (label, human_bytes(memory[key])) for key, label in MEMORY_ROWS if num(memory.get(key)) is not None],
        note=f"minimum requirement = static + shared temporary + {frames} frame(s) in flight x (input + output + "
             "exclusive intermediate)" if frames else None)


def _layers_section(run: Run) -> Section | None:
    s = run.get("summary") or {}
    layers = run.get("layers") or []
    statuses = Counter(layer["measured"].get("status") or "measured" for layer in layers if layer.get("measured"))
    fallbacks = [layer for layer in layers if (layer.get("estimate") or {}).get("fallback_reason")]
    reasons = Counter(layer["estimate"]["fallback_reason"] for layer in fallbacks)
    unknown = ", ".join(f"{u['op_type']} x{u['count']}" for u in run.get("unknown_ops") or [])
    kernels = run.get("kernels") or []
    fallback_text = f"{len(fallbacks)} layer(s)"
    if fallbacks:
        fallback_text += ": " + "; ".join(f"{n} x {r}" for r, n in reasons.most_common(5))
    return _section("Layers", [
        ("layers", f"{len(layers)} runtime layers" + (f", {s['folded_count']} constant nodes folded"
                                                      if s.get("folded_count") else "")
         + (f", {s['zero_copy_count']} zero-copy" if s.get("zero_copy_count") else "")),
        ("measured", ", ".join(f"{n} {status}" for status, n in sorted(statuses.items(), key=lambda kv: str(kv[0])))
         or None),
        ("kernels", f"{len(kernels)} runtime kernels" if kernels else None),
        ("CPU fallback", fallback_text if any(layer.get("estimate") for layer in layers) else None),
        ("unknown ops", unknown or ("none" if "unknown_ops" in run else None)),
    ])


def _instrument_section(run: Run) -> Section | None:
    m = run.get("measurement") or {}
    if not m:
        return None
    coverage, overhead, mapped = num(m.get("coverage")), num(m.get("overhead")), num(m.get("mapped_share"))
    return _section("Instrument", [
        ("coverage", f"{_pct(coverage)} of each profiled run is inside kernels" if coverage is not None else None),
        ("profiling overhead", f"{100 * overhead:+.1f}% run time with the profiler on (percentiles are without it)"
         if overhead is not None else None),
        ("mapped", f"{_pct(mapped)} of kernel time mapped to source layers" if mapped is not None else None),
        ("unmapped kernels", ", ".join(m.get("unmapped_kernels") or []) or ("none" if mapped is not None else None)),
        ("eliminated layers", ", ".join(m.get("eliminated_layers") or []) or None),
        ("steadiness", steadiness_text(m["steadiness"]) if m.get("steadiness") else None),
    ])


def _import_section(run: Run) -> Section | None:
    imported = run.get("import") or {}
    if not imported:
        return None
    rows: list[tuple[str, str | None]] = [
        ("file", f"{f.get('name')}: {f.get('format')} ({f.get('tool')}), {f.get('entries')} entries"
                 + (f", {len(f['warnings'])} warning(s)" if f.get("warnings") else ""))
        for f in imported.get("files") or []]
    unmatched = imported.get("unmatched") or []
    rows.append(("joined", f"{imported.get('joined')} of {imported.get('entries')} entries"
                           + ("" if imported.get("joined_to_model") else " (no model given)")))
    rows.extend(("unmatched", f"{u.get('name')}: {u.get('reason') or 'no reason given'}") for u in unmatched[:10])
    if len(unmatched) > 10:
        rows.append(("unmatched", f"... and {len(unmatched) - 10} more (see the run file)"))
    return _section("Import", rows)


def missing_notes(run: Run) -> list[str]:
    """What the run does not hold, each with the command that adds it."""
    layers = run.get("layers") or []
    notes = []
    if not any(estimated_us(layer) is not None for layer in layers):
        notes.append("No per-layer estimate: `layerscope estimate MODEL --json run.json` adds one.")
    elif "timeline" not in run:
        # The run's own model and target, shell-quoted (no backtick: the note's code spans are backticked)
        model = shlex.quote(str((run.get("model") or {}).get("path") or "MODEL").replace("`", "'"))
        target = shlex.quote(str((run.get("target") or {}).get("name") or "T").replace("`", "'"))
        notes.append(f"No timeline: `layerscope estimate {model} --target {target} --timeline --json run.json` "
                     "adds the schedule per unit and core, DDR bandwidth over time and the memory plan to this run "
                     "(its measured sections are kept); `layerscope profile MODEL --target T --timeline -o "
                     "run.json` measures and schedules in one run.")
    if not any(layer.get("measured") for layer in layers):
        notes.append("No per-layer measurement: `layerscope profile MODEL -o run.json` measures every layer on "
                     "ONNX Runtime; `layerscope import` reads a vendor profiler's files.")
    elif not (run.get("measurement") or {}).get("median_run"):
        notes.append("No kernel events: the measurement keeps per-layer totals only (no timeline of one run).")
    lat = run.get("latency") or {}
    if num(lat.get("p50_us")) is None:
        notes.append("No end-to-end latency percentiles: `layerscope profile` or `layerscope bench` measure them.")
    if not (run.get("model") or {}).get("path"):
        notes.append("No ONNX model: the layers are the vendor's entries (import with --model to join them).")
    if "findings" not in run:
        notes.append("No findings: the run has not been analysed for advice yet.")
    return notes


# --------------------------------------------------------------------------------------------------- findings


@dataclass(frozen=True)
class FindingRow:
    """A finding as the reports list it (``run["findings"]``, when an analysis added them)."""

    severity: str
    rule: str
    layers: tuple[str, ...]
    hazard: str
    mitigation: str
    expected_gain: str


_SEVERITY_ORDER = {"critical": 0, "high": 1, "error": 1, "medium": 2, "warning": 2, "low": 3, "info": 4}


def findings(run: Run, top: int | None = None) -> list[FindingRow]:
    """The run's findings (``findings.items``, read by :meth:`Finding.from_dict`: the one stored form), most
    severe first, then in the run's order. An expected gain in µs reads as a time."""
    from layerscope.analysis.findings import Finding

    section = run.get("findings") or {}
    items = section.get("items") or [] if isinstance(section, Mapping) else []
    rows = []
    for item in items:
        finding = Finding.from_dict(item)
        rows.append(FindingRow(
            severity=finding.severity.value,
            rule=finding.rule_id,
            layers=finding.layer_ids,
            hazard=finding.hazard,
            mitigation=finding.mitigation,
            expected_gain="" if finding.expected_gain_us is None else human_us(finding.expected_gain_us) + (
                " (measured)" if finding.evidence.get("gain_source") == "measured" else ""),
        ))
    rows.sort(key=lambda f: _SEVERITY_ORDER.get(f.severity.lower(), 5))
    return rows[:top] if top is not None else rows


# --------------------------------------------------------------------------------------------------- charts


@dataclass(frozen=True)
class ScaleFactor:
    """k = measured / estimated, where it comes from, and the warning when the measurement ran on another device
    than the estimate's target."""

    value: float
    source: str
    warning: str | None = None


def scale_factor(run: Run) -> ScaleFactor | None:
    """k as :func:`layerscope.runfile.scale_factor` defines it (the same number ``reconcile`` prints)."""
    k = runfile_scale_factor(run)
    if k is None:
        return None
    return ScaleFactor(k.k, k.source, k.mismatch)


@dataclass(frozen=True)
class OpTotal:
    """Time of one op type, summed over its layers."""

    op_type: str
    count: int
    est_us: float | None
    meas_us: float | None


def op_type_totals(rows: Sequence[LayerRow]) -> list[OpTotal]:
    """Time per op type, largest first (by measured time when there is one, else estimated); ties by name."""
    groups: dict[str, list[LayerRow]] = {}
    for row in rows:
        groups.setdefault(row.op_type, []).append(row)
    totals = [OpTotal(op, len(members), _sum(r.est_us for r in members), _sum(r.meas_us for r in members))
              for op, members in groups.items()]
    totals.sort(key=lambda t: (-(t.meas_us if t.meas_us is not None else t.est_us or 0.0), t.op_type))
    return totals


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def top_layers(rows: Sequence[LayerRow], n: int) -> list[LayerRow]:
    """The ``n`` slowest layers, by measured time when any layer has one, else by estimate; ties by index."""
    measured = any(r.meas_us is not None for r in rows)

    def key(row: LayerRow) -> tuple[float, int]:
        value = row.meas_us if measured else row.est_us
        return (-(value or 0.0), row.index)

    return sorted((r for r in rows if (r.meas_us if measured else r.est_us) is not None), key=key)[:n]


# --------------------------------------------------------------------------------------------------- graph


@dataclass(frozen=True)
class GraphLayout:
    """Layers placed in layers of a DAG: ``position[i] = (column, depth)``; ``edges`` are (producer, consumer)."""

    position: tuple[tuple[float, int], ...]
    edges: tuple[tuple[int, int], ...]


def graph_edges(run: Run) -> list[tuple[int, int]]:
    """(producer, consumer) layer indices through the tensors they share; each pair once, sorted."""
    layers = run.get("layers") or []
    producer: dict[str, int] = {}
    for index, layer in enumerate(layers):
        for name in layer.get("outputs") or []:
            producer.setdefault(name, index)
    edges = {(producer[name], index) for index, layer in enumerate(layers) for name in layer.get("inputs") or []
             if name in producer and producer[name] != index}
    return sorted(edges)


def graph_layout(run: Run) -> GraphLayout:
    """A simple layered layout: depth = longest path from an input; in a depth, layers ordered by the mean
    column of their producers (one barycentre pass) and centred on 0. Deterministic."""
    count = len(run.get("layers") or [])
    edges = graph_edges(run)
    preds: list[list[int]] = [[] for _ in range(count)]
    for src, dst in edges:
        preds[dst].append(src)
    depth = [0] * count
    for index in range(count):  # the run's layers are in topological order; a back edge is ignored
        depth[index] = max((depth[p] + 1 for p in preds[index] if p < index), default=0)
    by_depth: dict[int, list[int]] = {}
    for index in range(count):
        by_depth.setdefault(depth[index], []).append(index)
    column = [0.0] * count
    for level in sorted(by_depth):
        members = by_depth[level]
        members.sort(key=lambda i: (_mean([column[p] for p in preds[i] if p < i], default=0.0), i))
        offset = (len(members) - 1) / 2
        for rank, index in enumerate(members):
            column[index] = rank - offset
    return GraphLayout(tuple((column[i], depth[i]) for i in range(count)), tuple(edges))


def _mean(values: Sequence[float], default: float) -> float:
    return sum(values) / len(values) if values else default


# --------------------------------------------------------------------------------------------------- timelines


@dataclass(frozen=True)
class Slice:
    """One busy interval on a track: what ran (``name``), the layer index it belongs to, extra labels."""

    start_us: float
    end_us: float
    name: str
    layer: int | None = None
    args: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Track:
    """A named row of slices: a unit of a core (estimated) or a thread (measured)."""

    name: str
    slices: tuple[Slice, ...]


@dataclass(frozen=True)
class Tracks:
    """Tracks of one kind with how they were made (``source``) and a sentence for the reader."""

    source: str
    note: str
    tracks: tuple[Track, ...]

    @property
    def end_us(self) -> float:
        """The end of the last slice (0 when empty)."""
        return max((s.end_us for t in self.tracks for s in t.slices), default=0.0)


def estimated_tracks(run: Run) -> Tracks | None:
    """Estimated layers per unit and core: the timeline's busy intervals, else the roofline's layers one after
    another on their units (``source == "serial"``); ``None`` when the run holds no estimate."""
    timeline = run.get("timeline")
    index = {layer["id"]: i for i, layer in enumerate(run.get("layers") or [])}
    if timeline and timeline.get("units"):
        tracks = []
        for unit in timeline["units"]:
            slices = tuple(Slice(b["start_us"], b["end_us"], str(b["layer"]), index.get(b["layer"]))
                           for b in unit.get("busy") or [])
            if slices:
                tracks.append(Track(f"core {unit.get('core', 0)} · {unit['name']}", slices))
        return Tracks("timeline", f"ESTIMATE: {timeline.get('note') or 'static schedule'}", tuple(tracks))
    return _serial_tracks(run, index)


def _serial_tracks(run: Run, index: Mapping[str, int]) -> Tracks | None:
    layers = run.get("layers") or []
    if not any(estimated_us(layer) is not None for layer in layers):
        return None
    per_unit: dict[str, list[Slice]] = {}
    clock = 0.0
    for layer in layers:
        est = estimated_us(layer)
        if est is None:
            continue
        unit = str((layer.get("estimate") or {}).get("unit") or layer.get("unit") or "?")
        per_unit.setdefault(unit, []).append(Slice(clock, clock + est, str(layer["id"]), index.get(layer["id"])))
        clock += est
    tracks = tuple(Track(unit, tuple(slices)) for unit, slices in per_unit.items())
    return Tracks("serial", "ESTIMATE: layers one after another (the roofline's sum); estimate --timeline "
                            "schedules them over units and cores", tracks)


def measured_tracks(run: Run) -> Tracks | None:
    """Measured kernels per thread from the median run's events; ``None`` when the run has no kernel events."""
    m = run.get("measurement") or {}
    events = m.get("median_run") or []
    if not events:
        return None
    kernels = {k["name"]: k for k in run.get("kernels") or []}
    index = {layer["id"]: i for i, layer in enumerate(run.get("layers") or [])}
    threads: dict[Any, list[Slice]] = {}
    for event in events:
        kernel = kernels.get(event["name"], {})
        mapped = [str(x) for x in kernel.get("layers") or []]
        args = tuple((k, v) for k, v in (("op_type", kernel.get("op_type")), ("category", kernel.get("category")),
                                         ("layers", ", ".join(mapped) or None)) if v)
        start = float(event["start_us"])
        threads.setdefault(event.get("thread", 0), []).append(
            Slice(start, start + float(event["duration_us"]), str(event["name"]),
                  index.get(mapped[0]) if mapped else None, args))
    tracks = tuple(Track(f"thread {tid}", tuple(sorted(slices, key=lambda s: (s.start_us, -s.end_us, s.name))))
                   for tid, slices in sorted(threads.items(), key=lambda kv: str(kv[0])))
    source = " ".join(str(v) for v in (m.get("backend"), m.get("backend_version"), m.get("provider")) if v)
    return Tracks("median_run", f"MEASURED: kernels of the median profiled run ({source})", tracks)


@dataclass(frozen=True)
class Temporal:
    """Per-interval series of one estimated frame: DDR MB/s, DDR utilization and each unit's utilization.

    ``ddr_utilization``: busy share of the effective (attainable) bandwidth; ``ddr_nominal_utilization``:
    load + store over the part's nominal bandwidth (empty when the profile states none).
    """

    interval_us: float
    starts_us: tuple[float, ...]
    ddr_load_mb_per_s: tuple[float, ...]
    ddr_store_mb_per_s: tuple[float, ...]
    ddr_utilization: tuple[float, ...]
    utilization: tuple[tuple[str, tuple[float, ...]], ...]
    ddr_nominal_utilization: tuple[float, ...] = ()
    ddr_nominal_bytes_per_s: float | None = None
    ddr_effective_bytes_per_s: float | None = None


def temporal(run: Run) -> Temporal | None:
    """The timeline's temporal statistics; units that are never busy are left out; ``None`` without a timeline."""
    timeline = run.get("timeline") or {}
    t = timeline.get("temporal")
    if not t or not t.get("intervals"):
        return None
    step = float(t["interval_us"])
    count = int(t["intervals"])
    return Temporal(
        interval_us=step,
        starts_us=tuple(round(i * step, 3) for i in range(count)),
        ddr_load_mb_per_s=tuple(t.get("ddr_load_mb_per_s") or ()),
        ddr_store_mb_per_s=tuple(t.get("ddr_store_mb_per_s") or ()),
        ddr_utilization=tuple(t.get("ddr_utilization") or ()),
        utilization=tuple((unit, tuple(values)) for unit, values in sorted((t.get("utilization") or {}).items())
                          if any(values)),
        ddr_nominal_utilization=tuple(t.get("ddr_nominal_utilization") or ()),
        ddr_nominal_bytes_per_s=num(timeline.get("ddr_nominal_bytes_per_s")),
        ddr_effective_bytes_per_s=num(timeline.get("ddr_effective_bytes_per_s")),
    )


# steadiness_text and unsteady: defined once in layerscope.runfile.derived.


# --------------------------------------------------------------------------------------------------- experiments
#
# The sections later commands add to a run (``bisect``, ``comparison``, ``pipeline``, ``stress``), as the HTML
# report's Experiments tab shows them. Each builder returns ``None`` when the run lacks its section and reads every
# key with ``.get``: runs from older versions, or a section cut short, give fewer rows, never an error.

#: A bisect's statistic -> (what it takes of a set of runs, how an increment is made of it).
BISECT_STATISTICS: Mapping[str, tuple[str, str]] = {
    "median": ("median", "median of the paired differences of neighbouring models"),
    "p10": ("10th percentile", "p10: difference of the neighbouring models' 10th-percentile rounds"),
    "min": ("minimum", "min: difference of the neighbouring models' fastest rounds"),
}
#: Validation of a bisect: segments with at least this share of the time are judged.
BISECT_LARGE_SHARE = 0.05
#: ... and should be within this relative error of the kernel profile.
BISECT_GOAL_ERROR = 0.15
#: A segment's note names the boundary correction when it is at least this share of the increment as timed.
BISECT_BOUNDARY_NOTE = 0.05
#: Per-layer rows the comparison shows (largest |delta| first).
COMPARISON_TOP = 30
#: Layers listed by name under renamed / added / removed (the counts are always complete).
COMPARISON_NAMES = 100
#: Layers the stress table shows (highest ratio first; memory-sensitive ones always).
STRESS_TOP = 30
#: Rows of the pipeline's top items.
PIPELINE_TOP = 15


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def format_metric(m: MetricDelta, value: float | None) -> str:
    """A metric value in its unit, human-readable."""
    if value is None:
        return "-"
    if m.unit == "us":
        return human_us(value)
    if m.unit == "bytes":
        return human_bytes(value)
    if m.unit == "fraction":
        return f"{100 * value:.1f}%"
    if m.unit == "fps":
        return f"{value:.1f}"
    if m.name == "MACs":
        return human_count(value)
    return f"{value:.0f}"


def change_text(m: MetricDelta) -> tuple[str, str]:
    """The relative change and whether it is an improvement (``"better"``, ``"worse"``, ``""``)."""
    change = m.change
    if change is None:
        if m.before is not None and m.after is not None and m.before == m.after:
            return "0", ""
        if m.before == 0 and m.after is not None:
            return f"{m.after - m.before:+.0f}", "worse" if (m.after > 0) == (m.better == "lower") else "better"
        return "-", ""
    if abs(change) < 1e-9:
        return "0.0%", ""
    improved = (change < 0) == (m.better == "lower")
    return f"{100 * change:+.1f}%", "better" if improved else "worse"


def _int(value: Any) -> int | None:
    number = num(value)
    return int(number) if number is not None else None


def _text(value: Any) -> str:
    """A name from the run as text; ``"?"`` when missing."""
    return "?" if value is None else str(value)


def _layer_index(run: Run) -> dict[str, int]:
    """Layer id -> index in the run (links from the experiments to the layer's details)."""
    return {str(layer.get("id")): i for i, layer in enumerate(run.get("layers") or []) if isinstance(layer, Mapping)}


# ------------------------------------------------------------------------------------------- bisect


@dataclass(frozen=True)
class SegmentRow:
    """One bisect segment: its layers, estimate, increment with interval, share of the increments, and (with
    ``--validate``) the kernel profile's time and the relative error; ``flagged``: judged and off the goal."""

    index: int
    start: int | None
    end: int | None
    first_layer: str
    last_layer: str
    first_layer_index: int | None
    layer_count: int
    est_us: float | None
    increment_us: float | None
    ci_low_us: float | None
    ci_high_us: float | None
    share: float | None
    significant: bool
    negative: bool
    note: str
    profile_us: float | None
    error: float | None
    flagged: bool

    @property
    def layer_span(self) -> str:
        """Layer positions ``start-last`` (``start`` alone for one layer; ``?`` when the run lacks them)."""
        if self.start is None or self.end is None:
            return "?"
        return str(self.start) if self.end - self.start <= 1 else f"{self.start}-{self.end - 1}"


@dataclass(frozen=True)
class BisectView:
    """The ``bisect`` section: the segment table and its context (the terminal's ``segment_table``,
    ``bisect_context`` and ``validation_report``)."""

    title: str
    confidence_pct: int
    segments: tuple[SegmentRow, ...]
    validated: bool
    context: tuple[Row, ...]
    validation: tuple[Row, ...]


def _bisect_note(seg: Mapping[str, Any]) -> str:
    negative, significant = bool(seg.get("negative")), bool(seg.get("significant", True))
    notes = ["negative" + ("" if significant else ", not significant") if negative else
             "" if significant else "not significant"]
    boundary, increment = num(seg.get("boundary_us")), num(seg.get("increment_us"))
    if boundary and increment is not None and abs(boundary) >= BISECT_BOUNDARY_NOTE * abs(increment + boundary):
        notes.append(f"{-boundary:+.0f} µs cut costs")
    return ", ".join(n for n in notes if n)


def _runner_text(runner: Mapping[str, Any]) -> str:
    if runner.get("runner") == "onnxruntime":
        threads = runner.get("threads") or "default"
        per_visit = runner.get("runs_per_visit") or 1
        visit = "1 run" if per_visit == 1 else f"best of {per_visit} runs"
        warm = runner.get("visit_warmup") or 0
        what = "of the whole model" if runner.get("warm_with") == "whole" else "of the model itself"
        visit = f"{warm} untimed {what} + {visit}" if warm else visit
        return (f"onnxruntime {runner.get('version', '?')} {runner.get('provider', '?')}, threads {threads}, "
                f"opt {runner.get('opt_level', '?')}, {runner.get('clock', 'wall')} clock, {visit} per visit")
    command = runner.get("run_cmd")
    if not command:
        return "device command"
    return f"{command}  [{runner['latency']}]" if runner.get("latency") else str(command)


def bisect_view(run: Run) -> BisectView | None:
    """The run's ``bisect`` section as a table and context lines; ``None`` without one."""
    section = run.get("bisect")
    if not isinstance(section, Mapping):
        return None
    segments = _maps(section.get("segments"))
    confidence = num(_map(section.get("bootstrap")).get("confidence"))
    level = round(100 * (confidence if confidence is not None else 0.95))
    increments = [v for s in segments if (v := num(s.get("increment_us"))) is not None]
    total_us = num(section.get("sum_segments_us"))
    if total_us is None:
        total_us = sum(increments)
    validation = _map(section.get("validation"))
    validated = bool(validation) or any("profile_us" in s for s in segments)
    index = _layer_index(run)
    rows: list[SegmentRow] = []
    for seg in segments:
        layers = [str(x) for x in seg.get("layers") or []]
        first = str(seg.get("first_layer", layers[0] if layers else "?"))
        last = str(seg.get("last_layer", layers[-1] if layers else first))
        increment = num(seg.get("increment_us"))
        share = num(seg.get("share"))
        if share is None and increment is not None:
            share = increment / (total_us or 1.0)
        error = num(seg.get("error"))
        judged = validated and "profile_us" in seg and (share or 0.0) >= BISECT_LARGE_SHARE
        number = num(seg.get("index"))
        rows.append(SegmentRow(
            index=int(number) if number is not None else len(rows), start=_int(seg.get("start")),
            end=_int(seg.get("end")), first_layer=first, last_layer=last,
            first_layer_index=index.get(first), layer_count=len(layers) or 1, est_us=num(seg.get("est_us")),
            increment_us=increment, ci_low_us=num(seg.get("ci_low_us")), ci_high_us=num(seg.get("ci_high_us")),
            share=share, significant=bool(seg.get("significant", True)), negative=bool(seg.get("negative")),
            note=_bisect_note(seg), profile_us=num(seg.get("profile_us")), error=error,
            flagged=judged and (error is None or abs(error) > BISECT_GOAL_ERROR)))
    statistic = str(section.get("statistic") or "median")
    title = (f"{len(rows)} segments by differential timing, {section.get('repeats', '?')} rounds ({statistic})")
    return BisectView(title, level, tuple(rows), validated, _bisect_context(section, rows, level, total_us),
                      _bisect_validation(section, rows, validation))


def _bisect_context(section: Mapping[str, Any], rows: Sequence[SegmentRow], level: int,
                    total_us: float) -> tuple[Row, ...]:
    runner = _map(section.get("runner"))
    statistic = str(section.get("statistic") or "median")
    lines: list[tuple[str, str | None]] = [("runner", _runner_text(runner) if runner else None)]
    if runner.get("compile_cmd"):
        lines.append(("compile", str(runner["compile_cmd"])))
    refined = f", refined in {section['refinements']} step(s)" if section.get("refinements") else ""
    prefixes = len(section.get("prefixes") or [])
    suffixes = len(section.get("suffixes") or [])
    models = f"{prefixes} prefixes + {suffixes} suffixes" if suffixes else f"{prefixes} prefixes"
    rounds, least = _int(section.get("repeats")), _int(section.get("repeats_min"))
    more = f" (more than {least}: a fast model)" if rounds is not None and least is not None and rounds > least else ""
    lines.append(("plan", f"{len(rows)} {section.get('granularity', 'segment')}s{refined}: {models} x "
                          f"{section.get('repeats', '?')} rounds{more} + {section.get('pilot_runs', 0)} pilot runs = "
                          f"{section.get('runs', '?')} runs (budget {section.get('budget_runs', '?')})"))
    meet = _int(section.get("meet"))
    if suffixes and meet is not None:
        after = next((r.last_layer for r in rows if r.end == meet), None)
        where = f"after {after}" if after else f"at cut {meet}"
        lines.append(("halves", f"prefixes up to the cut {where}, suffixes (the layers after a cut, fed what "
                                "crosses it) from there on: each segment is the difference of two models of at "
                                "most about half the model"))
    lines.append(("statistic", BISECT_STATISTICS.get(statistic, (statistic, statistic))[1]
                  + f"; {level}% bootstrap intervals over the rounds"))
    cache = _map(section.get("cache"))
    if cache:
        lines.append(("cache", f"{cache.get('misses', '?')} runs measured now, {cache.get('hits', '?')} reused; "
                               f"{cache.get('dir') or 'off (--no-cache)'}"))
    full, baseline = num(section.get("full_us")), num(section.get("baseline_us"))
    if full is not None:
        last = (_maps(section.get("prefixes")) or [{}])[-1]
        samples = [v for x in last.get("samples_us") or [] if (v := num(x)) is not None and v >= 0]
        spread = ""
        if samples:
            whole = summarize(samples)
            spread = f"; run-to-run CV {100 * whole.cv:.1f}%, min {human_us(whole.min_us)}"
        lines.append(("whole model", f"{human_us(full)} ({statistic} of the last prefix, the model itself{spread})"))
    if baseline is not None:
        other = num(section.get("suffix_baseline_us"))
        suffix = f"; suffixes' {human_us(other)}, fed the outputs" if other is not None else ""
        lines.append(("baseline", f"{human_us(baseline)} (a model that returns one element of each input: the fixed "
                                  f"cost per call{suffix})"))
    if full is not None:
        reference = full - (baseline or 0.0)
        if statistic in ("min", "p10") and not suffixes:
            ratio = " = whole - baseline (differences of per-prefix levels add up exactly)"
        else:
            ratio = f" = {100 * total_us / reference:.1f}% of whole - baseline" if reference > 0 else ""
        low, high = num(section.get("sum_ci_low_us")), num(section.get("sum_ci_high_us"))
        interval = f"  ({level}% CI {human_us(low)} - {human_us(high)})" if low is not None and high is not None else ""
        lines.append(("sum", f"{human_us(total_us)}{ratio}{interval}"))
    flagged = sum(1 for r in rows if r.negative or not r.significant)
    if flagged:
        lines.append(("noise", f"{flagged} segment(s) negative or not significant: add --repeats, or merge them "
                               "(fewer --segments)"))
    boundary = _map(section.get("boundary"))
    if boundary.get("corrected"):
        with_cost = boundary.get("models_with_cost", 0)
        lines.append(("cut costs", f"{with_cost} of {boundary.get('models', '?')} models convert crossing tensors out "
                                   "of or into the runtime's own layout, which the whole model does not; up to "
                                   f"{human_us(num(boundary.get('max_us')) or 0.0)}, timed by its profiler over "
                                   f"{boundary.get('runs', '?')} runs and subtracted" if with_cost else
                                   "no prefix runs layout conversions the whole model does not (checked with "
                                   "the runtime's optimized graphs)"))
    elif boundary.get("why"):
        lines.append(("cut costs", f"not corrected: {boundary['why']}"))
    corrected = "; its layout conversions are subtracted: see cut costs" if boundary.get("corrected") else ""
    lines.append(("MEASURED", "differences of whole-model timings (prefixes, suffixes): a segment's time includes "
                              "what its cut changes "
                              f"(extra outputs written back, fusions across the cut{corrected})"))
    return tuple(Row(label, value) for label, value in lines if value)


def _bisect_validation(section: Mapping[str, Any], rows: Sequence[SegmentRow],
                       validation: Mapping[str, Any]) -> tuple[Row, ...]:
    if not validation:
        return ()
    stat = BISECT_STATISTICS.get(str(section.get("statistic") or "median"), ("median", ""))[0]
    judged = [r for r in rows if r.profile_us is not None and (r.share or 0.0) >= BISECT_LARGE_SHARE]
    errors = [abs(r.error) for r in judged if r.error is not None]
    within = sum(1 for e in errors if e <= BISECT_GOAL_ERROR)
    worst = f"; worst {100 * max(errors):.1f}%" if errors else ""
    whole = num(validation.get("profile_latency_us"))
    if whole is None:
        whole = num(validation.get("profile_latency_p50_us"))
    total = num(validation.get("sum_vs_profile_latency"))
    lines: list[tuple[str, str | None]] = [
        ("reference", f"layerscope profile: {stat} over {validation.get('runs', '?')} profiled runs, taken in "
                      f"{validation.get('profiles', 1)} parts between the rounds, of each segment's kernel time in a "
                      "run"),
        ("segments", f"segments >= {100 * BISECT_LARGE_SHARE:.0f}% of the time: {within} of {len(errors)} within "
                     f"{100 * BISECT_GOAL_ERROR:.0f}% of the profile{worst}"),
        ("whole model", None if whole is None else f"{human_us(whole)} ({stat} of the profile's uninstrumented runs)"),
        ("sum vs profile", None if total is None else f"{100 * total:+.1f}% (sum of segments + baseline vs the whole "
                                                      "model timed apart)"),
    ]
    return tuple(Row(label, value) for label, value in lines if value)


# ------------------------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class MetricChange:
    """One row of the before/after table: values formatted in their unit, the change and its verdict
    (``"better"``, ``"worse"`` or ``""``: which direction is better is the metric's ``better``)."""

    name: str
    before: float | None
    after: float | None
    before_text: str
    after_text: str
    change: float | None
    change_text: str
    verdict: str
    source: str


@dataclass(frozen=True)
class LayerChange:
    """A layer in both runs (same id, or renamed) with its time before and after."""

    before_id: str
    after_id: str
    after_index: int | None
    op_type: str
    before_us: float | None
    after_us: float | None
    delta_us: float | None
    renamed: bool


@dataclass(frozen=True)
class NamedLayers:
    """Renamed, added or removed layers: how many, and the first :data:`COMPARISON_NAMES` as text."""

    label: str
    count: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class ComparisonView:
    """The ``comparison`` section (``layerscope compare --json``, stored in the *after* run)."""

    before_label: str
    after_label: str
    sides: tuple[Row, ...]
    time_source: str
    metrics: tuple[MetricChange, ...]
    layers: tuple[LayerChange, ...]
    layers_matched: int
    lists: tuple[NamedLayers, ...]


def comparison_view(run: Run) -> ComparisonView | None:
    """The run's ``comparison`` section; ``None`` without one."""
    section = run.get("comparison")
    if not isinstance(section, Mapping):
        return None
    from layerscope.analysis.compare import MetricDelta

    before, after = _map(section.get("before")), _map(section.get("after"))
    before_label, after_label = str(before.get("label") or "before"), str(after.get("label") or "after")
    metrics = []
    for m in _maps(section.get("metrics")):
        delta = MetricDelta(str(m.get("name") or "?"), str(m.get("unit") or ""), num(m.get("before")),
                            num(m.get("after")), str(m.get("source_before") or "-"),
                            str(m.get("source_after") or "-"), "higher" if m.get("better") == "higher" else "lower")
        text, verdict = change_text(delta)
        source = (delta.source_before if delta.source_before == delta.source_after
                  else f"{delta.source_before} / {delta.source_after}")
        metrics.append(MetricChange(delta.name, delta.before, delta.after, format_metric(delta, delta.before),
                                    format_metric(delta, delta.after), delta.change, text, verdict, source))
    index = _layer_index(run)
    changes = [LayerChange(_text(d.get("before_id")), _text(d.get("after_id")), index.get(_text(d.get("after_id"))),
                           str(d.get("op_type") or ""), num(d.get("before_us")), num(d.get("after_us")),
                           num(d.get("delta_us")), bool(d.get("renamed")))
               for d in _maps(section.get("layers"))]
    changes.sort(key=lambda c: (-abs(c.delta_us or 0.0), c.before_id))
    renamed = [f"{r.get('before_id')} → {r.get('after_id')}" for r in _maps(section.get("renamed"))]
    added = [f"{a.get('id')} ({a.get('op_type')})" for a in _maps(section.get("added"))]
    removed = [f"{r.get('id')} ({r.get('op_type')})" for r in _maps(section.get("removed"))]
    lists = tuple(NamedLayers(label, len(names), tuple(names[:COMPARISON_NAMES]))
                  for label, names in (("renamed", renamed), ("added", added), ("removed", removed)))
    sides = tuple(Row(side.get("label") or default, text) for side, default in ((before, "before"), (after, "after"))
                  if (text := " · ".join(str(v) for v in (side.get("model"), side.get("path"),
                                                          side.get("target") and f"target {side['target']}")
                                         if v)))
    return ComparisonView(before_label, after_label, sides, str(section.get("time_source") or "?"), tuple(metrics),
                          tuple(changes[:COMPARISON_TOP]), len(changes), lists)


# ------------------------------------------------------------------------------------------- pipeline


@dataclass(frozen=True)
class BreakdownPart:
    """Pre, model, post or other: mean µs per run and share of the mean end to end."""

    label: str
    time_us: float
    share: float | None


@dataclass(frozen=True)
class StageRow:
    """A trace point or the model over the runs; ``level``: nesting under its parent stage."""

    name: str
    level: int
    kind: str
    calls_per_run: float | None
    median_us: float | None
    p90_us: float | None
    self_median_us: float | None
    share: float | None


@dataclass(frozen=True)
class TopItem:
    """A user stage (self time) or a model layer (measured) in the pipeline's ranking."""

    name: str
    kind: str
    layer_index: int | None
    median_us: float | None
    p90_us: float | None
    share: float | None


@dataclass(frozen=True)
class PipelineView:
    """The ``pipeline`` section: end to end, the breakdown, the stages and the top items."""

    function: str
    runs: int | None
    end_to_end: tuple[Row, ...]
    breakdown: tuple[BreakdownPart, ...]
    breakdown_total_us: float | None
    stages: tuple[StageRow, ...]
    top: tuple[TopItem, ...]
    notes: tuple[str, ...]


def _stage_tree(stages: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The stages as a tree (each followed by the stages inside it), keeping their order among siblings."""
    names = {stage.get("name") for stage in stages}
    out: list[tuple[int, Mapping[str, Any]]] = []
    placed: set[int] = set()

    def visit(parent: Any, level: int) -> None:
        for index, stage in enumerate(stages):
            own_parent = stage.get("parent") if stage.get("parent") in names else None
            if index not in placed and own_parent == parent:
                placed.add(index)
                out.append((level, stage))
                if level < 32:
                    visit(stage.get("name"), level + 1)

    visit(None, 0)
    out.extend((0, stage) for index, stage in enumerate(stages) if index not in placed)  # cycles (recursion)
    return out


def pipeline_view(run: Run) -> PipelineView | None:
    """The run's ``pipeline`` section; ``None`` without one."""
    section = run.get("pipeline")
    if not isinstance(section, Mapping):
        return None
    e2e = _map(section.get("end_to_end"))
    e2e_median = num(e2e.get("median_us"))
    b = _map(section.get("breakdown"))
    total = num(b.get("end_to_end_us"))
    parts = tuple(BreakdownPart(label, value, value / total if total else None)
                  for label, key in (("pre", "pre_us"), ("model", "model_us"), ("post", "post_us"),
                                     ("other", "other_us"))
                  if (value := num(b.get(key))) is not None)
    stages = []
    for level, stage in _stage_tree(_maps(section.get("stages"))):
        stats, own = _map(stage.get("stats")), _map(stage.get("self"))
        median = num(stats.get("median_us"))
        stages.append(StageRow(_text(stage.get("name")), level, str(stage.get("kind") or ""),
                               num(stage.get("calls_per_run")), median, num(stats.get("p90_us")),
                               num(own.get("median_us")),
                               median / e2e_median if median is not None and e2e_median else None))
    index = _layer_index(run)
    top = tuple(TopItem(_text(item.get("name")), str(item.get("kind") or ""),
                        index.get(_text(item.get("name"))) if item.get("kind") == "layer" else None,
                        num(item.get("median_us")), num(item.get("p90_us")), num(item.get("share")))
                for item in _maps(section.get("top"))[:PIPELINE_TOP])
    runs = num(section.get("runs"))
    percentiles = "  ".join(f"{label} {human_us(v)}" for key, label in (("median_us", "P50"), ("p90_us", "P90"),
                                                                        ("p99_us", "P99"), ("mean_us", "mean"))
                            if (v := num(e2e.get(key))) is not None)
    calls = num(section.get("model_calls_per_run"))
    lat = run.get("latency") or {}
    model_line = f"{calls:g} model call(s) per run" if calls is not None else None
    if model_line and num(lat.get("p50_us")) is not None:
        model_line += f"; model.run P50 {human_us(lat['p50_us'])} (profiler off)"
    trace = _map(section.get("trace"))
    if percentiles and runs is not None:
        percentiles += f"  ({int(runs)} runs)"
    rows = [("end to end", percentiles or None),
            ("model", model_line),
            ("traced run", f"run {trace.get('run')} of the {trace.get('phase')} phase (the median one)" if trace
             else None)]
    notes = []
    if calls == 0:
        notes.append("the function never called model.run: nothing was measured of the model")
    if section.get("interrupted"):
        notes.append("INTERRUPTED: fewer runs than asked were measured")
    return PipelineView(str(section.get("function") or "?"), None if runs is None else int(runs),
                        tuple(Row(label, value) for label, value in rows if value), parts, total, tuple(stages), top,
                        tuple(notes))


# ------------------------------------------------------------------------------------------- stress


@dataclass(frozen=True)
class StressRound:
    """One pair of measurements, without and with the stress: P50s, change (stressed / baseline - 1) and the
    cores this process kept busy."""

    number: int
    order: str
    baseline_p50_us: float | None
    stressed_p50_us: float | None
    change: float | None
    baseline_cores_busy: float | None
    stressed_cores_busy: float | None


@dataclass(frozen=True)
class StressLayer:
    """A layer without and with the stress: medians over the rounds, median and smallest paired ratio."""

    id: str
    index: int
    op_type: str
    baseline_us: float | None
    stressed_us: float | None
    ratio: float | None
    ratio_min: float | None
    memory_sensitive: bool


@dataclass(frozen=True)
class StressView:
    """The ``stress`` section with the per-layer changes it added to ``layers[].measured``."""

    processes: int | None
    latency_change: float | None
    change_low: float | None
    change_high: float | None
    rounds: tuple[StressRound, ...]
    layers: tuple[StressLayer, ...]
    layers_compared: int
    layers_eligible: int
    sensitive: tuple[str, ...]
    context: tuple[Row, ...]
    rule: str | None
    order: str | None
    warnings: tuple[Notice, ...]

    @property
    def context_rows(self) -> tuple[Row, ...]:
        """The context, then the rule that marks a layer memory-sensitive and the order the rounds ran in."""
        return (*self.context, *(Row(label, value) for label, value in (("rule", self.rule), ("MEASURED", self.order))
                                 if value))


@dataclass(frozen=True)
class Notice:
    """Something to read the figures with: ``level`` ``"warning"`` (they are partly something else) or
    ``"note"`` (read them with care)."""

    level: str
    text: str


def _change(ratio: float | None) -> float | None:
    return None if ratio is None else ratio - 1


def stress_view(run: Run) -> StressView | None:
    """The run's ``stress`` section; ``None`` without one. Layers: those with at least ``stress.min_share`` of the
    baseline layer total (as the terminal ranks them), highest ratio first, the memory-sensitive ones always."""
    stress = run.get("stress")
    if not isinstance(stress, Mapping):
        return None
    rounds = tuple(StressRound(i + 1, "A B" if i % 2 == 0 else "B A",
                               num(_map(r.get("baseline")).get("median_us")),
                               num(_map(r.get("stressed")).get("median_us")), _change(num(r.get("ratio_p50"))),
                               num(r.get("baseline_cores_busy")), num(r.get("stressed_cores_busy")))
                   for i, r in enumerate(_maps(stress.get("rounds"))))
    compared = stress_compared(run)
    eligible = stress_eligible(compared, min_share=stress_thresholds(run)[0], keep_sensitive=True)
    shown = eligible[:STRESS_TOP]  # and, further down the ranking, the memory-sensitive ones
    shown += [il for il in eligible[STRESS_TOP:] if _map(il[1].get("measured")).get("memory_sensitive")]
    layers = []
    for i, layer in shown:
        m = _map(layer.get("measured"))
        layers.append(StressLayer(_text(layer.get("id")), i, str(layer.get("op_type") or ""),
                                  num(m.get("stress_baseline_us")), num(m.get("stress_median_us")),
                                  num(m.get("stress_ratio")), num(m.get("stress_ratio_min")),
                                  bool(m.get("memory_sensitive"))))
    span = stress.get("latency_ratio_p50_range")
    low, high = (num(span[0]), num(span[1])) if isinstance(span, list) and len(span) == 2 else (None, None)
    return StressView(
        processes=int(p) if (p := num(stress.get("processes"))) is not None else None,
        latency_change=_change(num(stress.get("latency_ratio_p50"))), change_low=_change(low),
        change_high=_change(high), rounds=rounds, layers=tuple(layers), layers_compared=len(compared),
        layers_eligible=len(eligible), sensitive=tuple(str(x) for x in stress.get("sensitive_layers") or []),
        context=_stress_context(stress), rule=_text_or_none(stress.get("rule")),
        order=_text_or_none(stress.get("order")), warnings=_stress_warnings(stress, rounds, low, high))


def stress_compared(run: Run) -> list[tuple[int, Mapping[str, Any]]]:
    """(index, layer) of the layers the stress experiment compared (``measured.stress_ratio`` set)."""
    return [(i, layer) for i, layer in enumerate(run.get("layers") or [])
            if isinstance(layer, Mapping) and num(_map(layer.get("measured")).get("stress_ratio")) is not None]


def stress_eligible(compared: Sequence[tuple[int, Mapping[str, Any]]], *, min_share: float,
                    keep_sensitive: bool) -> list[tuple[int, Mapping[str, Any]]]:
    """Of :func:`stress_compared`'s layers, those holding at least ``min_share`` (the run's ``stress.min_share``)
    of their baseline total (and with ``keep_sensitive`` the memory-sensitive ones too), highest ratio first,
    then by id."""
    total = sum(num(_map(layer.get("measured")).get("stress_baseline_us")) or 0.0 for _, layer in compared)
    eligible = [(i, layer) for i, layer in compared
                if (num(_map(layer.get("measured")).get("stress_baseline_us")) or 0.0) >= min_share * total
                or (keep_sensitive and _map(layer.get("measured")).get("memory_sensitive"))]
    return sorted(eligible, key=lambda item: (-(num(_map(item[1].get("measured")).get("stress_ratio")) or 0.0),
                                              str(item[1].get("id"))))


def _text_or_none(value: Any) -> str | None:
    return str(value) if value else None


def _stress_context(stress: Mapping[str, Any]) -> tuple[Row, ...]:
    buffer, llc = num(stress.get("buffer_bytes")), num(stress.get("llc_bytes"))
    traffic, streaming = num(stress.get("traffic_bytes_per_s")), num(stress.get("streaming_s"))
    what = None
    if buffer is not None:
        cache = f" ({buffer / llc:g}x the {human_bytes(llc)} last-level cache)" if llc else ""
        what = f"{stress.get('processes', '?')} process(es) copying 2 x {human_bytes(buffer)}{cache}"
        if traffic is not None:
            what += f": {traffic / 1e9:.1f} GB/s memory traffic while streaming"
            what += f" ({streaming:.1f} s)" if streaming is not None else ""
    layer_ratio = num(stress.get("layer_ratio"))
    layers = None
    if layer_ratio is not None:
        span = stress.get("layer_ratio_range")
        rounds = (f" (rounds x{span[0]:.2f} to x{span[1]:.2f})"
                  if isinstance(span, list) and len(span) == 2 and all(num(v) is not None for v in span) else "")
        sensitive = [str(x) for x in stress.get("sensitive_layers") or []]
        layers = (f"layer total x{layer_ratio:.2f} under stress{rounds}; memory-sensitive: "
                  f"{', '.join(sensitive) if sensitive else 'none'}")
    threads, load, cores = stress.get("model_threads"), num(stress.get("load_average_1min")), stress.get("cores")
    cores_text = None
    if cores is not None:
        cores_text = (f"{cores} cores; model intra-op threads {threads or 'default (one per core)'}"
                      + (f"; load average {load:.2f} when the stress started (this process included)"
                         if load is not None else ""))
    lines = [("stress", what), ("layers", layers), ("cores", cores_text)]
    return tuple(Row(label, str(value)) for label, value in lines if value)


def _stress_warnings(stress: Mapping[str, Any], rounds: Sequence[StressRound], low: float | None,
                     high: float | None) -> tuple[Notice, ...]:
    warnings = []
    contended = [str(x) for x in stress.get("contended_rounds") or []]
    if contended:
        every = len(contended) == len(rounds)
        drop = stress_thresholds({"stress": stress})[1]
        warnings.append(Notice("warning", f"contended round(s) {', '.join(contended)}: under stress this process "
                               f"kept the CPU busy over {drop:.0%} less (the stress processes and other load "
                               "outnumbered the cores), so their slowdown is partly waiting for a core, not memory; "
                               + ("no layer is marked memory-sensitive" if every
                                  else "the layer verdict uses the other rounds")))
    if low is not None and high is not None and high - low > STRESS_ROUND_SPREAD:
        warnings.append(Notice("note", f"the rounds disagree by {100 * (high - low):.0f} points: the machine's load "
                               "changed during the experiment; read the median with that spread, or rerun on a quiet "
                               "machine"))
    threads, processes, cores = stress.get("model_threads"), num(stress.get("processes")), num(stress.get("cores"))
    if processes is not None and cores is not None and (not threads or threads + processes > cores):
        warnings.append(Notice("note", "the model's threads and the stress processes outnumber the cores: the "
                               "slowdown mixes CPU and memory contention (keep model threads + N <= cores: profile "
                               "--threads, bench --intra-threads)"))
    if stress.get("expired"):
        warnings.append(Notice("warning", "a stress process stopped on its own or did not follow pause / resume: "
                               "some stressed runs may have run without stress"))
    return tuple(warnings)


#: Per-round end-to-end changes further apart than this (ratio points) get a note: the machine's load moved.
STRESS_ROUND_SPREAD = 0.10


# ------------------------------------------------------------------------------------------- all four


@dataclass(frozen=True)
class Experiments:
    """What the Experiments tab shows; each part ``None`` when the run lacks its section."""

    bisect: BisectView | None
    comparison: ComparisonView | None
    pipeline: PipelineView | None
    stress: StressView | None

    def __bool__(self) -> bool:
        return any(part is not None for part in (self.bisect, self.comparison, self.pipeline, self.stress))

    @property
    def names(self) -> tuple[str, ...]:
        """The sections present, in the tab's order."""
        return tuple(name for name in ("bisect", "comparison", "pipeline", "stress") if getattr(self, name))


def experiments(run: Run) -> Experiments:
    """The run's ``bisect``, ``comparison``, ``pipeline`` and ``stress`` sections as the report shows them."""
    return Experiments(bisect_view(run), comparison_view(run), pipeline_view(run), stress_view(run))
