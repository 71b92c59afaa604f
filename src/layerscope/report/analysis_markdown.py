"""Markdown for a comparison: the before/after table users paste into issues and forum posts, and the per-layer
changes. Pure text; table cells escape ``|``."""

from __future__ import annotations

from layerscope.analysis.compare import Comparison, RuntimeComparison
from layerscope.report.analysis_terminal import change_text, format_metric, group_text, precision_text
from layerscope.report.tables import md_code
from layerscope.textsafe import terminal_text


def _cell(text: str) -> str:
    """Plain text for a cell: one line, pipes escaped, control and bidirectional-override characters removed."""
    return terminal_text(" ".join(text.splitlines())).replace("|", "\\|")


def compare_markdown(cmp: Comparison, top: int = 10) -> str:
    """The comparison as GitHub-flavoured Markdown."""
    lines = [f"## {_cell(cmp.before_label)} → {_cell(cmp.after_label)}", "",
             f"| metric | {_cell(cmp.before_label)} | {_cell(cmp.after_label)} | change |", "|---|---:|---:|---:|"]
    for m in cmp.metrics:
        change, verdict = change_text(m)
        mark = {"better": " ✓", "worse": " ✗"}.get(verdict, "")
        lines.append(f"| {m.name} | {format_metric(m, m.before)} | {format_metric(m, m.after)} | {change}{mark} |")
    sources = sorted({m.source_before for m in cmp.metrics} | {m.source_after for m in cmp.metrics})
    lines += ["", f"Sources: {', '.join(sources)}.", ""]
    if cmp.runtimes is not None:
        lines += _runtimes(cmp.runtimes, cmp.before_label, cmp.after_label, top)
    if cmp.layers:
        lines += [f"### Largest per-layer changes ({cmp.time_source} time, {len(cmp.layers)} layers matched)", "",
                  f"| # | layer | op | {_cell(cmp.before_label)} µs | {_cell(cmp.after_label)} µs | Δ µs |",
                  "|---:|---|---|---:|---:|---:|"]
        for i, d in enumerate(cmp.layers[:top], 1):
            name = d.after_id if not d.renamed else f"{d.before_id} → {d.after_id}"
            lines.append(f"| {i} | {md_code(name)} | {_cell(d.op_type)} | {d.before_us:.1f} | {d.after_us:.1f} | "
                         f"{d.delta_us:+.1f} |")
        lines.append("")
    for label, names in (("Renamed", [f"{md_code(d.before_id)} → {md_code(d.after_id)}" for d in cmp.renamed]),
                         ("Added", [f"{md_code(i)} ({_cell(op)})" for i, op, _ in cmp.added]),
                         ("Removed", [f"{md_code(i)} ({_cell(op)})" for i, op, _ in cmp.removed])):
        lines.append(f"**{label}** ({len(names)}): {', '.join(names) if names else 'none'}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


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
