"""Terminal report of ``layerscope pipeline``: top items, stages, the end-to-end breakdown (pure functions of the
saved run; ``pipeline`` and ``report --format terminal`` print the same)."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import key_value_grid
from layerscope.report.units import human_us
from layerscope.report.views.common import Run
from layerscope.report.views.pipeline import stage_tree
from layerscope.runfile.models import KernelProfileMeasurement, Machine, Pipeline, PipelineBreakdown, PipelineStats


def _table(title: str, caption: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                 pad_edge=False, caption=caption, caption_justify="left")


def _share(value: float | None, total: float | None) -> str:
    return f"{100 * value / total:.1f}%" if value is not None and total else "-"


def _us(value: float | None) -> str:
    """``human_us``, ``-`` for a time the run does not hold."""
    return "-" if value is None else human_us(value)


def _fixed(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def pipeline_report(run: Run, top: int = 15) -> RenderableType:
    """The top items (user stages and model layers), the stages, and the end-to-end breakdown (a one-line note
    when the run has no ``pipeline`` section)."""
    section = run.pipeline
    if section is None:
        return Text("No pipeline section in this run: `layerscope pipeline SCRIPT:FUNCTION MODEL` makes one.",
                    style="yellow")
    parts: list[RenderableType] = []
    if top:
        parts += [top_items_table(section, top), Text("")]
    parts += [stages_table(section), Text(""), pipeline_summary(run)]
    return Group(*parts)


def top_items_table(section: Pipeline, top: int) -> Table:
    """User stages (self time) and model layers (measured) ranked together by median."""
    items = section.top[:top]
    table = _table(f"Top {len(items)} items of pipeline {section.function} by median time",
                   "stage: a trace point, its self time (without nested trace points); layer: a model layer, "
                   "measured with the profiler on")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("item", overflow="fold", min_width=10)
    table.add_column("kind", no_wrap=True)
    for header in ("median µs", "share", "P90 µs"):
        table.add_column(header, justify="right", no_wrap=True)
    for rank, item in enumerate(items, 1):
        kind = "layer" if item.kind == "layer" else f"stage ({item.kind})"
        share = "-" if item.share is None else f"{100 * item.share:.1f}%"
        table.add_row(str(rank), Text(item.name), kind, _fixed(item.median_us), share, _fixed(item.p90_us))
    return table


def stages_table(section: Pipeline) -> Table:
    """Every stage: kind, calls per run, time covered (P50, P90) and self time, share of the end to end."""
    e2e = (section.end_to_end or PipelineStats()).median_us
    table = _table(f"Stages over {section.runs} runs",
                   "pre / post: before the first / after the last model call; between: around or between model "
                   "calls; share: of the median end to end")
    table.add_column("stage", overflow="fold", min_width=10)
    table.add_column("kind", no_wrap=True)
    for header in ("calls/run", "P50", "P90", "self P50", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    for level, stage in stage_tree(section.stages):
        stats, own = stage.stats or PipelineStats(), stage.self_time or PipelineStats()
        table.add_row(Text("  " * level + stage.name), stage.kind or "-", _fixed(stage.calls_per_run, "g"),
                      _us(stats.median_us), _us(stats.p90_us), _us(own.median_us), _share(stats.median_us, e2e))
    return table


def pipeline_summary(run: Run) -> Table:
    """End to end, the breakdown, the model's latency, and what it was measured on."""
    section = run.pipeline
    grid = key_value_grid()
    if section is None:
        return grid
    e2e, b = section.end_to_end or PipelineStats(), section.breakdown or PipelineBreakdown()
    grid.add_row("end to end", f"P50 {_us(e2e.median_us)}  P90 {_us(e2e.p90_us)}  P99 {_us(e2e.p99_us)}  "
                               f"mean {_us(e2e.mean_us)}  ({section.runs} runs)")
    total = b.end_to_end_us
    grid.add_row("breakdown", "  ".join(f"{label} {_us(value)} ({_share(value, total)})" for label, value in
                                        (("pre", b.pre_us), ("model", b.model_us), ("post", b.post_us),
                                         ("other", b.other_us))) + "  (means per run; they add up)")
    calls = section.model_calls_per_run
    model_line = f"{run.model.name}, {_fixed(calls, 'g')} call(s) per run"
    if run.latency is not None and run.latency.p50_us is not None:
        model_line += f"; model.run P50 {human_us(run.latency.p50_us)} (profiler off)"
    grid.add_row("model", Text(model_line))
    m = run.measurement
    if m is not None:
        grid.add_row("runtime", f"{m.backend} {m.backend_version}, {m.provider}, opt level "
                                f"{m.opt_level}, intra-op threads {m.threads or 'default'}")
        if isinstance(m, KernelProfileMeasurement) and m.coverage is not None and m.mapped_share is not None:
            grid.add_row("layers", f"{100 * m.coverage:.1f}% of each profiled model call inside kernels; "
                                   f"{100 * m.mapped_share:.1f}% of kernel time mapped to layers")
        machine = m.machine or Machine()
        grid.add_row("machine", Text(f"{machine.hostname}: {machine.cpu}, {machine.cores} cores"))
    trace = section.trace
    if trace is not None:
        grid.add_row("traced run", f"run {trace.run} of the {trace.phase} phase (the median one)")
    if calls == 0:
        grid.add_row("WARNING", Text("the function never called model.run: nothing was measured of the model",
                                     style="red"))
    if section.interrupted:
        grid.add_row("INTERRUPTED", "fewer runs than asked were measured")
    return grid
