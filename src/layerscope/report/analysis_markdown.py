"""Markdown for a comparison, shaped for a pull-request comment: the verdict line first, the gate's regressions,
what measured each run and how steady it was, the before/after table with the end-to-end interval, and the
largest per-layer changes with their intervals and verdicts. Pure text; table cells escape ``|``."""

from __future__ import annotations

from layerscope.analysis.compare import Comparison, RuntimeComparison
from layerscope.report.compare_terminal import group_text, precision_text
from layerscope.report.tables import md_code
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
from layerscope.textsafe import terminal_text

_MARK = {"better": " ✓", "worse": " ✗"}


def _cell(text: str) -> str:
    """Plain text for a cell: one line, pipes escaped, control and bidirectional-override characters removed."""
    return terminal_text(" ".join(text.splitlines())).replace("|", "\\|")


def compare_markdown(cmp: Comparison, top: int = 10) -> str:
    """The comparison as GitHub-flavoured Markdown (a pull-request comment)."""
    b, a = _cell(cmp.before_label), _cell(cmp.after_label)
    latency = cmp.latency
    mark = _MARK.get(verdict_style(latency.stat if latency is not None else None), "")
    lines = [f"## {b} → {a}", "", f"**{_cell(headline(cmp))}**{mark}", ""]
    if cmp.gate is not None and cmp.gate.failures:
        lines += [f"- regression: {_cell(failure)}" for failure in cmp.gate.failures] + [""]
    rows = side_rows(cmp.before_side, cmp.after_side)
    if rows:
        lines += [f"| | {b} | {a} |", "|---|---|---|"]
        lines += [f"| {what} | {_cell(before)} | {_cell(after)} |" for what, before, after in rows]
        lines.append("")
    lines += [f"| metric | {b} | {a} | change | 95% interval | verdict |", "|---|---:|---:|---:|---:|---|"]
    for m in cmp.metrics:
        change, verdict = change_text(m)
        if m.stat is not None and m.stat.low_us is not None:  # judged: marked by its verdict, not by its sign
            verdict = verdict_style(m.stat)
        judged = (f"{interval_text(m.stat)} | {_cell(m.stat.verdict_text)}" if m.stat is not None else " | ")
        lines.append(f"| {m.name} | {format_metric(m, m.before)} | {format_metric(m, m.after)} | "
                     f"{change}{_MARK.get(verdict, '')} | {judged} |")
    sources = sorted({m.source_before for m in cmp.metrics} | {m.source_after for m in cmp.metrics})
    lines += ["", f"Sources: {', '.join(sources)}.", ""]
    if cmp.runtimes is not None:
        lines += _runtimes(cmp.runtimes, cmp.before_label, cmp.after_label, top)
    if cmp.layers:
        lines += _layers(cmp, top)
    for label, names in (("Renamed", [f"{md_code(d.before_id)} → {md_code(d.after_id)}" for d in cmp.renamed]),
                         ("Added", [f"{md_code(i)} ({_cell(op)})" for i, op, _ in cmp.added]),
                         ("Removed", [f"{md_code(i)} ({_cell(op)})" for i, op, _ in cmp.removed])):
        lines.append(f"**{label}** ({len(names)}): {', '.join(names) if names else 'none'}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _layers(cmp: Comparison, top: int) -> list[str]:
    """The largest per-layer changes; with their change, interval and verdict when any of them is judged."""
    b, a = _cell(cmp.before_label), _cell(cmp.after_label)
    shown = cmp.layers[:top]
    with_stats = judged([d.stat for d in shown])
    extra = (" change | 95% interval | verdict |", "---:|---:|---|") if with_stats else ("", "")
    lines = [f"### Largest per-layer changes ({cmp.time_source} time, {len(cmp.layers)} layers matched)", "",
             f"| # | layer | op | {b} µs | {a} µs | Δ µs |{extra[0]}", f"|---:|---|---|---:|---:|---:|{extra[1]}"]
    for i, d in enumerate(shown, 1):
        name = d.after_id if not d.renamed else f"{d.before_id} → {d.after_id}"
        stat = d.stat
        row = (f"| {i} | {md_code(name)} | {_cell(d.op_type)} | {d.before_us:.1f} | {d.after_us:.1f} | "
               f"{d.delta_us:+.1f} |")
        if with_stats:
            row += (f" {change_pct(stat)} | {interval_text(stat)} | {_cell(stat.verdict_text)}"
                    f"{_MARK.get(verdict_style(stat), '')} |" if stat is not None else " - | - | - |")
        lines.append(row)
    return [*lines, ""]


def _runtimes(rt: RuntimeComparison, before: str, after: str, top: int) -> list[str]:
    """Where each runtime spends its time (per op type), then the layers fused differently or run at another
    precision: the Markdown of the terminal's runtime comparison."""
    b, a = _cell(before), _cell(after)
    lines = ["### Where each runtime spends its time", "",
             f"{b} = {_cell(rt.before.text)}; {a} = {_cell(rt.after.text)}", "",
             f"| op | {b} µs | {a} µs | Δ µs |", "|---|---:|---:|---:|"]
    lines += [f"| {_cell(op)} | {tb:.1f} | {ta:.1f} | {ta - tb:+.1f} |" for op, tb, ta in rt.by_op[:max(top, 1)]]
    lines.append("")
    differ = rt.differing
    if not differ:
        return [*lines, "Both runtimes fused the same layers together, at the same precision.", ""]
    lines += [f"### Fused differently: {len(rt.fused_differently)} layers; other precision: "
              f"{len(rt.precision_differs)} layers", "",
              f"| layer | op | {b} µs | {a} µs | {b} group | {a} group | precision |",
              "|---|---|---:|---:|---|---|---|"]
    lines += [f"| {md_code(x.layer_id)} | {_cell(x.op_type)} | {x.before_us:.1f} | {x.after_us:.1f} | "
              f"{_cell(group_text(x.before_group, x.before_kernel))} | "
              f"{_cell(group_text(x.after_group, x.after_kernel))} | {_cell(precision_text(x))} |"
              for x in differ[:top]]
    return [*lines, ""]
