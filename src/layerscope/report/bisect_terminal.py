"""Terminal report of ``layerscope bisect``: the segment table, its context and the validation (pure functions of
the saved run; ``bisect`` and ``report --format terminal`` print the same)."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import key_value_grid
from layerscope.report.views.bisect import BisectView, SegmentRow, bisect_view
from layerscope.report.views.common import Run


def bisect_report(run: Run, top: int | None = None) -> RenderableType:
    """The segment table and the context lines of a bisect run file (a pure function of the saved run; the
    data is :func:`layerscope.report.views.bisect.bisect_view`'s, which the HTML report shows too); ``top``: the
    table shows the ``top`` segments of largest bisect time, in model order (``None``: every segment; 0: no table)."""
    view = bisect_view(run)
    assert view is not None, "bisect_report needs a run with a bisect section"
    if top == 0:
        return Group(bisect_context(run, view))
    return Group(segment_table(view, top), Text(""), bisect_context(run, view))


def largest_segments(segments: tuple[SegmentRow, ...], top: int | None) -> tuple[SegmentRow, ...]:
    """The ``top`` segments of largest bisect time (a segment without one last), in model order; ``None``: all."""
    if top is None or top >= len(segments):
        return segments
    ranked = sorted(segments, key=lambda seg: -seg.increment_us if seg.increment_us is not None else float("inf"))
    kept = {seg.index for seg in ranked[:top]}
    return tuple(seg for seg in segments if seg.index in kept)


def segment_table(view: BisectView, top: int | None = None) -> Table:
    """One row per segment (the ``top`` largest: :func:`largest_segments`): its layers, estimate, increment with
    interval, share, and what to make of it; a caption says how many were left out."""
    table = Table(title=view.title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                  pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layers", overflow="fold", min_width=16)
    table.add_column("n", justify="right", no_wrap=True)
    systematic = any(seg.systematic_us is not None for seg in view.segments)
    headers = ("est. µs", "bisect µs", f"{view.confidence_pct}% CI µs",
               *(("random CI µs", "syst. ± µs", "gap µs") if systematic else ()), "share")
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("note", no_wrap=True)
    shown = largest_segments(view.segments, top)
    if len(shown) < len(view.segments):
        table.caption = f"{len(shown)} of {len(view.segments)} segments shown, the largest by bisect µs (--top)"
        table.caption_justify = "left"
    for seg in shown:
        span = seg.first_layer if seg.layer_count == 1 else f"{seg.first_layer} … {seg.last_layer}"
        parts = (f"[{_num(seg.random_low_us)}, {_num(seg.random_high_us)}]", _num(seg.systematic_us),
                 _num(seg.gap_us)) if systematic else ()
        table.add_row(str(seg.index), Text(span), str(seg.layer_count), _num(seg.est_us), _num(seg.increment_us),
                      f"[{_num(seg.ci_low_us)}, {_num(seg.ci_high_us)}]", *parts,
                      f"{100 * seg.share:.1f}%" if seg.share is not None else "-",
                      Text(seg.note, style="yellow") if seg.note else Text(""))
    return table


def _num(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def bisect_context(run: Run, view: BisectView) -> Table:
    """Model, runner, plan, cache, whole-model time and how the segments add up to it."""
    grid = key_value_grid()
    model = run.model
    grid.add_row("model", Text(f"{model.name if model.name is not None else '?'}  "
                               f"({model.path if model.path is not None else '?'})"))
    for row in view.context:
        grid.add_row(row.label, Text(row.value))
    return grid


def validation_report(run: Run) -> RenderableType:
    """The validation table (segment, layers, bisect ± CI, profile, error) and its verdict lines."""
    view = bisect_view(run)
    assert view is not None and view.validated, "validation_report needs a validated bisect run"
    table = Table(title="Validation against `layerscope profile`", title_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 1), collapse_padding=True, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layers", overflow="fold", min_width=16)
    for header in ("bisect µs", "CI µs", "profile µs", "error", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    for seg in view.segments:
        error = f"{100 * seg.error:+.1f}%" if seg.error is not None else "-"
        table.add_row(str(seg.index), seg.layer_span, _num(seg.increment_us),
                      f"[{_num(seg.ci_low_us)}, {_num(seg.ci_high_us)}]", _num(seg.profile_us),
                      Text(error, style="red" if seg.flagged else ""),
                      f"{100 * seg.share:.1f}%" if seg.share is not None else "-")
    grid = key_value_grid()
    for row in view.validation:
        grid.add_row(row.label, Text(row.value))
    return Group(table, grid)
