"""Terminal report of ``layerscope import``: the files, the measured (or estimated) layers, the reconcile of a
vendor's board time with its static estimate, the totals and how the join went (pure functions of the saved
run; ``import`` and ``report --format terminal`` print the same tables)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import duration_text, key_value_grid, measured_shares
from layerscope.report.units import human_us
from layerscope.report.views.common import Run
from layerscope.report.views.engine import layout_time, precision_mix_text, rate_label, throughput_text
from layerscope.runfile.derived import device_mismatch
from layerscope.runfile.models import (
    ImportInfo,
    KernelProfileMeasurement,
    Layer,
    Reconcile,
    RunFile,
    VendorMeasurement,
)

#: How many unmatched entries and warnings the summary lists before pointing to the run file.
LIST_LIMIT = 10


def import_report(run: RunFile, top: int = 20, warnings: Sequence[str] = ()) -> RenderableType:
    """Everything ``layerscope import`` prints, from the imported run; ``warnings``: what the import met that
    the run does not keep (the files' own warnings are in the run's ``import.files``)."""
    parts: list[RenderableType] = [files_table(run)]
    if top:
        if any(layer.measured is not None for layer in run.layers):
            parts.append(measured_table(run, top))
        elif any(layer.estimate is not None for layer in run.layers):
            parts.append(estimated_table(run, top))
    if run.reconcile is not None:
        parts.append(reconcile_view(run.reconcile, top))
        mismatch = device_mismatch(run)
        if mismatch:
            parts.append(Text(f"WARNING: {mismatch}.", style="bold yellow"))
    parts.append(totals_grid(run))
    parts.extend(join_lines(run))
    parts.extend(Text(f"warning: {w}", style="yellow") for w in warnings[:LIST_LIMIT])
    if len(warnings) > LIST_LIMIT:
        parts.append(Text(f"... and {len(warnings) - LIST_LIMIT} more warnings", style="yellow"))
    parts.extend(_notes(run))
    return Group(*parts)


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                 pad_edge=False)


def _import(run: Run) -> ImportInfo:
    """The run's ``import`` section; an empty one (no files, nothing joined) when the run was not imported."""
    return run.import_ if run.import_ is not None else ImportInfo()


def files_table(run: Run) -> Table:
    """One row per imported file: name, format, tool, entries, warnings."""
    files = _import(run).files
    table = _table(f"Imported {len(files)} file(s)")
    for header in ("file", "format", "tool", "entries", "warnings"):
        table.add_column(header, justify="right" if header in ("entries", "warnings") else "left")
    for f in files:
        table.add_row(Text(f.name), f.format, f.tool, str(f.entries), str(len(f.warnings)))
    return table


def _typical(layer: Layer) -> float:
    return layer.measured_us or 0.0


def measured_table(run: Run, top: int) -> Table:
    """The ``top`` layers by measured time (:attr:`layerscope.runfile.models.Layer.measured_us`), with their share
    of all the measured layers' time (:func:`layerscope.runfile.layer_shares`) and source kernel."""
    layers = [layer for layer in run.layers if layer.measured is not None]
    shares = {id(layer): s for layer, s in zip(layers, measured_shares(layers), strict=True)}
    ranked = sorted(layers, key=lambda layer: -_typical(layer))[:top]
    table = _table(f"Top {len(ranked)} of {len(layers)} measured layers")
    for header, right in (("#", True), ("layer", False), ("op", False), ("measured µs", True), ("share", True),
                          ("est. µs", True), ("kernel", False)):
        table.add_column(header, justify="right" if right else "left", overflow="fold")
    for rank, layer in enumerate(ranked, 1):
        m = layer.measured
        assert m is not None  # every listed layer is measured
        group = run.fused_group(layer)
        kernel = m.kernel or ""
        kernel = kernel if kernel != layer.id else ""
        if group:
            kernel = f"{kernel} (fused x{len(group)}{', split' if m.split else ''})"
        est = layer.estimated_us
        table.add_row(str(rank), Text(layer.id), Text(layer.op_type or "-"), f"{_typical(layer):.1f}",
                      f"{100 * (shares[id(layer)] or 0.0):.1f}%", "-" if est is None else f"{est:.1f}", Text(kernel))
    return table


def estimated_table(run: Run, top: int) -> Table:
    """The ``top`` layers by the vendor's static estimate: compute, load, store, latency, bound, unit."""
    layers = [layer for layer in run.layers if layer.estimate is not None]
    total = sum(layer.estimated_us or 0.0 for layer in layers) or 1.0
    ranked = sorted(layers, key=lambda layer: -(layer.estimated_us or 0.0))[:top]
    table = _table(f"Top {len(ranked)} of {len(layers)} layers by the static estimate")
    for header in ("#", "layer", "compute µs", "load µs", "store µs", "est. µs", "share", "bound", "unit"):
        table.add_column(header, justify="left" if header in ("layer", "bound", "unit") else "right",
                         overflow="fold")
    for rank, layer in enumerate(ranked, 1):
        e = layer.est
        latency = layer.estimated_us or 0.0
        table.add_row(str(rank), Text(layer.id), _num(e.compute_us), _num(e.load_us), _num(e.store_us),
                      f"{latency:.1f}", f"{100 * latency / total:.1f}%", e.bound or "-", Text(e.unit or "-"))
    return table


def reconcile_view(rec: Reconcile, top: int) -> RenderableType:
    """k and the static layers scaled by k (scaled = k x static), largest first; shares are of the vendor's
    static total for the block, so the listed layers' shares add up to the part of it they are."""
    head = Text.assemble(
        ("k = ", "bold"), (f"{rec.k:.3f}", "bold cyan"),
        f"  = board BPU {human_us(rec.measured_us)} ({rec.measured_source}) / static estimate "
        f"{human_us(rec.estimated_us)} ({rec.estimated_source})")
    layers = rec.layers
    shown = sorted(layers, key=lambda s: -s.share)[:top] if top else []
    listed = sum(s.share for s in layers)
    title = Text(f"Static per-layer estimates scaled by k: top {len(shown)} of {len(layers)} listed layers "
                 f"(share = of the static total {human_us(rec.estimated_us)}; the listed layers are "
                 f"{100 * listed:.1f}% of it)", style="italic")
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False)
    for header in ("#", "layer", "static µs", "share", "scaled µs"):
        table.add_column(header, justify="left" if header == "layer" else "right", overflow="fold")
    for rank, s in enumerate(shown, 1):
        table.add_row(str(rank), Text(s.name), f"{s.estimated_us:.1f}", f"{100 * s.share:.1f}%",
                      f"{s.scaled_us:.1f}")
    note = Text("SCALED ESTIMATE: static shares x board time; ranks hot spots, not a per-layer measurement.",
                style="yellow")
    return Group(head, title, table, note) if layers else Group(head, note)


def totals_grid(run: Run) -> Table:
    """Whole-model figures: model, device, precision, batch and throughput (inferences/s and samples/s), the
    precision mix of the measured kernels and the reformat (layout) time share, latency, accelerator time, static
    estimate, coverage."""
    s = run.summary
    grid = key_value_grid()
    model = run.model
    grid.add_row("model", Text(f"{model.name or '-'}  ({model.path or 'no ONNX model given'})"))
    context = _import(run).context
    if context is not None:
        if context.device:
            capability = f" (compute capability {context.compute_capability})" if context.compute_capability \
                else ""
            grid.add_row("device", Text(f"{context.device}{capability}"))
        if context.precision:
            grid.add_row("precision", Text(str(context.precision)))
        if context.batch:
            grid.add_row("batch", str(context.batch))
        throughput = throughput_text(context)
        if throughput is not None:
            grid.add_row("throughput", throughput)
    grid.add_row("layers", f"{s.layer_count} ({s.measured_layer_count} measured, "
                           f"{s.estimated_layer_count} estimated)")
    mix = precision_mix_text(run.kernels)
    if mix is not None:
        grid.add_row("precision mix", Text(mix))
    layout = layout_time(run.kernels)
    if layout is not None:
        grid.add_row("reformat", Text(
            f"{human_us(layout.time_us)} = {100 * layout.share:.1f}% of the measured time, in {layout.timed} of "
            f"{layout.kernels} reformat/copy kernels (layout work, not counted in any layer's time)"))
    latency = run.latency
    if latency is not None:
        fps = f", {latency.fps:.1f} {rate_label(context.batch if context is not None else None)}" \
            if latency.fps else ""
        grid.add_row("latency", Text(f"{duration_text(latency.mean_us)} mean{fps}  [{latency.source}]"))
    if s.accelerator_us is not None:
        grid.add_row("accelerator", f"{human_us(s.accelerator_us)} per inference (measured)")
    if s.est_latency_us is not None:
        grid.add_row("static est.", f"{human_us(s.est_latency_us)} (compiler estimate)")
    measurement = run.measurement
    if isinstance(measurement, VendorMeasurement | KernelProfileMeasurement) and measurement.coverage is not None:
        grid.add_row("coverage", f"{100 * measurement.coverage:.1f}% of the measured time joined to layers")
    return grid


def join_lines(run: Run) -> Sequence[RenderableType]:
    """How the entries were joined, and the ones that were not (never dropped silently)."""
    info = _import(run)
    target = "model layers" if info.joined_to_model else "run layers (no --model)"
    lines: list[RenderableType] = [Text(f"joined {info.joined} of {info.entries} entries to {target}; "
                                        f"{info.layout} layout; {len(info.unmatched)} unmatched or partial")]
    fusion = info.fusion_map
    if fusion is not None:
        share = "-" if fusion.mapped_share is None else f"{100 * fusion.mapped_share:.1f}%"
        lines.append(Text(f"ONNX Runtime kernels placed through its optimized graph (re-created here at level "
                          f"{fusion.opt_level}: names {fusion.kernels_named} of {fusion.kernels} kernels); "
                          f"{share} of their time on layers or layout"))
    for item in info.unmatched[:LIST_LIMIT]:
        missing = f" (missing: {', '.join(item.missing[:3])})" if item.missing else ""
        lines.append(Text(f"  {item.name}  [{item.file}]: {item.reason}{missing}"))
    if len(info.unmatched) > LIST_LIMIT:
        lines.append(Text(f"  ... and {len(info.unmatched) - LIST_LIMIT} more (see 'import.unmatched' in the "
                          "run file)"))
    return lines


def _notes(run: Run) -> list[RenderableType]:
    notes: list[RenderableType] = []
    if run.measurement is not None:
        notes.append(Text(f"MEASURED by the vendor's tool: {run.measurement.source}.", style="green"))
    if run.estimate_info is not None:
        notes.append(Text(f"ESTIMATE: {run.estimate_info.note} ({run.estimate_info.method}).", style="yellow"))
    return notes


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
