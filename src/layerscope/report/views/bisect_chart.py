"""Bisect chart: the segments of a ``layerscope bisect`` run as the HTML report draws them (inline SVG in the markup,
no script): one row per segment, its measured increment as a bar with its confidence interval as an error bar,
and its estimate as a thinner bar beside it where the run holds one.

Pure functions of the bisect view (:func:`layerscope.report.views.bisect.bisect_view`); the x axis is µs, from the
lowest interval end (or 0) to the highest of the intervals, increments and estimates, on round ticks whose end
labels are anchored inside the plot."""

from __future__ import annotations

import math
from dataclasses import dataclass

from layerscope.report.units import human_us
from layerscope.report.views.bisect import BisectView, SegmentRow
from layerscope.report.views.common import nice_ceiling

#: Width of the SVG in px, the label column on the left, the margins (right, top, bottom) and a segment's row.
WIDTH = 880
LABEL_WIDTH = 260
RIGHT, TOP, BOTTOM = 24, 12, 40
ROW_HEIGHT = 24
#: Colours: the measured increment (significant / not significant or negative), its interval, the estimate.
MEASURED_COLOUR = "#4e79a7"
NOISY_COLOUR = "#a9b4c2"
INTERVAL_COLOUR = "#1d2433"
ESTIMATE_COLOUR = "#f28e2b"
#: The most characters of a segment's label (its first layer, and the last after "…").
LABEL_CHARS = 38


@dataclass(frozen=True)
class BarTick:
    """An x-axis tick: its position in px, its label and the label's anchor (``start`` / ``middle`` / ``end``)."""

    at: float
    label: str
    anchor: str


@dataclass(frozen=True)
class SegmentBar:
    """One segment's row: its label, the measured bar (``None`` when not measured), the interval's ends and the
    estimate bar (``None`` without one), in px; ``title`` the row's tooltip, ``colour`` the bar's."""

    index: int
    label: str
    y: float
    bar_x: float | None
    bar_width: float | None
    low_x: float | None
    high_x: float | None
    est_x: float | None
    est_width: float | None
    colour: str
    title: str


@dataclass(frozen=True)
class BisectChart:
    """The chart's geometry and its legend text (``confidence_pct``: the intervals' level)."""

    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int
    zero_x: float
    ticks: tuple[BarTick, ...]
    bars: tuple[SegmentBar, ...]
    confidence_pct: int
    has_estimate: bool
    has_interval: bool
    row_height: int = ROW_HEIGHT


def nice_step(span: float, steps: int = 5) -> float:
    """A round tick step (1, 2, 2.5 or 5 x 10^k) that cuts ``span`` (> 0) into at most about ``steps`` parts."""
    return nice_ceiling(span / steps)


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


def _label(row: SegmentRow) -> str:
    last = f" … {row.last_layer}" if row.layer_count > 1 else ""
    return _short(f"#{row.index} {row.first_layer}{last}")


def _title(row: SegmentRow, level: int) -> str:
    parts = [f"#{row.index}: {row.first_layer}" + (f" … {row.last_layer} ({row.layer_count} layers)"
                                                   if row.layer_count > 1 else "")]
    parts.append("increment " + (human_us(row.increment_us) if row.increment_us is not None else "not measured"))
    if row.ci_low_us is not None and row.ci_high_us is not None:
        parts.append(f"{level}% interval {human_us(row.ci_low_us)} to {human_us(row.ci_high_us)}")
    if row.est_us is not None:
        parts.append(f"estimate {human_us(row.est_us)}")
    if row.note:
        parts.append(row.note)
    return "; ".join(parts)


def bisect_chart(view: BisectView | None) -> BisectChart | None:
    """The chart of ``view``'s segments; ``None`` without a view or without a segment holding a number."""
    if view is None:
        return None
    rows = view.segments
    values = [v for r in rows for v in (r.increment_us, r.ci_low_us, r.ci_high_us, r.est_us) if v is not None]
    if not values:
        return None
    lo, hi = min(0.0, *values), max(0.0, *values)
    step = nice_step(hi - lo) if hi > lo else 1.0
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
    left, right = LABEL_WIDTH, WIDTH - RIGHT
    height = TOP + BOTTOM + ROW_HEIGHT * len(rows)
    bottom = height - BOTTOM

    def px(value: float) -> float:
        return round(left + (right - left) * (value - lo) / (hi - lo), 1)

    zero = px(0.0)
    bars = []
    for n, row in enumerate(rows):
        y = TOP + n * ROW_HEIGHT
        inc = row.increment_us
        bar_x = None if inc is None else min(zero, px(inc))
        bar_w = None if inc is None else round(abs(px(inc) - zero), 1)
        est_x = None if row.est_us is None else min(zero, px(row.est_us))
        est_w = None if row.est_us is None else round(abs(px(row.est_us) - zero), 1)
        interval = row.ci_low_us is not None and row.ci_high_us is not None
        noisy = row.negative or not row.significant
        bars.append(SegmentBar(row.index, _label(row), y, bar_x, bar_w,
                               px(row.ci_low_us) if interval and row.ci_low_us is not None else None,
                               px(row.ci_high_us) if interval and row.ci_high_us is not None else None,
                               est_x, est_w, NOISY_COLOUR if noisy else MEASURED_COLOUR,
                               _title(row, view.confidence_pct)))
    count = round((hi - lo) / step)
    ticks = tuple(BarTick(px(lo + i * step), human_us(lo + i * step),
                          "start" if i == 0 else "end" if i == count else "middle") for i in range(count + 1))
    return BisectChart(WIDTH, height, left, right, TOP, bottom, zero, ticks, tuple(bars), view.confidence_pct,
                       any(r.est_us is not None for r in rows),
                       any(b.low_x is not None for b in bars))
