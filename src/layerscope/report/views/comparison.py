"""Comparison view: the ``comparison`` section of ``layerscope compare``.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Row, Run, _layer_index, _text
from layerscope.runfile.models import ComparisonSide

if TYPE_CHECKING:  # imported where used: the analysis package pulls in the target profiles
    from layerscope.analysis.compare import MetricDelta


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


def comparison_view(run: Run) -> ComparisonView | None:
    """The run's ``comparison`` section; ``None`` without one."""
    section = run.comparison
    if section is None:
        return None
    from layerscope.analysis.compare import MetricDelta

    before, after = section.before or _NO_SIDE, section.after or _NO_SIDE
    before_label, after_label = before.label or "before", after.label or "after"
    metrics = []
    for m in section.metrics:
        delta = MetricDelta(m.name or "?", m.unit or "", m.before, m.after, m.source_before or "-",
                            m.source_after or "-", "higher" if m.better == "higher" else "lower")
        text, verdict = change_text(delta)
        source = (delta.source_before if delta.source_before == delta.source_after
                  else f"{delta.source_before} / {delta.source_after}")
        metrics.append(MetricChange(delta.name, delta.before, delta.after, format_metric(delta, delta.before),
                                    format_metric(delta, delta.after), delta.change, text, verdict, source))
    index = _layer_index(run)
    changes = [LayerChange(_text(d.before_id), _text(d.after_id), index.get(_text(d.after_id)), d.op_type or "",
                           d.before_us, d.after_us, d.delta_us, bool(d.renamed))
               for d in section.layers]
    changes.sort(key=lambda c: (-abs(c.delta_us or 0.0), c.before_id))
    renamed = [f"{r.before_id} → {r.after_id}" for r in section.renamed]
    added = [f"{a.id} ({a.op_type})" for a in section.added]
    removed = [f"{r.id} ({r.op_type})" for r in section.removed]
    lists = tuple(NamedLayers(label, len(names), tuple(names[:COMPARISON_NAMES]))
                  for label, names in (("renamed", renamed), ("added", added), ("removed", removed)))
    sides = tuple(Row(side.label or default, text) for side, default in ((before, "before"), (after, "after"))
                  if (text := " · ".join(v for v in (side.model, side.path, side.target and f"target {side.target}")
                                         if v)))
    return ComparisonView(before_label, after_label, sides, section.time_source or "?", tuple(metrics),
                          tuple(changes[:COMPARISON_TOP]), len(changes), lists)


_NO_SIDE = ComparisonSide()
