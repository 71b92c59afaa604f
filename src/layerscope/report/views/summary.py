"""Summary view: the headline numbers and the titled summary sections of a run, and what it is missing.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from layerscope.report.noise import overhead_row, unsteady_text
from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Row, Run, _pct, shape_text
from layerscope.report.views.coverage import coverage_metric, coverage_text
from layerscope.report.views.engine import layout_time, precision_mix_text, rate_label, throughput_text
from layerscope.report.views.estimate import predicted, predicted_text, roofline_text, task_text
from layerscope.report.views.layers import scale_factor
from layerscope.report.views.weights import params_per_use_text, shared_weights_text
from layerscope.runfile.derived import steadiness_text
from layerscope.runfile.models import (
    EstimateInfo,
    KernelProfileMeasurement,
    Latency,
    Machine,
    MeasuredMemory,
    RunFile,
    TimelineSummary,
    VendorMeasurement,
)


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


def _timeline_summary(run: Run) -> TimelineSummary:
    """The ``timeline.summary`` section; an empty one (every field ``None``) without a timeline."""
    summary = run.timeline.summary if run.timeline is not None else None
    return summary if summary is not None else TimelineSummary()


def headline(run: Run) -> list[Metric]:
    """The numbers at the top of the report: measured percentiles and FPS, estimate, MACs, fallbacks, coverage."""
    metrics: list[Metric] = []
    lat = run.latency or Latency()
    source = "measured" + (f", {lat.samples} runs" if lat.samples else "")
    for value, label in ((lat.p50_us, "P50"), (lat.p90_us, "P90"), (lat.p99_us, "P99")):
        if value is not None:
            metrics.append(Metric(label, human_us(value), source))
    if lat.p50_us is None and lat.mean_us is not None:
        metrics.append(Metric("mean", human_us(lat.mean_us), source))
    if lat.fps is not None:
        metrics.append(Metric(rate_label(_batch(run)), f"{lat.fps:.1f}", source))
    summary = run.summary
    timeline = _timeline_summary(run)
    timeline_us, timeline_fps = timeline.latency_us, timeline.fps_total
    if predicted(summary) and summary.est_latency_us is not None:
        metrics.append(Metric("est. latency", human_us(summary.est_latency_us), "estimate, kernel predictor"))
        if summary.est_fps is not None:
            metrics.append(Metric("est. FPS", f"{summary.est_fps:.1f}", "estimate, kernel predictor"))
    elif timeline_us is not None:
        metrics.append(Metric("est. latency", human_us(timeline_us), "estimate, timeline"))
        if timeline_fps is not None:
            metrics.append(Metric("est. FPS", f"{timeline_fps:.1f}", "estimate, all cores"))
    elif summary.est_latency_us is not None:
        metrics.append(Metric("est. latency", human_us(summary.est_latency_us), "estimate"))
        if summary.est_fps is not None:
            metrics.append(Metric("est. FPS", f"{summary.est_fps:.1f}", "estimate"))
    if summary.macs is not None:
        metrics.append(Metric("MACs", human_count(summary.macs), "per run"))
    if summary.cpu_fallback_count is not None:
        metrics.append(Metric("CPU fallback", str(summary.cpu_fallback_count), "layers"))
    m = run.measurement
    coverage = m.coverage if isinstance(m, KernelProfileMeasurement | VendorMeasurement) else None
    if coverage is not None:
        metrics.append(Metric("coverage", *coverage_metric(coverage)))
    return metrics


def summary_sections(run: Run) -> list[Section]:
    """The Summary tab's sections, in reading order; a section the run has no data for is left out."""
    builders = (_model_section, _target_section, _runtime_section, _latency_section, _compute_section,
                _memory_section, _measured_memory_section, _layers_section, _instrument_section, _import_section)
    return [section for build in builders if (section := build(run)) is not None]


def _model_section(run: Run) -> Section | None:
    model = run.model
    tensors = ", ".join(f"{t.name} {shape_text(t.shape)} {t.dtype or ''}".strip() for t in model.inputs)
    outputs = ", ".join(f"{t.name} {shape_text(t.shape)}" for t in model.outputs)
    return _section("Model", [
        ("name", model.name),
        ("file", model.path),
        ("sha256", model.sha256),
        ("opset", str(model.opset) if model.opset is not None else None),
        ("producer", model.producer),
        ("inputs", tensors),
        ("outputs", outputs),
        ("assumed", "; ".join(model.assumptions) or None),
        ("shapes", _sources_text(model.shape_sources)),
        ("note", model.note),
    ])


def _sources_text(sources: Mapping[str, int]) -> str | None:
    """``"3 static, 5 executed"``, where a shape came from anything but static inference; else ``None``."""
    if not any(sources.get(k) for k in ("symbolic", "executed")):
        return None
    return ", ".join(f"{sources[k]} {k}" for k in ("static", "symbolic", "executed") if sources.get(k))


def _target_section(run: Run) -> Section | None:
    if run.target is None and run.estimate_info is None:
        return None
    target = run.target_or_empty
    info = run.estimate_info or EstimateInfo()
    return _section("Estimate target", [
        ("profile", target.name),
        ("kind", target.kind),
        ("description", target.description),
        ("dtype", target.dtype),
        ("method", info.method),
    ], note=f"ESTIMATE: {info.note}." if info.note else None)


def _runtime_section(run: Run) -> Section | None:
    m = run.measurement
    if m is None:
        return None
    machine = m.machine or Machine()
    machine_text = ", ".join(str(v) for v in (machine.hostname, machine.cpu,
                                              f"{machine.cores} cores" if machine.cores else None, machine.os) if v)
    threads = m.threads
    return _section("Runtime (measurement)", [
        ("backend", " ".join(str(v) for v in (m.backend, m.backend_version) if v)),
        ("provider", m.provider),
        ("device", device if (device := getattr(m, "device", None)) != m.provider else None),
        ("precision", getattr(m, "precision", None)),
        ("performance hint", getattr(m, "performance_hint", None)),
        ("threads", None if threads is None else (str(threads) if threads else "default")),
        ("opt level", None if m.opt_level is None else str(m.opt_level)),
        ("runs", " ".join(p for p in (f"{m.runs} measured" if m.runs else "",
                                      f"{m.warmup} warm-up" if m.warmup else "") if p)),
        ("machine", machine_text),
        ("python", machine.python),
        ("created", m.created_utc),
        ("source", m.source),
    ], note="INTERRUPTED: fewer runs than asked were measured." if m.interrupted else None)


def _percentiles(lat: Latency) -> tuple[tuple[float | None, str], ...]:
    """The latency section's numbers in reading order, with their labels."""
    return ((lat.p50_us, "P50"), (lat.p90_us, "P90"), (lat.p99_us, "P99"), (lat.p999_us, "P99.9"),
            (lat.mean_us, "mean"), (lat.min_us, "min"), (lat.max_us, "max"))


def _latency_section(run: Run) -> Section | None:
    lat = run.latency or Latency()
    summary = run.summary
    timeline = _timeline_summary(run)
    rows: list[tuple[str, str | None]] = []
    percentiles = "  ".join(f"{label} {human_us(value)}" for value, label in _percentiles(lat) if value is not None)
    rows.append(("measured", percentiles or None))
    if lat.fps is not None:
        rows.append((f"measured {rate_label(_batch(run))}",
                     f"{lat.fps:.1f}" + (f" ({lat.source})" if lat.source else "")))
    if summary.accelerator_us is not None:
        rows.append(("accelerator", f"{human_us(summary.accelerator_us)} per inference (measured by the vendor)"))
    if predicted(summary):
        rows.append(("estimated, kernel predictor", predicted_text(summary)))
        rows.append(("estimated, roofline", roofline_text(summary, run.estimate_info) or None))
    elif summary.est_latency_us is not None:
        fps = f"  ({summary.est_fps:.1f} FPS)" if summary.est_fps is not None else ""
        task = f", {text}" if (text := task_text(summary, run.estimate_info)) else ""
        rows.append(("estimated, layer by layer", human_us(summary.est_latency_us) + fps + task))
    timeline_us = timeline.latency_us
    if timeline_us is not None:
        fps_core, fps_total = timeline.fps_per_core or 0.0, timeline.fps_total or 0.0
        rows.append(("estimated, timeline",
                     f"{human_us(timeline_us)}  ({fps_core:.1f} FPS per core, {fps_total:.1f} total)"))
    k = scale_factor(run)
    if k is not None:
        rows.append(("k = measured / estimated", f"{k.value:.3f}  ({k.source})"))
        if k.warning:
            rows.append(("k WARNING", k.warning))
    return _section("Latency", rows)


def _fmt(value: float | None, fmt: Callable[[float], str], suffix: str = "") -> str | None:
    """``fmt(value) + suffix`` when ``value`` is a number, else ``None``."""
    return None if value is None else f"{fmt(value)}{suffix}"


def _compute_section(run: Run) -> Section | None:
    s = run.summary
    timeline = _timeline_summary(run)
    macs = _fmt(s.macs, human_count, " total")
    if macs and s.tensor_macs is not None:
        macs += f", {human_count(s.tensor_macs)} conv/matmul"
    busiest = timeline.busiest_unit
    return _section("Compute and traffic", [
        ("MACs", macs),
        ("FLOPs", _fmt(s.flops, human_count)),
        ("params", _fmt(s.params, human_count, f"  ({per_use})" if (per_use := params_per_use_text(s)) else "")),
        ("weights", _fmt(s.weight_bytes, human_bytes, " as stored in the model")),
        ("shared weights", shared_weights_text(s)),
        ("DDR traffic", _fmt(s.ddr_bytes, human_bytes, " per run (estimate)")),
        ("bound by", timeline.bound),
        ("busiest unit", f"{busiest} ({human_us(timeline.busiest_unit_busy_us or 0)} busy)" if busiest
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
    memory = run.timeline.memory if run.timeline is not None else None
    if memory is None:
        return None
    frames = memory.frames_in_flight
    return _section("Memory (estimate)", [
        (label, human_bytes(value)) for key, label in MEMORY_ROWS if (value := getattr(memory, key)) is not None],
        note=f"minimum requirement = static + shared temporary + {frames} frame(s) in flight x (input + output + "
             "exclusive intermediate)" if frames else None)


def measured_memory(run: Run) -> MeasuredMemory | None:
    """The measurement's ``memory`` section (a profile whose runtime reported sizes), else ``None``."""
    m = run.measurement
    return m.memory if isinstance(m, KernelProfileMeasurement) else None


def _layer_list(ids: list[str], limit: int = 5) -> str:
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def measured_memory_text(run: Run) -> str | None:
    """One line: the measured peak of live layer outputs, the layers holding it, the allocator's peak and the
    estimate's planned peak beside it; ``None`` when the run has no measured memory."""
    memory = measured_memory(run)
    if memory is None or memory.peak_bytes is None:
        return None
    text = f"peak {human_bytes(memory.peak_bytes)} of layer outputs live at once"
    if memory.peak_layers:
        text += f" (held by {_layer_list(memory.peak_layers)}"
        text += f"; while {_layer_list(memory.peak_at)} runs)" if memory.peak_at else ")"
    if memory.arena_peak_bytes is not None:
        text += f"; allocator peak {human_bytes(memory.arena_peak_bytes)}"
    plan = run.timeline.memory if run.timeline is not None else None
    if plan is not None and plan.peak_live_bytes is not None:
        text += f"; estimate's plan: peak live {human_bytes(plan.peak_live_bytes)}"
    return text


def _measured_memory_section(run: Run) -> Section | None:
    memory = measured_memory(run)
    if memory is None:
        return None
    measured = [layer.measured for layer in run.layers if layer.measured is not None]
    written = [m.output_bytes for m in measured if m.output_bytes is not None]
    params = [m.parameter_bytes for m in measured if m.parameter_bytes is not None]
    return _section("Memory (measured)", [
        ("peak live outputs", _fmt(memory.peak_bytes, human_bytes)),
        ("held by", _layer_list(memory.peak_layers, 10) or None),
        ("while running", _layer_list(memory.peak_at) or None),
        ("allocator peak", _fmt(memory.arena_peak_bytes, human_bytes, " in use (the runtime's arena)")),
        ("outputs written", f"{human_bytes(sum(written))} by {len(written)} layers" if written else None),
        ("parameters read", human_bytes(sum(params)) if params else None),
    ], note=memory.source)


def _layers_section(run: Run) -> Section | None:
    s = run.summary
    layers = run.layers
    statuses = Counter(layer.measured.status or "measured" for layer in layers if layer.measured is not None)
    reasons = Counter(reason for layer in layers if (reason := layer.est.fallback_reason))
    fallbacks = sum(reasons.values())
    unknown = ", ".join(f"{u.op_type} x{u.count}" for u in run.unknown_ops)
    kernels = run.kernels
    fallback_text = f"{fallbacks} layer(s)"
    if fallbacks:
        fallback_text += ": " + "; ".join(f"{n} x {r}" for r, n in reasons.most_common(5))
    return _section("Layers", [
        ("layers", f"{len(layers)} runtime layers" + (f", {s.folded_count} constant nodes folded"
                                                      if s.folded_count else "")
         + (f", {s.zero_copy_count} zero-copy" if s.zero_copy_count else "")),
        ("measured", ", ".join(f"{n} {status}" for status, n in sorted(statuses.items(), key=lambda kv: str(kv[0])))
         or None),
        ("kernels", f"{len(kernels)} runtime kernels" if kernels else None),
        ("CPU fallback", fallback_text if any(layer.estimate is not None for layer in layers) else None),
        ("unknown ops", unknown or ("none" if "unknown_ops" in run.model_fields_set else None)),
    ])


def _instrument_section(run: Run) -> Section | None:
    m = run.measurement
    if m is None:
        return None
    coverage = overhead = mapped = steadiness = None
    unmapped: list[str] = []
    eliminated: list[str] = []
    if isinstance(m, KernelProfileMeasurement | VendorMeasurement):  # the kinds that map kernels to layers
        coverage, overhead, unmapped = m.coverage, m.overhead, m.unmapped_kernels
    if isinstance(m, KernelProfileMeasurement):
        mapped, eliminated, steadiness = m.mapped_share, m.eliminated_layers, m.steadiness
    return _section("Instrument", [
        ("coverage", coverage_text(coverage, m.streams if isinstance(m, KernelProfileMeasurement) else None)
         if coverage is not None else None),
        (f"profiling {overhead_row(overhead)[0]}", overhead_row(overhead, percentiles="percentiles")[1]
         if overhead is not None else None),
        ("mapped", f"{_pct(mapped)} of kernel time mapped to source layers" if mapped is not None else None),
        ("unmapped kernels", ", ".join(unmapped) or ("none" if mapped is not None else None)),
        ("eliminated layers", ", ".join(eliminated) or None),
        ("steadiness", steadiness_text(steadiness) if steadiness is not None else None),
    ], note=unsteady_text(steadiness))


def _import_section(run: Run) -> Section | None:
    imported = run.import_
    if imported is None:
        return None
    rows: list[tuple[str, str | None]] = [
        ("file", f"{f.name}: {f.format} ({f.tool}), {f.entries} entries"
                 + (f", {len(f.warnings)} warning(s)" if f.warnings else ""))
        for f in imported.files]
    unmatched = imported.unmatched
    rows.append(("joined", f"{imported.joined} of {imported.entries} entries"
                           + ("" if imported.joined_to_model else " (no model given)")))
    rows.extend(("unmatched", f"{u.name}: {u.reason or 'no reason given'}") for u in unmatched[:10])
    if len(unmatched) > 10:
        rows.append(("unmatched", f"... and {len(unmatched) - 10} more (see the run file)"))
    context = imported.context
    if context is not None:
        rows.extend([("device", context.device), ("precision", context.precision),
                     ("batch", str(context.batch) if context.batch else None),
                     ("throughput", throughput_text(context))])
    layout = layout_time(run.kernels)
    rows.append(("precision mix", precision_mix_text(run.kernels)))
    rows.append(("reformat", f"{human_us(layout.time_us)} = {_pct(layout.share)} of the measured time, in "
                             f"{layout.timed} of {layout.kernels} reformat/copy kernels (not in any layer's time)"
                 if layout is not None else None))
    return _section("Import", rows)


def _batch(run: Run) -> int | None:
    """The batch an imported run's files state (``import.context.batch``), ``None`` when none does."""
    context = run.import_.context if run.import_ is not None else None
    return context.batch if context is not None else None


def _quoted(text: str) -> str:
    """``text`` shell-quoted for a command shown in a note (no backtick: the notes' code spans are backticked)."""
    return shlex.quote(text.replace("`", "'"))


def missing_notes(run: RunFile, run_file: str | None = None) -> list[str]:
    """What the run does not hold, each with the command that adds it. The commands name the run's own model
    and target and ``run_file`` (the path the run was read from) where they are known, else the placeholders
    ``MODEL``, ``T`` and ``RUN.json``. A timeline is offered on an NPU profile only: on a CPU or GPU profile the
    layers run one after another, and the note names an NPU profile and a run file of its own instead."""
    layers = run.layers
    model = _quoted(str(run.model.path)) if run.model.path else "MODEL"
    out = _quoted(run_file) if run_file else "RUN.json"
    notes = []
    if not any(layer.estimated_us is not None for layer in layers):
        notes.append(f"No per-layer estimate: `layerscope estimate {model} -o {out}` adds one.")
    elif run.timeline is None:
        target = run.target_or_empty
        if target.kind in (None, "npu"):
            name = _quoted(target.name) if target.name else "T"
            notes.append(f"No timeline: `layerscope estimate {model} --target {name} --timeline -o {out}` "
                         "adds the schedule per unit and core, DDR bandwidth over time and the memory plan to this "
                         f"run (its measured sections are kept); `layerscope profile {model} --target {name} "
                         f"--timeline -o {out}` measures and schedules in one run.")
        else:
            stem = Path(str(run.model.path or "model")).stem
            notes.append(f"No timeline: the timeline schedules an NPU's units side by side; on this run's "
                         f"{target.kind} profile {_quoted(target.name or '?')} the layers run one after another. "
                         f"`layerscope estimate {model} --target rdk-s100 --timeline -o "
                         f"{_quoted(stem + '.rdk-s100.json')}` schedules the model on an NPU profile, in a run of "
                         "its own.")
    m = run.measurement
    if not any(layer.measured is not None for layer in layers):
        notes.append(f"No per-layer measurement: `layerscope profile {model} -o {out}` measures every layer on "
                     "ONNX Runtime; `layerscope import` reads a vendor profiler's files.")
    elif not (isinstance(m, KernelProfileMeasurement) and m.median_run):
        notes.append("No kernel events: the measurement keeps per-layer totals only (no timeline of one run).")
    if run.latency is None or run.latency.p50_us is None:
        notes.append("No end-to-end latency percentiles: `layerscope profile` or `layerscope bench` measure them.")
    if not run.model.path:
        notes.append("No ONNX model: the layers are the vendor's entries (import with --model to join them).")
    if run.findings is None:
        notes.append(f"No findings: the run has not been analysed for advice yet (`layerscope advise {out} --save`).")
    return notes
