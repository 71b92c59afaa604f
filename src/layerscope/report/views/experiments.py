"""The Experiments tab: the bisect, comparison, pipeline and stress views together.

The sections later commands add to a run (``bisect``, ``comparison``, ``pipeline``, ``stress``), as the HTML
report's Experiments tab shows them. Each builder returns ``None`` when the run lacks its section and reads the
typed section (:mod:`layerscope.runfile.models`), where every inner field is optional: runs from older versions, or
a section cut short, give fewer rows, never an error (a malformed section is refused when the run is loaded).

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.report.views.bisect import BisectView, bisect_view
from layerscope.report.views.common import Run
from layerscope.report.views.comparison import ComparisonView, comparison_view
from layerscope.report.views.pipeline import PipelineView, pipeline_view
from layerscope.report.views.stress import StressView, stress_view

# ------------------------------------------------------------------------------------------- all four


@dataclass(frozen=True)
class Experiments:
    """What the Experiments tab shows; each part ``None`` when the run lacks its section."""

    bisect: BisectView | None
    comparison: ComparisonView | None
    pipeline: PipelineView | None
    stress: StressView | None

    def __bool__(self) -> bool:
        return any(part is not None for part in (self.bisect, self.comparison, self.pipeline, self.stress))

    @property
    def names(self) -> tuple[str, ...]:
        """The sections present, in the tab's order."""
        return tuple(name for name in ("bisect", "comparison", "pipeline", "stress") if getattr(self, name))


def experiments(run: Run) -> Experiments:
    """The run's ``bisect``, ``comparison``, ``pipeline`` and ``stress`` sections as the report shows them."""
    return Experiments(bisect_view(run), comparison_view(run), pipeline_view(run), stress_view(run))
