"""Unit use view: per unit of core 0 of an estimated timeline, the two utilisation figures the reports show, side by
side, so that they read as the different things they are:

- ``busy``: the share of the frame a layer holds the unit, from taking it to its compute's end, overhead and waits
  for DDR data included (the terminal's units table, :func:`layerscope.report.timeline_terminal.units_table`);
- ``compute``: the share of the frame the unit computes, overhead and waits excluded: the mean of the Temporal
  Statistics' per-interval curve (``timeline.temporal.utilization``), whose intervals cut the frame evenly.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.report.views.common import Run
from layerscope.runfile.models import TimelineSummary


@dataclass(frozen=True)
class UnitUse:
    """One track of core 0: its name as the run holds it, layers run, busy µs, busy share of the frame and compute
    share of the frame (``None`` for a track without a compute curve: DDR's, or a run without temporal series)."""

    name: str
    layers: int
    busy_us: float | None
    busy_share: float | None
    compute_share: float | None


def unit_use(run: Run) -> list[UnitUse]:
    """Every track of core 0 that ran a layer, in the timeline's order; empty without a timeline."""
    timeline = run.timeline
    if timeline is None:
        return []
    latency = (timeline.summary or TimelineSummary()).latency_us
    curves = timeline.temporal.utilization if timeline.temporal is not None else {}
    out = []
    for unit in timeline.units:
        if (unit.core or 0) != 0 or not unit.busy:
            continue
        busy = unit.busy_us
        curve = curves.get(unit.name)
        out.append(UnitUse(unit.name, len(unit.busy), busy,
                           busy / latency if busy is not None and latency else None,
                           sum(curve) / len(curve) if curve else None))
    return out
