"""Terminal report of ``layerscope compare``: the verdict line, what measured each run and how steady it was, the
before/after table, the largest per-layer changes with their intervals and verdicts, and the renamed, added and
removed layers. Pure functions from the comparison to rich renderables.

``compare`` prints what it saves: :func:`saved_comparison` reads the run file's ``comparison`` section back into
the :class:`~layerscope.analysis.compare.Comparison` it was written from, so ``layerscope report RUN --format
terminal`` re-prints a saved comparison as the command printed it."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.analysis.compare import (
    Comparison,
    Gate,
    LayerDelta,
    LayerRuntime,
    MeasuredSide,
    MetricDelta,
    RuntimeComparison,
)
from layerscope.errors import RunFileError
from layerscope.report.views.comparison import (
    change_pct,
    change_text,
    format_metric,
    headline,
    interval_text,
    judged,
    side_rows,
    verdict_style,
)
from layerscope.runfile.io import describe
from layerscope.runfile.models import Comparison as ComparisonSection

_STYLE = {"better": "green", "worse": "red"}


def _table(title: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                 pad_edge=False)


@dataclass(frozen=True)
class _Side:
    """A compared run as a ``comparison`` section names it (its label is the table's column) and what measured
    it."""

    label: str | None = None
    measured: MeasuredSide | None = None


@dataclass(frozen=True)
class _OneSideLayer:
    """A layer of one run only (``added`` or ``removed``) as the section stores it."""

    id: str
    op_type: str
    time_us: float


@dataclass(frozen=True)
class _SavedComparison:
    """What a ``comparison`` section holds of the :class:`~layerscope.analysis.compare.Comparison` it was written
    from (:func:`layerscope.analysis.compare.comparison_section`): every metric and matched layer, in order."""

    time_source: str
    before: _Side | None = None
    after: _Side | None = None
    metrics: tuple[MetricDelta, ...] = ()
    layers: tuple[LayerDelta, ...] = ()
    added: tuple[_OneSideLayer, ...] = ()
    removed: tuple[_OneSideLayer, ...] = ()
    noise: float | None = None
    gate: Gate | None = None


_SAVED_COMPARISON = TypeAdapter(_SavedComparison)


def saved_comparison(section: ComparisonSection) -> Comparison:
    """The comparison a run's ``comparison`` section stores (``layerscope compare -o``), as
    :func:`layerscope.analysis.compare.compare_runs` returned it: metrics, matched layers (largest change first)
    with their judged differences, added and removed layers, each side's runtime and steadiness, the gate; times as
    stored (µs to the nanosecond: the run files' own precision).

    The section is parsed from its JSON form into the analysis's types (``RunFileError`` when it lacks what the
    comparison needs), so it reads the same whether its rows are typed or not."""
    try:
        saved = _SAVED_COMPARISON.validate_python(section.model_dump(mode="json"))
    except ValidationError as exc:
        raise RunFileError(f"run: comparison.{describe(exc)}", hint="re-run `layerscope compare -o`") from None

    def only(rows: tuple[_OneSideLayer, ...]) -> tuple[tuple[str, str, float], ...]:
        return tuple((row.id, row.op_type, row.time_us) for row in rows)

    before, after = saved.before or _Side(), saved.after or _Side()
    return Comparison(before.label or "before", after.label or "after", saved.metrics, saved.layers,
                      only(saved.added), only(saved.removed), saved.time_source, None, before.measured,
                      after.measured, saved.noise, saved.gate)


def compare_report(cmp: Comparison, top: int = 10) -> RenderableType:
    """The verdict line, the runs' sides, the before/after table, then the largest per-layer changes and the
    renamed, added and removed layers."""
    parts: list[RenderableType] = [Text(headline(cmp), style="bold")]
    if cmp.gate is not None:
        parts += [Text(f"  regression: {failure}", style="red") for failure in cmp.gate.failures]
    parts.append(Text(""))
    measured = side_rows(cmp.before_side, cmp.after_side)
    if measured:
        sides = _table()
        for header in ("", cmp.before_label, cmp.after_label):
            sides.add_column(header, overflow="fold")
        for what, before, after in measured:
            sides.add_row(what, Text(before, style=_steadiness_style(before)), Text(after,
                                                                                  style=_steadiness_style(after)))
        parts.append(sides)
    parts.append(_metrics(cmp))
    if cmp.layers:
        parts.append(_layers(cmp, top))
    for label, rows in (("renamed", [(f"{d.before_id} -> {d.after_id}", d.op_type) for d in cmp.renamed]),
                        ("added", [(i, op) for i, op, _ in cmp.added]),
                        ("removed", [(i, op) for i, op, _ in cmp.removed])):
        if rows:
            shown = ", ".join(f"{name} ({op})" for name, op in rows[:8])
            more = f" ... and {len(rows) - 8} more" if len(rows) > 8 else ""
            parts.append(Text(f"{label} ({len(rows)}): {shown}{more}"))
        else:
            parts.append(Text(f"{label}: none", style="dim"))
    if cmp.runtimes is not None:
        parts.extend(runtimes_report(cmp.runtimes, cmp.before_label, cmp.after_label, top))
    return Group(*parts)


def _steadiness_style(text: str) -> str:
    return "yellow" if text.startswith("UNSTEADY") else ""


def _metrics(cmp: Comparison) -> Table:
    table = _table(f"{cmp.before_label} -> {cmp.after_label}")
    for header in ("metric", cmp.before_label, cmp.after_label, "change", "95% interval", "verdict", "source"):
        table.add_column(header, justify="left" if header in ("metric", "verdict", "source") else "right")
    for m in cmp.metrics:
        change, verdict = change_text(m)
        if m.stat is not None and m.stat.low_us is not None:  # judged: coloured by its verdict, not by its sign
            verdict = verdict_style(m.stat)
        source = m.source_before if m.source_before == m.source_after else f"{m.source_before} / {m.source_after}"
        judged = m.stat.verdict_text if m.stat is not None else ""
        table.add_row(m.name, format_metric(m, m.before), format_metric(m, m.after),
                      Text(change, style=_STYLE.get(verdict, "")), interval_text(m.stat) if m.stat else "",
                      Text(judged, style=_STYLE.get(verdict_style(m.stat), "")), Text(source, style="dim"))
    return table


def _layers(cmp: Comparison, top: int) -> Table:
    shown = cmp.layers[:top]
    with_stats = judged([d.stat for d in shown])
    layers = _table(f"Largest per-layer changes ({cmp.time_source} time), {len(cmp.layers)} layers matched")
    headers = ("#", "layer", "op", cmp.before_label + " µs", cmp.after_label + " µs", "delta µs")
    for header in headers + (("change", "95% interval", "verdict") if with_stats else ()):
        layers.add_column(header, justify="left" if header in ("layer", "op", "verdict") else "right",
                          overflow="fold")
    for i, d in enumerate(shown, 1):
        name = d.after_id if not d.renamed else f"{d.before_id} -> {d.after_id}"
        stat = d.stat
        cells: list[str | Text] = [str(i), Text(name), Text(d.op_type), f"{d.before_us:.1f}", f"{d.after_us:.1f}",
                                   f"{d.delta_us:+.1f}"]
        if with_stats:
            cells += [change_pct(stat) if stat is not None else "-", interval_text(stat),
                      Text(stat.verdict_text if stat is not None else "-", style=_STYLE.get(verdict_style(stat), ""))]
        layers.add_row(*cells)
    return layers


def runtimes_report(rt: RuntimeComparison, before: str, after: str, top: int = 10) -> list[RenderableType]:
    """Two runtimes on one model: time per op type on each, then the layers each fused differently or ran at
    another precision (largest time first), with the kernel and group each ran in."""
    ops = _table(f"Where each runtime spends its time: {before} = {rt.before.text}, {after} = {rt.after.text}")
    for header in ("op", before + " µs", after + " µs", "delta µs"):
        ops.add_column(header, justify="left" if header == "op" else "right")
    for op, b, a in rt.by_op[:max(top, 1)]:
        ops.add_row(Text(op), f"{b:.1f}", f"{a:.1f}", f"{a - b:+.1f}")
    parts: list[RenderableType] = [ops]
    differ = rt.differing
    if differ:
        table = _table(f"Fused differently: {len(rt.fused_differently)} layers; other precision: "
                       f"{len(rt.precision_differs)} layers")
        for header in ("layer", "op", before + " µs", after + " µs", before + " group", after + " group",
                       "precision"):
            table.add_column(header, justify="right" if header.endswith("µs") else "left", overflow="fold")
        for x in differ[:top]:
            table.add_row(Text(x.layer_id), Text(x.op_type), f"{x.before_us:.1f}", f"{x.after_us:.1f}",
                          Text(group_text(x.before_group, x.before_kernel)),
                          Text(group_text(x.after_group, x.after_kernel)), Text(precision_text(x)))
        parts.append(table)
    else:
        parts.append(Text("both runtimes fused the same layers together, at the same precision", style="dim"))
    return parts


def precision_text(x: LayerRuntime) -> str:
    """A layer's precision on both runtimes: one value when they agree, ``before / after`` else, ``-`` unknown."""
    return (x.before_precision if not x.precision_differs else f"{x.before_precision} / {x.after_precision}") or "-"


def group_text(layers: tuple[str, ...], kernel: str) -> str:
    """The kernel a layer ran in and the layers fused with it (the first four), or ``eliminated``."""
    if not layers:
        return "eliminated"
    names = ", ".join(layers[:4]) + (f" +{len(layers) - 4}" if len(layers) > 4 else "")
    return f"{kernel}: {names}" if kernel else names
