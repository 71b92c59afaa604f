"""Terminal report of ``layerscope pipeline``: top items, stages, the end-to-end breakdown (pure functions of the
saved run; ``pipeline`` and ``report --format terminal`` print the same)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import key_value_grid
from layerscope.report.units import human_us
from layerscope.report.views.common import Run


def _table(title: str, caption: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                 pad_edge=False, caption=caption, caption_justify="left")


def _share(value: float, total: float) -> str:
    return f"{100 * value / total:.1f}%" if total > 0 else "-"


def pipeline_report(run: Run, top: int = 15) -> RenderableType:
    """The top items (user stages and model layers), the stages, and the end-to-end breakdown."""
    section = run["pipeline"]
    parts: list[RenderableType] = []
    if top:
        parts += [top_items_table(section, top), Text("")]
    parts += [stages_table(section), Text(""), pipeline_summary(run)]
    return Group(*parts)


def top_items_table(section: Mapping[str, Any], top: int) -> Table:
    """User stages (self time) and model layers (measured) ranked together by median."""
    items = section["top"][:top]
    table = _table(f"Top {len(items)} items of pipeline {section['function']} by median time",
                   "stage: a trace point, its self time (without nested trace points); layer: a model layer, "
                   "measured with the profiler on")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("item", overflow="fold", min_width=10)
    table.add_column("kind", no_wrap=True)
    for header in ("median µs", "share", "P90 µs"):
        table.add_column(header, justify="right", no_wrap=True)
    for rank, item in enumerate(items, 1):
        kind = "layer" if item["kind"] == "layer" else f"stage ({item['kind']})"
        table.add_row(str(rank), Text(item["name"]), kind, f"{item['median_us']:.1f}", f"{100 * item['share']:.1f}%",
                      f"{item['p90_us']:.1f}")
    return table


def stages_table(section: Mapping[str, Any]) -> Table:
    """Every stage: kind, calls per run, time covered (P50, P90) and self time, share of the end to end."""
    e2e = section["end_to_end"]["median_us"]
    table = _table(f"Stages over {section['runs']} runs",
                   "pre / post: before the first / after the last model call; between: around or between model "
                   "calls; share: of the median end to end")
    table.add_column("stage", overflow="fold", min_width=10)
    table.add_column("kind", no_wrap=True)
    for header in ("calls/run", "P50", "P90", "self P50", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    for level, stage in _tree(section["stages"]):
        stats = stage["stats"]
        table.add_row(Text("  " * level + stage["name"]), stage["kind"],
                      f"{stage['calls_per_run']:g}", human_us(stats["median_us"]), human_us(stats["p90_us"]),
                      human_us(stage["self"]["median_us"]), _share(stats["median_us"], e2e))
    return table


def _tree(stages: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The stages as a tree (each followed by the stages inside it), keeping their order among siblings."""
    names = {stage["name"] for stage in stages}
    out: list[tuple[int, Mapping[str, Any]]] = []
    placed: set[int] = set()

    def visit(parent: str | None, level: int) -> None:
        for index, stage in enumerate(stages):
            own_parent = stage.get("parent") if stage.get("parent") in names else None
            if index not in placed and own_parent == parent:
                placed.add(index)
                out.append((level, stage))
                visit(stage["name"], level + 1)

    visit(None, 0)
    out.extend((0, stage) for index, stage in enumerate(stages) if index not in placed)  # cycles (recursion)
    return out


def pipeline_summary(run: Run) -> Table:
    """End to end, the breakdown, the model's latency, and what it was measured on."""
    section = run["pipeline"]
    e2e, b = section["end_to_end"], section["breakdown"]
    grid = key_value_grid()
    grid.add_row("end to end", f"P50 {human_us(e2e['median_us'])}  P90 {human_us(e2e['p90_us'])}  "
                               f"P99 {human_us(e2e['p99_us'])}  mean {human_us(e2e['mean_us'])}  "
                               f"({section['runs']} runs)")
    total = b["end_to_end_us"]
    grid.add_row("breakdown", "  ".join(f"{label} {human_us(b[key])} ({_share(b[key], total)})" for label, key in
                                        (("pre", "pre_us"), ("model", "model_us"), ("post", "post_us"),
                                         ("other", "other_us"))) + "  (means per run; they add up)")
    model = run["model"]
    calls = section["model_calls_per_run"]
    lat = run.get("latency")
    model_line = f"{model['name']}, {calls:g} call(s) per run"
    if lat:
        model_line += f"; model.run P50 {human_us(lat['p50_us'])} (profiler off)"
    grid.add_row("model", Text(model_line))
    m = run.get("measurement")
    if m:
        grid.add_row("runtime", f"{m['backend']} {m['backend_version']}, {m['provider']}, opt level "
                                f"{m['opt_level']}, intra-op threads {m['threads'] or 'default'}")
        grid.add_row("layers", f"{100 * m['coverage']:.1f}% of each profiled model call inside kernels; "
                               f"{100 * m['mapped_share']:.1f}% of kernel time mapped to layers")
        machine = m["machine"]
        grid.add_row("machine", Text(f"{machine.get('hostname')}: {machine.get('cpu')}, {machine.get('cores')} cores"))
    trace = section["trace"]
    grid.add_row("traced run", f"run {trace['run']} of the {trace['phase']} phase (the median one)")
    if calls == 0:
        grid.add_row("WARNING", Text("the function never called model.run: nothing was measured of the model",
                                     style="red"))
    if section["interrupted"]:
        grid.add_row("INTERRUPTED", "fewer runs than asked were measured")
    return grid
