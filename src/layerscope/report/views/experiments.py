"""The Experiments tab: the parts of the capabilities that have one (bisect, comparison, pipeline, stress).

The sections later commands add to a run, as the HTML report's Experiments tab shows them: one part per registered
capability with an HTML part (:attr:`layerscope.report.capabilities.Capability.html`), in registration order. Each
part's view is ``None`` when the run lacks its section and reads the typed section
(:mod:`layerscope.runfile.models`), where every inner field is optional: runs from older versions, or a section cut
short, give fewer rows, never an error (a malformed section is refused when the run is loaded).

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from layerscope.report.capabilities import capabilities
from layerscope.report.views.bisect import BisectView
from layerscope.report.views.common import Run
from layerscope.report.views.comparison import ComparisonView
from layerscope.report.views.pipeline import PipelineView
from layerscope.report.views.stress import StressView


@dataclass(frozen=True)
class ExperimentPart:
    """One part of the tab: the capability's ``name``, the ``template`` that lays it out and its ``view``
    (``None`` when the run lacks the section)."""

    name: str
    template: str
    view: object | None


@dataclass(frozen=True)
class Experiments:
    """What the Experiments tab shows: every part, in the tab's order, each ``view`` ``None`` when the run lacks
    its section."""

    parts: tuple[ExperimentPart, ...]

    def __bool__(self) -> bool:
        return any(part.view is not None for part in self.parts)

    @property
    def names(self) -> tuple[str, ...]:
        """The sections present, in the tab's order."""
        return tuple(part.name for part in self.parts if part.view is not None)

    def view(self, name: str) -> object | None:
        """The view of the part ``name`` (``None`` when the run lacks it, or no such part is registered)."""
        return next((part.view for part in self.parts if part.name == name), None)

    @property
    def bisect(self) -> BisectView | None:
        return cast(BisectView | None, self.view("bisect"))

    @property
    def comparison(self) -> ComparisonView | None:
        return cast(ComparisonView | None, self.view("comparison"))

    @property
    def pipeline(self) -> PipelineView | None:
        return cast(PipelineView | None, self.view("pipeline"))

    @property
    def stress(self) -> StressView | None:
        return cast(StressView | None, self.view("stress"))


def experiments(run: Run) -> Experiments:
    """The run's sections that have an HTML part (:mod:`layerscope.report.capabilities`), as the report shows them."""
    return Experiments(tuple(ExperimentPart(c.name, c.html.template, c.html.view(run))
                             for c in capabilities() if c.html is not None))
