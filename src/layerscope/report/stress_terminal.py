"""Terminal report of the ``stress`` section (``bench --stress``, ``profile --stress``): end to end without and
with stress, the most affected layers, what ran (pure functions of the saved run)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.pipeline_terminal import _table
from layerscope.report.terminal import key_value_grid
from layerscope.report.units import fixed, us_text
from layerscope.report.views.common import Run
from layerscope.report.views.stress import StressView, stress_compared, stress_eligible, stress_measured, stress_view
from layerscope.runfile.io import stress_thresholds
from layerscope.runfile.models import Layer


def stress_report(run: Run, top: int = 10) -> RenderableType:
    """The ``stress`` section: end to end without and with stress, the most affected layers, what ran (drawn
    from :func:`layerscope.report.views.stress.stress_view`, which the HTML report shows too)."""
    view = stress_view(run)
    assert view is not None, "stress_report needs a run with a stress section"
    parts: list[RenderableType] = [Text(""), _stress_latency_table(view)]
    compared = stress_compared(run)
    if compared and top:
        min_share = stress_thresholds(run)[0]
        eligible = stress_eligible(compared, min_share=min_share, keep_sensitive=False)
        parts += [Text(""), _stress_layers_table(eligible, top, min_share)]
    parts += [Text(""), _stress_context(view)]
    return Group(*parts)


def _stress_latency_table(view: StressView) -> Table:
    processes = view.processes or 0
    table = _table(f"End to end without and with memory stress ({processes} background process"
                   f"{'es' if processes > 1 else ''}), paired rounds",
                   f"change: stressed / baseline - 1 within a round; all: the median over the rounds (they range "
                   f"from {_change(view.change_low)} to {_change(view.change_high)}); cores busy: this process's "
                   "CPU time / wall time")
    table.add_column("round", no_wrap=True)
    for header in ("baseline P50", "stressed P50", "change", "cores busy", "under stress"):
        table.add_column(header, justify="right", no_wrap=True)
    for r in view.rounds:
        table.add_row(f"{r.number} ({r.order})", us_text(r.baseline_p50_us), us_text(r.stressed_p50_us),
                      _change(r.change), _fixed2(r.baseline_cores_busy), _fixed2(r.stressed_cores_busy))
    table.add_row("all", "", "", _change(view.latency_change), "", "")
    return table


_change = fixed(1, signed=True, scale=100, suffix="%")


_fixed2 = fixed(2)


def _stress_layers_table(eligible: list[tuple[int, Layer]], top: int, min_share: float) -> Table:
    ranked = [layer for _, layer in eligible[:top]]
    table = _table(f"Layers most slowed by memory stress: top {len(ranked)} by ratio, of the {len(eligible)} "
                   f"layers with at least {min_share:.1%} of the layer time",
                   "baseline / stressed: medians over the rounds; ratio: median of the rounds' paired ratios, "
                   "min: the smallest; * memory-sensitive (rule: the run file's stress.rule)")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layer", overflow="fold", min_width=10)
    table.add_column("op", no_wrap=True)
    for header in ("baseline µs", "stressed µs", "ratio", "min"):
        table.add_column(header, justify="right", no_wrap=True)
    for rank, layer in enumerate(ranked, 1):
        meas = stress_measured(layer)
        mark = " *" if meas.memory_sensitive else ""
        table.add_row(str(rank), Text(layer.id + mark), Text(layer.op_type or ""), _fixed1(meas.stress_baseline_us),
                      _fixed1(meas.stress_median_us), _fixed2(meas.stress_ratio), _fixed2(meas.stress_ratio_min))
    return table


_fixed1 = fixed(1)


def _stress_context(view: StressView) -> Table:
    grid = key_value_grid()
    for row in view.context:
        grid.add_row(row.label, Text(row.value))
    for notice in view.warnings:
        grid.add_row(notice.level.upper(), Text(notice.text, style="red" if notice.level == "warning" else "yellow"))
    if view.order:
        grid.add_row("MEASURED", view.order)
    return grid
