"""Pipeline view: the ``pipeline`` section of ``layerscope pipeline``.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.report.units import human_us
from layerscope.report.views.common import Row, Run, _layer_index, _map, _maps, _text, num

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


def _stage_tree(stages: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The stages as a tree (each followed by the stages inside it), keeping their order among siblings."""
    names = {stage.get("name") for stage in stages}
    out: list[tuple[int, Mapping[str, Any]]] = []
    placed: set[int] = set()

    def visit(parent: Any, level: int) -> None:
        for index, stage in enumerate(stages):
            own_parent = stage.get("parent") if stage.get("parent") in names else None
            if index not in placed and own_parent == parent:
                placed.add(index)
                out.append((level, stage))
                if level < 32:
                    visit(stage.get("name"), level + 1)

    visit(None, 0)
    out.extend((0, stage) for index, stage in enumerate(stages) if index not in placed)  # cycles (recursion)
    return out


def pipeline_view(run: Run) -> PipelineView | None:
    """The run's ``pipeline`` section; ``None`` without one."""
    section = run.get("pipeline")
    if not isinstance(section, Mapping):
        return None
    e2e = _map(section.get("end_to_end"))
    e2e_median = num(e2e.get("median_us"))
    b = _map(section.get("breakdown"))
    total = num(b.get("end_to_end_us"))
    parts = tuple(BreakdownPart(label, value, value / total if total else None)
                  for label, key in (("pre", "pre_us"), ("model", "model_us"), ("post", "post_us"),
                                     ("other", "other_us"))
                  if (value := num(b.get(key))) is not None)
    stages = []
    for level, stage in _stage_tree(_maps(section.get("stages"))):
        stats, own = _map(stage.get("stats")), _map(stage.get("self"))
        median = num(stats.get("median_us"))
        stages.append(StageRow(_text(stage.get("name")), level, str(stage.get("kind") or ""),
                               num(stage.get("calls_per_run")), median, num(stats.get("p90_us")),
                               num(own.get("median_us")),
                               median / e2e_median if median is not None and e2e_median else None))
    index = _layer_index(run)
    top = tuple(TopItem(_text(item.get("name")), str(item.get("kind") or ""),
                        index.get(_text(item.get("name"))) if item.get("kind") == "layer" else None,
                        num(item.get("median_us")), num(item.get("p90_us")), num(item.get("share")))
                for item in _maps(section.get("top"))[:PIPELINE_TOP])
    runs = num(section.get("runs"))
    percentiles = "  ".join(f"{label} {human_us(v)}" for key, label in (("median_us", "P50"), ("p90_us", "P90"),
                                                                        ("p99_us", "P99"), ("mean_us", "mean"))
                            if (v := num(e2e.get(key))) is not None)
    calls = num(section.get("model_calls_per_run"))
    lat = run.get("latency") or {}
    model_line = f"{calls:g} model call(s) per run" if calls is not None else None
    if model_line and num(lat.get("p50_us")) is not None:
        model_line += f"; model.run P50 {human_us(lat['p50_us'])} (profiler off)"
    trace = _map(section.get("trace"))
    if percentiles and runs is not None:
        percentiles += f"  ({int(runs)} runs)"
    rows = [("end to end", percentiles or None),
            ("model", model_line),
            ("traced run", f"run {trace.get('run')} of the {trace.get('phase')} phase (the median one)" if trace
             else None)]
    notes = []
    if calls == 0:
        notes.append("the function never called model.run: nothing was measured of the model")
    if section.get("interrupted"):
        notes.append("INTERRUPTED: fewer runs than asked were measured")
    return PipelineView(str(section.get("function") or "?"), None if runs is None else int(runs),
                        tuple(Row(label, value) for label, value in rows if value), parts, total, tuple(stages), top,
                        tuple(notes))
