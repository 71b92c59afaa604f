"""Markdown for a comparison: the before/after table users paste into issues and forum posts, and the per-layer
changes. Pure text; table cells escape ``|``."""

from __future__ import annotations

from layerscope.analysis.compare import Comparison
from layerscope.report.analysis_terminal import change_text, format_metric


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
    if cmp.layers:
        lines += [f"### Largest per-layer changes ({cmp.time_source} time, {len(cmp.layers)} layers matched)", "",
                  f"| # | layer | op | {_cell(cmp.before_label)} µs | {_cell(cmp.after_label)} µs | Δ µs |",
                  "|---:|---|---|---:|---:|---:|"]
        for i, d in enumerate(cmp.layers[:top], 1):
            name = d.after_id if not d.renamed else f"{d.before_id} → {d.after_id}"
            lines.append(f"| {i} | `{_cell(name)}` | {d.op_type} | {d.before_us:.1f} | {d.after_us:.1f} | "
                         f"{d.delta_us:+.1f} |")
        lines.append("")
    for label, names in (("Renamed", [f"`{_cell(d.before_id)}` → `{_cell(d.after_id)}`" for d in cmp.renamed]),
                         ("Added", [f"`{_cell(i)}` ({op})" for i, op, _ in cmp.added]),
                         ("Removed", [f"`{_cell(i)}` ({op})" for i, op, _ in cmp.removed])):
        lines.append(f"**{label}** ({len(names)}): {', '.join(names) if names else 'none'}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
