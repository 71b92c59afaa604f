"""Terminal reporters: pure functions from a saved run (typed: :class:`~layerscope.runfile.models.RunFile`) to rich
renderables. A field the run does not hold reads ``-`` (``n/a`` for a whole line), never ``None``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.noise import overhead_row, unsteady_text
from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Run
from layerscope.report.views.coverage import coverage_text
from layerscope.report.views.estimate import (
    estimate_source_text,
    predicted,
    predicted_text,
    roofline_text,
    task_text,
)
from layerscope.report.views.fallback import fallback_text
from layerscope.report.views.summary import measured_memory_text
from layerscope.report.views.weights import params_per_use_text, shared_weights_text
from layerscope.runfile.derived import layer_shares, runtime_name, steadiness_text
from layerscope.runfile.models import (
    EstimateInfo,
    KernelProfileMeasurement,
    Layer,
    Machine,
    Steadiness,
    Summary,
    TensorInfo,
    VendorMeasurement,
    field_values,
)


def key_value_grid() -> Table:
    """An empty two-column grid: bold keys on the left, values on the right."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    return grid


def count_text(value: float | None) -> str:
    """:func:`human_count` of ``value``; ``-`` when the run does not hold it."""
    return "-" if value is None else human_count(value)


def bytes_text(value: float | None) -> str:
    """:func:`human_bytes` of ``value``; ``-`` when the run does not hold it."""
    return "-" if value is None else human_bytes(value)


def duration_text(value: float | None) -> str:
    """:func:`human_us` of ``value``; ``-`` when the run does not hold it."""
    return "-" if value is None else human_us(value)


def shape_dtype_text(tensor: TensorInfo) -> str:
    """``1x3x640x640 float32`` (``?`` for an unknown shape)."""
    shape = "?" if tensor.shape is None else "x".join(map(str, tensor.shape))
    return f"{shape} {tensor.dtype}"


def tensor_text(tensor: TensorInfo) -> str:
    """``images 1x3x640x640 float32`` (``?`` for an unknown shape)."""
    return f"{tensor.name} {shape_dtype_text(tensor)}"


def measured_shares(layers: Sequence[Layer]) -> list[float | None]:
    """Each layer's share of the measured time of ``layers`` (:func:`layerscope.runfile.derived.layer_shares`, the
    one definition; it reads a layer by its JSON keys until it takes the typed layer)."""
    return layer_shares(cast("Sequence[Mapping[str, Any]]", layers), "measured")


def machine_text(machine: Machine | None, *, python: bool = False) -> str:
    """``host: CPU, 8 cores, Linux 6.1`` (and ``, Python 3.12`` with ``python``) of a measurement's ``machine``
    (:meth:`Machine.describe`; a run without the record reads ``None: None, None cores, None``)."""
    return (machine or Machine()).describe(python=python)


def _steadiness(steadiness: Steadiness) -> Mapping[str, Any]:
    # steadiness_text and unsteady (the one definition) read the section by its JSON keys until they take it typed
    return cast("Mapping[str, Any]", steadiness)


def top_layers_table(run: Run, top: int) -> Table:
    """The ``top`` layers by estimated latency: id, op, output shape, MACs, est. µs, share, bound, unit."""
    layers = run.layers
    estimated = [value or 0.0 for value in Layer.estimated_us_of(layers)]  # only the ranked layers made
    total = sum(estimated) or 1.0
    ranked = [layers[k] for k in sorted(range(len(layers)), key=lambda k: -estimated[k])[:top]]
    table = Table(title=f"Top {len(ranked)} of {len(layers)} layers by estimated latency", title_justify="left",
                  caption="* runs on the CPU (fallback): see the reasons below"
                  if any(layer.est.fallback_reason for layer in ranked) else None,
                  caption_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layer", overflow="fold", min_width=10)
    table.add_column("op", no_wrap=True)
    table.add_column("output shape", overflow="fold", min_width=9)
    for header in ("MACs", "est. µs", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("bound", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    for rank, layer in enumerate(ranked, 1):
        est = layer.est
        latency = layer.estimated_us or 0.0
        shapes = [s for s in layer.output_shapes if s is not None]
        unit = (est.unit or "-") + (" *" if est.fallback_reason else "")
        table.add_row(
            str(rank),
            Text(layer.id),
            Text(layer.op_type or "-"),
            "x".join(map(str, shapes[0])) if shapes else "-",
            human_count(layer.macs) if layer.macs else "-",
            f"{latency:.1f}",
            f"{100 * latency / total:.1f}%",
            est.bound or "-",
            Text(unit),
        )
    return table


def estimate_summary(run: Run) -> RenderableType:
    """Summary lines of an estimate: totals, latency and FPS, fallbacks, unknown ops."""
    s = run.summary
    target = run.target_or_empty
    model = run.model
    inputs = ", ".join(tensor_text(t) for t in model.inputs)
    grid = key_value_grid()
    rows: list[tuple[str, str | Text]] = [
        ("model", Text(f"{model.name}  ({model.path})")),
        ("inputs", Text(inputs)),
        ("target", Text(f"{target.name}: {target.description}  [dtype {target.dtype}]")),
        ("layers", f"{s.layer_count} runtime layers, {s.folded_count} constant nodes folded, "
                   f"{s.zero_copy_count} zero-copy"),
        ("MACs", f"{count_text(s.macs)} total, {count_text(s.tensor_macs)} conv/matmul"),
        ("params", f"{count_text(s.params)}  ({bytes_text(s.weight_bytes)} of weights as stored in the model"
                   + (f"; {per_use})" if (per_use := params_per_use_text(s)) else ")")),
        *([("shared weights", Text(shared))] if (shared := shared_weights_text(s)) else []),
        ("DDR traffic", f"{bytes_text(s.ddr_bytes)} per run"),
        *([("est. latency", Text(predicted_text(s))), ("roofline", Text(roofline_text(s, run.estimate_info)))]
          if predicted(s) else
          [("est. latency", (f"{duration_text(s.est_latency_us)}  ({s.est_fps:.1f} FPS)" if s.est_fps
                             else duration_text(s.est_latency_us)) + _task_text(s, run.estimate_info))]),
        ("CPU fallback", f"{s.cpu_fallback_count} layer(s)"),
        ("unknown ops", Text(", ".join(f"{u.op_type} x{u.count}" for u in run.unknown_ops) or "none")),
    ]
    for key, value in rows:
        grid.add_row(key, value)
    note_text = run.estimate_info.note if run.estimate_info is not None else None
    note = Text(f"ESTIMATE: {note_text}. Measure with a runtime to get real numbers.", style="yellow")
    fallbacks = [(layer_id, reason) for layer_id, reason in zip(
        field_values(run.layers, "id"), field_values(run.layers, "estimate", "fallback_reason"), strict=True)
        if reason]
    parts: list[RenderableType] = [grid]
    if fallbacks:
        parts.append(Text("CPU fallback:", style="bold"))
        parts.extend(Text(f"  {lid}: {reason}") for lid, reason in fallbacks[:10])
        if len(fallbacks) > 10:
            parts.append(Text(f"  ... and {len(fallbacks) - 10} more (see the run file)"))
    parts.append(note)
    return Group(*parts)


def _runtime(run: Run) -> str:
    """``onnxruntime 1.20.1, CPUExecutionProvider, opt level all`` of the run's measurement, with the precision a
    compiling runtime ran at (OpenVINO: read from the compiled model)."""
    m = run.measurement
    if m is None:
        return "no measurement"
    precision = getattr(m, "precision", None)  # a vendor import's measurement has none
    return f"{m.backend} {m.backend_version}, {m.provider}, opt level {m.opt_level}" + (
        f", precision {precision}" if precision else "")


def measured_layers_table(run: Run, top: int) -> Table:
    """The ``top`` layers by measured median: measured µs, share, P90, CV, est. µs, ratio, fused group."""
    measured = [layer for layer in run.layers if layer.measured_us is not None]
    shares = {id(layer): share for layer, share in zip(measured, measured_shares(measured), strict=True)}
    ranked = sorted(measured, key=lambda layer: -(layer.measured_us or 0.0))[:top]
    runtime = runtime_name(run.measurement.backend if run.measurement is not None else None)
    if any(layer.measured is not None and layer.measured.fallback_reason for layer in measured):
        ran = f"the op {runtime} ran, (fallback: R) the op the fallback runtime R ran"
    else:
        ran = f"the op {runtime} ran"
    table = Table(title=f"Top {len(ranked)} of {len(run.layers)} layers by measured time ({_runtime(run)})",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False,
                  caption=f"runtime kernel: {ran}; 'N layers': they ran as one kernel, its "
                          "time split by estimated cost (see the run file for the group)",
                  caption_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layer", overflow="fold", min_width=10)
    table.add_column("op", no_wrap=True)
    for header in ("meas. µs", "share", "P90 µs", "CV", "est. µs", "meas/est"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("runtime kernel", overflow="fold")
    kernel_ops = {k.name: k.op_type for k in run.kernels}
    for rank, layer in enumerate(ranked, 1):
        meas = layer.measured
        assert meas is not None  # every ranked layer has a measured time
        meas_us = layer.measured_us or 0.0
        est = layer.estimated_us
        ratio = f"{meas_us / est:.2f}" if est else "-"
        group = run.fused_group(layer)
        kernel = kernel_ops.get(meas.kernel or "") or "-"
        if meas.fallback_reason and meas.runtime:
            kernel = f"{kernel} (fallback: {runtime_name(meas.runtime)})"
        table.add_row(
            str(rank), Text(layer.id), Text(layer.op_type or "-"), f"{meas_us:.1f}",
            f"{100 * (shares[id(layer)] or 0.0):.1f}%", f"{meas.p90_us or 0.0:.1f}",
            f"{meas.cv or 0.0:.2f}",
            f"{est:.1f}" if est is not None else "-", ratio,
            Text(f"{kernel}, {len(group)} layers" if group else kernel))
    return table


def _percent(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def measurement_summary(run: Run) -> RenderableType:
    """What was measured, on what, and how far the instrument can be trusted (a profile's ``kernel-profile``
    measurement; what another kind of measurement does not hold reads ``-``)."""
    m, lat = run.measurement, run.latency
    profiled = m if isinstance(m, KernelProfileMeasurement) else None
    joined = m if isinstance(m, KernelProfileMeasurement | VendorMeasurement) else None
    grid = key_value_grid()
    model = run.model
    statuses = [layer.measured.status if layer.measured is not None else None for layer in run.layers]
    rows: list[tuple[str, str | Text]] = [("model", Text(f"{model.name}  ({model.path})"))]
    if lat is not None:
        fps = "-" if lat.fps is None else f"{lat.fps:.1f}"
        rows.append(("latency", f"P50 {duration_text(lat.p50_us)}  P90 {duration_text(lat.p90_us)}  "
                                f"P99 {duration_text(lat.p99_us)}  mean {duration_text(lat.mean_us)}  "
                                f"({fps} FPS, {lat.samples} uninstrumented runs)"))
    rows.append(("layers", f"{statuses.count('measured')} measured alone, {statuses.count('fused')} fused into "
                           f"shared kernels, {statuses.count('eliminated')} eliminated by the runtime"))
    steadiness = profiled.steadiness if profiled is not None else None
    if m is not None:
        unmapped = ", ".join(joined.unmapped_kernels) if joined is not None else ""
        rows += [
            ("kernels", f"{len(run.kernels)} runtime kernels; "
                        f"{_percent(profiled.mapped_share if profiled is not None else None)} of kernel time mapped "
                        f"to source layers; unmapped: {unmapped or 'none'}"),
            ("coverage", coverage_text(joined.coverage, profiled.streams if profiled is not None else None)
             if joined is not None and joined.coverage is not None else "- of each profiled run is inside kernels"),
            overhead_row(joined.overhead if joined is not None else None),
            *([("steadiness", steadiness_text(_steadiness(steadiness)))] if steadiness is not None else []),
            *([("memory", Text(memory))] if (memory := measured_memory_text(run)) is not None else []),
            *([("fallback", Text(fallback))] if (fallback := fallback_text(run)) is not None else []),
            ("runtime", f"{_runtime(run)}, intra-op threads {m.threads or 'default'}"),
            ("machine", Text(machine_text(m.machine))),
        ]
    if run.summary.est_latency_us:
        rows.append(("estimate", f"{human_us(run.summary.est_latency_us)}, "
                                 f"{estimate_source_text(run.summary, run.target_or_empty.name)}"))
    k = run.k_factor
    if k is not None:
        rows.append(("k", f"measured / estimated = {k.k:.3f}  ({k.source})"))
    for key, value in rows:
        grid.add_row(key, value)
    parts: list[RenderableType] = [grid]
    if m is not None and m.interrupted:
        parts.append(Text("INTERRUPTED: fewer runs than asked were measured.", style="red"))
    if k is not None and k.mismatch:
        parts.append(Text(f"WARNING: {k.mismatch}.", style="yellow"))
    verdict = unsteady_text(steadiness)
    if verdict is not None:
        parts.append(Text(verdict, style="yellow"))
    return Group(*parts)


def _task_text(summary: Summary, info: EstimateInfo | None) -> str:
    """What an estimate's total holds beside its layers (:func:`task_text`), after two spaces."""
    return f"  {text}" if (text := task_text(summary, info)) else ""
