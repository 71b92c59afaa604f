"""Bench sweep view: the ``bench_sweep`` section of ``bench --sweep`` as the HTML report's latency-vs-throughput chart
(inline SVG drawn in the markup, no script) and its table.

The chart: x = samples/s, y = latency per request (P90 solid, P99 dotted), one line per thread count in order of
growing load; the knee of each line ringed and labelled; the best point under the latency budget marked, the budget
a dashed line (it bounds P99) when it lies within twice the highest P99, else named above the chart. Pure functions
of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.report.units import human_us
from layerscope.report.views.common import Run, nice_ceiling
from layerscope.runfile.models import BenchSweep, BenchSweepPoint
from layerscope.stats import DRIFT_WARNING

#: The SVG's size in px and its margins (left, right, top, bottom).
WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 16, 48
#: Line colours, one per thread count (cycled).
COLOURS = ("#2f6fdf", "#d9480f", "#2b8a3e", "#7048e8", "#c2255c")


@dataclass(frozen=True)
class SweepMark:
    """One point on the chart: its index in the section, pixel position of its P90 and P99, the label of its
    tooltip, and whether it is a knee or the best point."""

    index: int
    x: float
    y_p90: float
    y_p99: float
    label: str
    knee: bool
    best: bool


@dataclass(frozen=True)
class SweepLine:
    """One thread count's points in load order, as SVG polyline coordinates."""

    threads: str
    colour: str
    p90_points: str
    p99_points: str
    marks: tuple[SweepMark, ...]


@dataclass(frozen=True)
class SweepTick:
    """An axis tick: pixel position and label."""

    at: float
    label: str


@dataclass(frozen=True)
class SweepRow:
    """One row of the table under the chart."""

    index: int
    point: BenchSweepPoint
    knee: bool
    best: bool


@dataclass(frozen=True)
class BenchSweepView:
    """The chart (lines, ticks, budget line) and the table of the sweep, with its rules and notes."""

    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int
    lines: tuple[SweepLine, ...]
    x_ticks: tuple[SweepTick, ...]
    y_ticks: tuple[SweepTick, ...]
    budget_y: float | None
    budget_text: str | None
    rows: tuple[SweepRow, ...]
    knee_rule: str
    best_text: str
    notes: tuple[str, ...]


def _rate_text(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k" if value >= 1e3 else f"{value:.0f}"


def bench_sweep_view(run: Run) -> BenchSweepView | None:
    """The chart and table of ``run.bench_sweep``; ``None`` without one or without points."""
    sweep = run.bench_sweep
    if sweep is None or not sweep.points:
        return None
    points = sweep.points
    x_max = nice_ceiling(max(p.samples_per_s or 0.0 for p in points) or 1.0)
    budget = sweep.latency_budget_us
    p99_max = max(p.p99_us or 0.0 for p in points)
    drawn = budget is not None and budget <= 2 * p99_max  # a budget far above every point would flatten them
    y_max = nice_ceiling(max(p99_max, budget if drawn and budget is not None else 0.0) or 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(value: float) -> float:
        return round(LEFT + plot_w * value / x_max, 1)

    def py(value: float) -> float:
        return round(TOP + plot_h * (1 - value / y_max), 1)

    lines = []
    for n, threads in enumerate(dict.fromkeys(p.threads for p in points)):
        members = [i for i, p in enumerate(points) if p.threads == threads]
        marks = tuple(SweepMark(i, px(points[i].samples_per_s or 0.0), py(points[i].p90_us or 0.0),
                                py(points[i].p99_us or 0.0), _label(i, points[i]), i in sweep.knees,
                                i == sweep.best) for i in members)
        lines.append(SweepLine("default" if not threads else str(threads), COLOURS[n % len(COLOURS)],
                               " ".join(f"{m.x},{m.y_p90}" for m in marks),
                               " ".join(f"{m.x},{m.y_p99}" for m in marks), marks))
    ticks = (0.0, 0.25, 0.5, 0.75, 1.0)
    return BenchSweepView(
        WIDTH, HEIGHT, LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM, tuple(lines),
        tuple(SweepTick(px(t * x_max), _rate_text(t * x_max)) for t in ticks),
        tuple(SweepTick(py(t * y_max), human_us(t * y_max)) for t in ticks),
        py(budget) if drawn and budget is not None else None,
        None if budget is None else f"P99 budget {human_us(budget)}{'' if drawn else ' (above the chart)'}",
        tuple(SweepRow(i, p, i in sweep.knees, i == sweep.best) for i, p in enumerate(points)),
        (f"knee: #{', #'.join(map(str, sweep.knees))}" if sweep.knees else "no knee within the points measured")
        + (f" ({sweep.knee_rule})" if sweep.knee_rule else ""), _best_text(sweep), _notes(sweep))


def _label(index: int, p: BenchSweepPoint) -> str:
    batch = f" batch {p.batch}" if p.batch is not None else ""
    return (f"#{index}: streams {p.streams}{batch}, threads {p.threads or 'default'}: "
            f"{_rate_text(p.samples_per_s or 0.0)} samples/s, P90 {human_us(p.p90_us or 0.0)}, "
            f"P99 {human_us(p.p99_us or 0.0)}")


def _best_text(sweep: BenchSweep) -> str:
    if sweep.latency_budget_us is None:
        return "no latency budget given (bench --sweep ... --latency-budget 20ms chooses the best point within it)"
    if sweep.best is None:
        return f"no point meets the P99 budget of {human_us(sweep.latency_budget_us)}"
    return f"best within the P99 budget of {human_us(sweep.latency_budget_us)}: #{sweep.best}"


def _notes(sweep: BenchSweep) -> tuple[str, ...]:
    notes = [f"a stream is {sweep.concurrency}" if sweep.concurrency else "",
             sweep.batch_note or "", sweep.budget_rule or ""]
    unsteady = sum(1 for p in sweep.points if p.steady is False)
    if unsteady:
        notes.append(f"UNSTEADY: {unsteady} of {len(sweep.points)} points had a run-to-run CV or drift above "
                     f"{DRIFT_WARNING:.0%}")
    return tuple(n for n in notes if n)
