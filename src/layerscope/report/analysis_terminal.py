"""Terminal reporters for the analyses: reconcile, calibrate, advise, lint (compare's:
:mod:`layerscope.report.compare_terminal`). Pure functions from the analysis results to rich renderables; nothing
here computes a number the analysis did not.

``reconcile`` and ``advise`` print what they save: their reports are drawn from the run-file section the command
writes (:func:`reconcile_view`, :func:`spread_view`, :func:`advice_view`), so ``layerscope report RUN --format
terminal`` re-prints a saved run as the command printed it
(:func:`layerscope.report.command_terminal.command_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.analysis.board import KAnalysis
from layerscope.analysis.calibrate import Calibration, ModelError, summarize
from layerscope.analysis.findings import Finding, Severity
from layerscope.analysis.reconcile import (
    UNKNOWN_TRUST_LIMIT,
    KSpread,
    Reconciliation,
    reconcile_section,
    spread_section,
)
from layerscope.report.terminal import key_value_grid
from layerscope.report.units import human_us
from layerscope.runfile.models import Findings, Reconcile, Spread

if TYPE_CHECKING:  # analysis.advise loads ONNX models: a report of a saved run does not import it
    from layerscope.analysis.advise import AdviceReport

_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _table(title: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                 pad_edge=False)


def _grid(rows: Sequence[tuple[str, str | Text]]) -> Table:
    grid = key_value_grid()
    for key, value in rows:
        grid.add_row(key, value)
    return grid


def _k(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


# ------------------------------------------------------------------------------------------------ reconcile
def reconcile_report(rec: Reconciliation, top: int = 10, latency_stat: str = "P50") -> RenderableType:
    """What ``layerscope reconcile`` prints for one run: :func:`reconcile_view` of the ``reconcile`` section it
    saves (:func:`layerscope.analysis.reconcile.reconcile_section`), so that ``report RUN --format table`` of the
    saved run prints the same, to the digit."""
    return reconcile_view(Reconcile.model_validate(reconcile_section(rec)), rec.model_name, rec.target_name, top,
                          latency_stat)


def latency_stat_name(latency: object) -> str:
    """The statistic the end-to-end k uses, as the run's measurement names it: ``P50`` when the run has a median,
    else ``mean`` (a vendor profiler that reports its average, e.g. Horizon's ``avg_time``)."""
    return "P50" if getattr(latency, "p50_us", None) is not None else "mean"


def reconcile_view(rec: Reconcile, model_name: str, target_name: str, top: int = 10,
                   latency_stat: str = "P50") -> RenderableType:
    """k, its scope, rank agreement, the verdict, k per op type and the top layers with their errors, from a
    ``reconcile`` section; ``model_name`` and ``target_name`` name the run (as ``reconcile_run`` does; ``?``: the
    run names no target profile); ``latency_stat``: the end-to-end latency's statistic (:func:`latency_stat_name`)."""
    profile = f"profile {target_name}" if target_name not in ("", "?") else "no target profile in the run"
    rows: list[tuple[str, str | Text]] = [
        ("model", Text(f"{model_name}  ({profile})")),
        ("k", Text.assemble((f"{rec.k:.3f}", "bold cyan"),
                            f"  = measured {human_us(rec.measured_us)} / estimated {human_us(rec.estimated_us)}")),
        ("scope", Text(rec.scope or "-")),
    ]
    if rec.measured_on:
        rows.append(("measured by", Text(rec.measured_on)))
    if rec.device_mismatch:
        rows.append(("WARNING", Text(rec.device_mismatch, style="bold yellow")))
    if rec.end_to_end is not None:
        rows.append(("end to end", f"k = {rec.end_to_end.k:.3f}  (latency {latency_stat} "
                                   f"{human_us(rec.end_to_end.measured_us)}"
                                   f" / whole estimate {human_us(rec.end_to_end.estimated_us)})"))
    if rec.spearman is not None:
        rows.append(("rank corr.", f"Spearman {rec.spearman:.3f} over {len(rec.layers)} layers"))
        rows.append((f"top-{rec.top_n}", f"{_pct(rec.top_overlap)} of the measured top {rec.top_n} are in the "
                                         f"estimate's top {rec.top_n}"))
    if rec.median_abs_error is not None:
        rows.append(("layer error", f"median |scaled - measured| / measured = {_pct(rec.median_abs_error)}"))
    if rec.excluded_layers:
        rows.append(("excluded", f"{len(rec.excluded_layers)} layer(s) (eliminated by the runtime or without "
                                 "an estimate)"))
    rows += _honesty_rows(rec)
    parts: list[RenderableType] = [_grid(rows)]
    if rec.by_op_type:
        table = _table("k per op type (largest measured time first)")
        for header in ("op type", "layers", "est. µs", "meas. µs", "k"):
            table.add_column(header, justify="left" if header == "op type" else "right")
        for g in rec.by_op_type[:top]:
            table.add_row(Text(g.name), str(g.layers), f"{g.estimated_us:.1f}", f"{g.measured_us:.1f}", _k(g.k))
        parts.append(table)
        layers = sorted(rec.layers, key=lambda c: -(c.measured_us or 0.0))[:top]
        table = _table(f"Top {len(layers)} layers by measured time: estimate scaled by k against the measurement")
        for header in ("#", "layer", "op", "est. µs", "scaled µs", "meas. µs", "error"):
            table.add_column(header, justify="left" if header in ("layer", "op") else "right", overflow="fold")
        for i, c in enumerate(layers, 1):
            table.add_row(str(i), Text(c.name), Text(c.op_type or "-"), f"{c.estimated_us:.1f}", f"{c.scaled_us:.1f}",
                          f"{c.measured_us or 0.0:.1f}", _pct(c.error, signed=True))
        parts.append(table)
    parts.append(Text("Verdict", style="bold"))
    parts.extend(Text(f"  {line}") for line in (rec.verdict.lines if rec.verdict is not None else []))
    return Group(*parts)


def _honesty_rows(rec: Reconcile) -> list[tuple[str, str | Text]]:
    """The measured time in cost-unknown layers and the outlier layers (the section's ``unknown_cost`` and
    ``outliers``, written by :func:`layerscope.analysis.reconcile.reconcile_section`; absent in older runs)."""
    rows: list[tuple[str, str | Text]] = []
    unknown = rec.unknown_cost
    if unknown is not None:
        text = (f"{_pct(unknown.share)} of the measured time is in {len(unknown.layers)} layer(s) whose cost the "
                f"estimate does not know ({', '.join(unknown.op_types)})"
                + (f"; k over the known-cost layers {unknown.k_known:.3f}" if unknown.k_known is not None else "")
                if unknown.layers else "none: every measured layer's op has a cost")
        rows.append(("unknown cost", Text(text, style="bold yellow" if unknown.share > UNKNOWN_TRUST_LIMIT else "")))
    for o in rec.outliers:
        rows.append(("outlier", Text(f"{o.name} ({o.op_type}): measured {human_us(o.measured_us)} = {o.ratio:.0f}x "
                                     f"its estimate (the run's median is {o.median_ratio:.2f}x), {_pct(o.share)} of "
                                     "the measured time", style="yellow")))
    return rows


def spread_report(spread: KSpread) -> RenderableType:
    """What ``layerscope reconcile`` of several runs prints after their reports: :func:`spread_view` of the
    ``reconcile.spread`` it saves in each (:func:`layerscope.analysis.reconcile.spread_section`)."""
    return spread_view(Spread.model_validate(spread_section(spread)))


def spread_view(spread: Spread) -> RenderableType:
    """k per run, its range and dispersion, and the layer groups that drive it (a ``reconcile.spread`` section;
    ``layerscope reconcile`` names each run ``model (runtime)``)."""
    table = _table("k across runs")
    table.add_column("model (measured by)")
    table.add_column("k", justify="right")
    for run in spread.runs:
        table.add_row(Text(run.model), f"{run.k:.3f}")
    parts: list[RenderableType] = [table]
    if spread.drivers:
        drivers = _table("layer groups: share of the estimate, pooled k, k range, correlation of share with k")
        for header in ("group", "mean share", "pooled k", "k min", "k max", "r(share, k)"):
            drivers.add_column(header, justify="left" if header == "group" else "right")
        for d in spread.drivers[:8]:
            drivers.add_row(Text(d.group), _pct(d.mean_share), _k(d.pooled_k), _k(d.k_min), _k(d.k_max),
                            _k(d.share_k_correlation))
        parts.append(drivers)
    style = "bold yellow" if spread.dispersed else "green"
    parts.extend(Text(line, style=style if line.startswith("WARNING") or not spread.dispersed else "")
                 for line in spread.lines)
    return Group(*parts)


# ------------------------------------------------------------------------------------------------ calibrate
def _errors_table(title: str, errs: Sequence[ModelError]) -> Table:
    table = _table(title)
    for header in ("model", "measured", "predicted", "error", "base profile", "base error"):
        table.add_column(header, justify="left" if header == "model" else "right")
    for e in errs:
        base_error = (e.base_estimate_us - e.measured_us) / e.measured_us if e.base_estimate_us else None
        table.add_row(Text(e.model), human_us(e.measured_us), human_us(e.predicted_us), _pct(e.error, signed=True),
                      human_us(e.base_estimate_us) if e.base_estimate_us else "-", _pct(base_error, signed=True))
    return table


def _summary_line(label: str, errs: Sequence[ModelError], tolerance: float = 0.10) -> Text:
    s = summarize(errs, tolerance)
    if s is None:
        return Text(f"{label}: no models")
    return Text(f"{label}: mean |error| {_pct(s.mean_abs)}, max {_pct(s.max_abs)}, {s.within} of {s.count} within "
                f"±{s.tolerance:.0%}", style="bold")


def calibration_report(cal: Calibration, profile_path: str | None) -> RenderableType:
    """The fitted parameters, in-sample, leave-one-model-out and held-out errors, and the outlier op types."""
    p = cal.params
    table = _table(f"Fitted on {len(cal.models)} model(s) against base profile '{cal.base_profile}'")
    for header in ("unit/kind", "compute x", "overhead µs", "kernels"):
        table.add_column(header, justify="left" if header == "unit/kind" else "right")
    for group in sorted(p.compute_scale):
        table.add_row(Text(group), f"{p.scale(group):.3f}", f"{p.overhead(group):.2f}",
                      str(cal.group_rows.get(group, 0)))
    parts: list[RenderableType] = [table, Text(f"memory time x{p.memory_scale:.3f} of the base profile's (DDR "
                                               "bandwidth / that factor)")]
    parts.append(_errors_table("End-to-end latency, in sample", cal.in_sample))
    parts.append(_summary_line("in sample", cal.in_sample, cal.tolerance))
    if cal.leave_one_out:
        what = cal.holdout
        parts.append(_errors_table(f"Leave one {what} out: fitted without the {what}, then predicting it",
                                   cal.leave_one_out))
        parts.append(_summary_line(f"leave-one-{what}-out", cal.leave_one_out, cal.tolerance))
    if cal.checks:
        parts.append(_errors_table("Held-out models (--check): predicted with the full fit", cal.checks))
        parts.append(_summary_line("held-out", cal.checks, cal.tolerance))
    for o in cal.outliers:
        parts.append(Text(f"outlier: {o.op_type} kernels run {o.ratio:.1f}x the fitted estimate "
                          f"({o.kernels} kernel(s), {_pct(o.share)} of measured kernel time); one efficiency per "
                          "unit cannot express it, so models rich in it are mispredicted", style="yellow"))
    if profile_path:
        parts.append(Text(f"profile: {profile_path}  (use it with --target {profile_path})"))
    parts.append(Text(f"CALIBRATED ESTIMATE: fitted to these measurements {cal.measured_on}; other machines, thread "
                      "counts or runtimes need their own runs.", style="yellow"))
    return Group(*parts)


def board_k_report(analysis: KAnalysis) -> RenderableType:
    """The seeds' k procedure over board-measured models: k per family, its spread, Spearman, the verdict."""
    table = _table("k per family")
    for header in ("family", "models", "k"):
        table.add_column(header, justify="left" if header == "family" else "right")
    counts: dict[str, int] = {}
    for row in analysis.rows:
        counts[row.family] = counts.get(row.family, 0) + 1
    for family, k in analysis.family_k:
        table.add_row(Text(family), str(counts[family]), f"{k:.3f}")
    rho = "-" if analysis.spearman is None else f"{analysis.spearman:.2f}"
    lines = Text(f"k = board / {analysis.against}: mean {analysis.k_mean:.3f}, CV across families "
                 f"{analysis.family_cv:.1%}; Spearman (estimate vs board) {rho}")
    return Group(table, lines, Text(analysis.verdict, style="green" if analysis.steady else "bold yellow"))


# --------------------------------------------------------------------------------------------------- advise
def findings_table(findings: Sequence[Finding], title: str) -> RenderableType:
    """One block per finding: severity, rule, hazard, mitigation, layers, expected gain."""
    if not findings:
        return Text(f"{title}: none", style="green")
    parts: list[RenderableType] = [Text(title, style="bold")]
    for i, f in enumerate(findings, 1):
        measured = f.evidence.get("gain_source") == "measured"
        gain = (f"  ({'measured' if measured else 'expected'} gain {'' if measured else '~'}"
                f"{human_us(f.expected_gain_us)} per inference)") if f.expected_gain_us else ""
        parts.append(Text.assemble(f"{i:>2}. ", (f"[{f.severity.value}]", _SEVERITY_STYLE[f.severity]),
                                   (f" {f.rule_id}", "bold"), gain))
        parts.append(Text(f"    hazard:     {f.hazard}"))
        parts.append(Text(f"    mitigation: {f.mitigation}"))
        if f.layer_ids:
            more = f" ... and {len(f.layer_ids) - 4} more" if len(f.layer_ids) > 4 else ""
            parts.append(Text(f"    layers:     {', '.join(f.layer_ids[:4])}{more}"))
        key = f.evidence.get("key")
        if key is not None:
            parts.append(Text(f"    key:        {key} = {f.evidence.get('value')!r}"))
        if f.help:
            parts.append(Text(f"    help:       {f.help}", style="dim"))
    return Group(*parts)


def advice_report(report: AdviceReport, top: int = 10) -> RenderableType:
    """What ``layerscope advise`` prints: :func:`advice_view` of the ``findings`` section it saves
    (:func:`layerscope.analysis.advise.findings_of`), so that ``report RUN --format terminal`` of the saved run
    prints the same, to the digit."""
    from layerscope.analysis.advise import findings_of

    return advice_view(findings_of(report, top=top), len(report.diagnosis.layers), top)


def advice_view(findings: Findings, layer_count: int, top: int = 10) -> RenderableType:
    """Hot spots with bounds, the top-20% share, CPU fallbacks, then the findings, from a ``findings`` section
    (``layerscope advise``'s); ``layer_count``: the run's layers (the diagnosis ranks them all, the section keeps
    the top ``advise --top``)."""
    parts: list[RenderableType] = []
    diag = findings.diagnosis
    if diag is not None:
        hotspots = diag.hotspots[:top]
        table = _table(f"Top {len(hotspots)} of {layer_count} layers by {diag.time_source} time")
        for header in ("#", "layer", "op", "µs", "share", "roofline", "measured", "compute util", "DDR util", "unit"):
            table.add_column(header, justify="left" if header in ("layer", "op", "roofline", "measured", "unit")
                             else "right", overflow="fold")
        for i, d in enumerate(hotspots, 1):
            table.add_row(str(i), Text(d.id), Text(d.op_type or "?"), f"{d.time_us or 0.0:.1f}", _pct(d.share),
                          d.roofline_bound or "?", d.measured_bound or "-", _pct(d.compute_utilization),
                          _pct(d.bandwidth_utilization), Text((d.unit or "-") + (" *" if d.fallback_reason else "")))
        measured_bounds = ", ".join(f"{k} {v}" for k, v in sorted(diag.measured_bounds.items()))
        parts += [table, _grid([
            ("top 20%", f"the slowest 20% of the layers take {_pct(diag.top20_share)} of the time"),
            ("bounds", ", ".join(f"{k} {v}" for k, v in sorted(diag.roofline_bounds.items())) + " (roofline)" +
             (f"; {measured_bounds} (measured)" if measured_bounds else "")),
            ("CPU fallback", f"{len(diag.fallbacks)} layer(s)"),
        ])]
        parts.extend(Text(f"  * {d.id}: {d.fallback_reason}") for d in diag.fallbacks[:10])
    items = [Finding.from_item(item) for item in findings.items]
    parts.append(findings_table(items, f"Findings ({len(items)})"))
    for skipped in findings.skipped_rules:
        parts.append(Text(f"skipped {skipped.rule}: {skipped.reason}", style="dim"))
    return Group(*parts)


# ----------------------------------------------------------------------------------------------------- lint
def lint_report(path: str, findings: Sequence[Finding]) -> RenderableType:
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    head = Text(f"{path}: {counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s), "
                f"{counts[Severity.INFO]} note(s)", style="bold")
    return Group(head, findings_table(findings, "Findings"))
