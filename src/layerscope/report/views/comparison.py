"""Comparison view: the ``comparison`` section of ``layerscope compare``, and the text every compare output shares
(terminal, Markdown, HTML): the headline verdict, a change with its interval, each side's runtime and steadiness.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Row, Run, _layer_index, _text
from layerscope.runfile.models import ComparisonLayer, ComparisonSide

if TYPE_CHECKING:  # imported where used: the analysis package pulls in the target profiles
    from layerscope.analysis.compare import Comparison, Gate, MeasuredSide, MetricDelta
    from layerscope.analysis.compare_stats import DeltaStat


#: Per-layer rows the comparison shows (largest |delta| first).
COMPARISON_TOP = 30
#: Layers listed by name under renamed / added / removed (the counts are always complete).
COMPARISON_NAMES = 100


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


# ------------------------------------------------------------------------------------ verdicts and sides


def change_pct(stat: DeltaStat) -> str:
    """``+12.3%`` of a judged difference (``+4.0 µs`` when the before time is 0)."""
    change = stat.change
    return f"{stat.delta_us:+.1f} µs" if change is None else f"{100 * change:+.1f}%"


def interval_text(stat: DeltaStat | None) -> str:
    """The stated 95% interval of the relative change, ``+2.1% to +9.8%`` (in µs when the before time is 0);
    ``-`` when the difference is not judged."""
    if stat is None or stat.low_us is None or stat.high_us is None:
        return "-"
    low, high = stat.relative(stat.low_us), stat.relative(stat.high_us)
    if low is None or high is None:
        return f"{stat.low_us:+.1f} µs to {stat.high_us:+.1f} µs"
    return f"{100 * low:+.1f}% to {100 * high:+.1f}%"


def verdict_style(stat: DeltaStat | None) -> str:
    """``better`` (faster), ``worse`` (slower) or ``""``: the class a verdict is shown with."""
    from layerscope.analysis.compare_stats import FASTER, SLOWER

    verdict = stat.verdict if stat is not None else ""
    return {FASTER: "better", SLOWER: "worse"}.get(verdict, "")


def headline(cmp: Comparison) -> str:
    """One line: the end-to-end verdict, the change with its interval, what widened it, and the gate."""
    return headline_of(cmp.latency, cmp.noise, ((cmp.before_label, cmp.before_side), (cmp.after_label, cmp.after_side)),
                       cmp.gate)


def headline_of(latency: MetricDelta | None, noise: float | None,
                sides: Sequence[tuple[str, MeasuredSide | None]], gate: Gate | None) -> str:
    """:func:`headline` of a comparison's parts: the latency P50 row, the widening, (label, side) of both runs."""
    stat = latency.stat if latency is not None else None
    if latency is None or stat is None:
        text = "no end-to-end latency on both sides: nothing to judge"
    else:
        times = f"{format_metric(latency, latency.before)} → {format_metric(latency, latency.after)}"
        interval = interval_text(stat)
        judged = f", 95% interval {interval}" if interval != "-" else ""
        text = (f"{stat.verdict}: end-to-end latency P50 {times} ({change_pct(stat)}{judged})" if not stat.note
                else f"end-to-end latency P50 {times} ({change_pct(stat)}): {stat.verdict} ({stat.note})")
    parts = [text]
    if noise is not None and stat is not None and stat.low_us is not None:
        unsteady = [f"{label} run {side.noise.verdict}" for label, side in sides
                    if side is not None and side.noise.moved is not None]
        parts.append(f"intervals widened by ±{100 * noise:.0f}% for machine noise"
                     + (f" ({', '.join(unsteady)})" if unsteady else ""))
    if gate is not None:
        parts.append(gate_text(gate))
    return "; ".join(parts)


def gate_text(gate: Gate) -> str:
    """``gate: REGRESSION (2)`` or ``gate: passed (--fail-if-slower 5%)``."""
    if gate.regression:
        return f"gate: REGRESSION ({len(gate.failures)})"
    asked = [f"--{flag} {value:g}%" for flag, value in (("fail-if-slower", gate.fail_if_slower),
                                                         ("fail-if-layer-slower", gate.fail_if_layer_slower))
             if value is not None]
    return f"gate: passed ({', '.join(asked)})" if asked else "gate: passed"


def side_rows(before: MeasuredSide | None, after: MeasuredSide | None) -> tuple[tuple[str, str, str], ...]:
    """(what, before, after) for runtime, provider, precision, threads, machine and steadiness; ``-`` for a side
    that does not say; none when neither run was measured."""
    if all(side is None or side.runtime == "-" for side in (before, after)):
        return ()

    def fields(side: MeasuredSide | None) -> tuple[str, ...]:
        if side is None:
            return ("-",) * 6
        noise = side.noise
        steadiness = f"steadiness {noise.text}" if not noise.recorded else f"{noise.verdict}: {noise.text}"
        return side.runtime, side.provider, side.precision, side.threads, side.machine, steadiness

    names = ("runtime", "provider / device", "precision", "intra-op threads", "machine", "steadiness")
    return tuple(zip(names, fields(before), fields(after), strict=True))


def judged(stats: Sequence[DeltaStat | None]) -> bool:
    """Any of ``stats`` has an interval (else the per-layer tables leave the interval and verdict columns out)."""
    return any(stat is not None and stat.low_us is not None for stat in stats)


def saved_stat(value: Any) -> DeltaStat | None:
    """A row's stored ``stat`` (:func:`layerscope.analysis.compare.comparison_section`); ``None`` when absent or
    not of that shape (a run written before compare judged its differences)."""
    from layerscope.analysis.compare_stats import DeltaStat

    try:
        return TypeAdapter(DeltaStat).validate_python(value) if isinstance(value, dict) else None
    except ValidationError:
        return None


def saved_gate(value: Any) -> Gate | None:
    """The stored ``gate``; ``None`` when absent or not of that shape."""
    from layerscope.analysis.compare import Gate

    try:
        return TypeAdapter(Gate).validate_python(value) if isinstance(value, dict) else None
    except ValidationError:
        return None


def saved_side(value: Any) -> MeasuredSide | None:
    """A side's stored ``measured`` record; ``None`` when absent or not of that shape."""
    from layerscope.analysis.compare import MeasuredSide

    try:
        return TypeAdapter(MeasuredSide).validate_python(value) if isinstance(value, dict) else None
    except ValidationError:
        return None


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
    #: The judged rows (the end-to-end latency P50): the stated 95% interval and the verdict; ``""`` elsewhere.
    interval: str = ""
    judged: str = ""


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
    #: The relative change, its stated 95% interval, the verdict and its style (``better``, ``worse``, ``""``).
    change_text: str = "-"
    interval: str = "-"
    verdict: str = ""
    style: str = ""


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
    #: The end-to-end verdict in one line (:func:`headline`), what measured each run (what, before, after), and the
    #: gate's regressions.
    headline: str = ""
    measured: tuple[tuple[str, str, str], ...] = ()
    failures: tuple[str, ...] = ()


def comparison_view(run: Run) -> ComparisonView | None:
    """The run's ``comparison`` section; ``None`` without one."""
    section = run.comparison
    if section is None:
        return None
    from layerscope.analysis.compare import MetricDelta

    before, after = section.before or _NO_SIDE, section.after or _NO_SIDE
    before_label, after_label = before.label or "before", after.label or "after"
    metrics, deltas = [], []
    for m in section.metrics:
        stat = saved_stat(getattr(m, "stat", None))
        delta = MetricDelta(m.name or "?", m.unit or "", m.before, m.after, m.source_before or "-",
                            m.source_after or "-", "higher" if m.better == "higher" else "lower", stat)
        deltas.append(delta)
        text, verdict = change_text(delta)
        if stat is not None and stat.low_us is not None:  # judged: marked by its verdict, not by its sign
            verdict = verdict_style(stat)
        source = (delta.source_before if delta.source_before == delta.source_after
                  else f"{delta.source_before} / {delta.source_after}")
        metrics.append(MetricChange(delta.name, delta.before, delta.after, format_metric(delta, delta.before),
                                    format_metric(delta, delta.after), delta.change, text, verdict, source,
                                    interval_text(stat) if stat is not None else "",
                                    stat.verdict_text if stat is not None else ""))
    index = _layer_index(run)
    changes = [_layer_change(d, index) for d in section.layers]
    changes.sort(key=lambda c: (-abs(c.delta_us or 0.0), c.before_id))
    renamed = [f"{r.before_id} → {r.after_id}" for r in section.renamed]
    added = [f"{a.id} ({a.op_type})" for a in section.added]
    removed = [f"{r.id} ({r.op_type})" for r in section.removed]
    lists = tuple(NamedLayers(label, len(names), tuple(names[:COMPARISON_NAMES]))
                  for label, names in (("renamed", renamed), ("added", added), ("removed", removed)))
    sides = tuple(Row(side.label or default, text) for side, default in ((before, "before"), (after, "after"))
                  if (text := " · ".join(v for v in (side.model, side.path, side.target and f"target {side.target}")
                                         if v)))
    b_side, a_side = saved_side(getattr(before, "measured", None)), saved_side(getattr(after, "measured", None))
    gate = saved_gate(getattr(section, "gate", None))
    noise = getattr(section, "noise", None)
    latency = next((d for d in deltas if d.name == "latency P50"), None)
    line = headline_of(latency, noise if isinstance(noise, float) else None,
                       ((before_label, b_side), (after_label, a_side)), gate)
    return ComparisonView(before_label, after_label, sides, section.time_source or "?", tuple(metrics),
                          tuple(changes[:COMPARISON_TOP]), len(changes), lists, line,
                          side_rows(b_side, a_side) if b_side is not None or a_side is not None else (),
                          gate.failures if gate is not None else ())


def _layer_change(d: ComparisonLayer, index: Mapping[str, int]) -> LayerChange:
    stat = saved_stat(getattr(d, "stat", None))
    return LayerChange(_text(d.before_id), _text(d.after_id), index.get(_text(d.after_id)), d.op_type or "",
                       d.before_us, d.after_us, d.delta_us, bool(d.renamed),
                       change_pct(stat) if stat is not None else "-", interval_text(stat),
                       stat.verdict_text if stat is not None else "", verdict_style(stat))


_NO_SIDE = ComparisonSide()
