"""Summary view: the headline numbers and the titled summary sections of a run, and what it is missing.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Row, Run, _pct, estimated_us, num, shape_text
from layerscope.report.views.layers import scale_factor
from layerscope.runfile.derived import steadiness_text
from layerscope.runfile.io import as_run
from layerscope.runfile.models import RunLike


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
        ("device", m.get("device") if m.get("device") != m.get("provider") else None),
        ("precision", m.get("precision")),
        ("performance hint", m.get("performance_hint")),
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


def missing_notes(run: RunLike) -> list[str]:
    """What the run does not hold, each with the command that adds it."""
    run = as_run(run)
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
