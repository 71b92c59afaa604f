"""Pipeline view: the ``pipeline`` section of ``layerscope pipeline``.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from layerscope.report.units import human_us
from layerscope.report.views.common import Row, Run
from layerscope.runfile.models import PipelineBreakdown, PipelineStage, PipelineStats

#: Rows of the pipeline's top items.
PIPELINE_TOP = 15


# ------------------------------------------------------------------------------------------- pipeline


@dataclass(frozen=True)
class BreakdownPart:
    """Pre, model, post or other: mean µs per run and share of the mean end to end."""

    label: str
    time_us: float
    share: float | None


@dataclass(frozen=True)
class StageRow:
    """A trace point or the model over the runs; ``level``: nesting under its parent stage."""

    name: str
    level: int
    kind: str
    calls_per_run: float | None
    median_us: float | None
    p90_us: float | None
    self_median_us: float | None
    share: float | None


@dataclass(frozen=True)
class TopItem:
    """A user stage (self time) or a model layer (measured) in the pipeline's ranking."""

    name: str
    kind: str
    layer_index: int | None
    median_us: float | None
    p90_us: float | None
    share: float | None


@dataclass(frozen=True)
class PipelineView:
    """The ``pipeline`` section: end to end, the breakdown, the stages and the top items."""

    function: str
    runs: int | None
    end_to_end: tuple[Row, ...]
    breakdown: tuple[BreakdownPart, ...]
    breakdown_total_us: float | None
    stages: tuple[StageRow, ...]
    top: tuple[TopItem, ...]
    notes: tuple[str, ...]


def stage_tree(stages: Sequence[PipelineStage]) -> list[tuple[int, PipelineStage]]:
    """The stages as a tree (each followed by the stages inside it), keeping their order among siblings; a stage
    deeper than 32 levels or in a cycle of parents is listed at level 0 (the HTML and terminal reports)."""
    names = {stage.name for stage in stages}
    out: list[tuple[int, PipelineStage]] = []
    placed: set[int] = set()

    def visit(parent: str | None, level: int) -> None:
        for index, stage in enumerate(stages):
            own_parent = stage.parent if stage.parent in names else None
            if index not in placed and own_parent == parent:
                placed.add(index)
                out.append((level, stage))
                if level < 32:
                    visit(stage.name, level + 1)

    visit(None, 0)
    out.extend((0, stage) for index, stage in enumerate(stages) if index not in placed)  # cycles (recursion)
    return out


def pipeline_view(run: Run) -> PipelineView | None:
    """The run's ``pipeline`` section; ``None`` without one."""
    section = run.pipeline
    if section is None:
        return None
    e2e = section.end_to_end or PipelineStats()
    b = section.breakdown or PipelineBreakdown()
    total = b.end_to_end_us
    parts = tuple(BreakdownPart(label, value, value / total if total else None)
                  for label, value in (("pre", b.pre_us), ("model", b.model_us), ("post", b.post_us),
                                       ("other", b.other_us))
                  if value is not None)
    stages = []
    for level, stage in stage_tree(section.stages):
        stats, own = stage.stats or PipelineStats(), stage.self_time or PipelineStats()
        median = stats.median_us
        stages.append(StageRow(stage.name, level, stage.kind or "", stage.calls_per_run, median, stats.p90_us,
                               own.median_us, median / e2e.median_us if median is not None and e2e.median_us else None))
    index = {layer.id: i for i, layer in enumerate(run.layers)}
    top = tuple(TopItem(item.name, item.kind or "", index.get(item.name) if item.kind == "layer" else None,
                        item.median_us, item.p90_us, item.share)
                for item in section.top[:PIPELINE_TOP])
    runs = section.runs
    percentiles = "  ".join(f"{label} {human_us(v)}" for label, v in (("P50", e2e.median_us), ("P90", e2e.p90_us),
                                                                      ("P99", e2e.p99_us), ("mean", e2e.mean_us))
                            if v is not None)
    calls = section.model_calls_per_run
    p50 = run.latency.p50_us if run.latency is not None else None
    model_line = f"{calls:g} model call(s) per run" if calls is not None else None
    if model_line and p50 is not None:
        model_line += f"; model.run P50 {human_us(p50)} (profiler off)"
    trace = section.trace
    if percentiles and runs is not None:
        percentiles += f"  ({runs} runs)"
    rows = [("end to end", percentiles or None),
            ("model", model_line),
            ("traced run", f"run {trace.run} of the {trace.phase} phase (the median one)" if trace else None)]
    notes = []
    if calls == 0:
        notes.append("the function never called model.run: nothing was measured of the model")
    if section.interrupted:
        notes.append("INTERRUPTED: fewer runs than asked were measured")
    return PipelineView(section.function or "?", runs, tuple(Row(label, value) for label, value in rows if value),
                        parts, total, tuple(stages), top, tuple(notes))
