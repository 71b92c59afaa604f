"""The run-file sections by capability, registered in one place: what each section is, which command writes it,
which commands' terminal report prints it and how, where the HTML report shows it, and how a run's sections name
the command that most likely wrote it.

Contract:
- a :class:`Capability` owns one or more sections of the run file (:class:`~layerscope.runfile.models.RunFile`
  fields, named as the file names them, ``import`` for ``import_``; or a key the run file keeps as an unknown one);
- :func:`layerscope.report.command_terminal.command_report` prints, for a command, the terminal view of every
  registered capability whose ``shown_by`` names that command, in registration order; the command's own
  capability (its ``marks``) gives the rows of its table when ``--top`` is not given (``default_top``);
- :func:`layerscope.report.command_terminal.guessed_kind` returns the ``commands[0]`` of the capability of lowest
  ``precedence`` whose :meth:`Capability.marks` holds for the run (a run that does not name its command);
- the HTML report's Experiments tab shows the :attr:`Capability.html` part of every capability that has one, in
  registration order (:func:`layerscope.report.views.experiments.experiments`);
- a new capability is one :func:`register` call (``tests/test_capabilities.py`` registers one from a test file).
Views are imported when a run holds their section: an estimate's start-up imports the estimate's tables only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.text import Text

from layerscope.runfile.models import BenchMeasurement, RunFile


@dataclass(frozen=True)
class ReportRequest:
    """What a command's terminal report was asked for: ``kind``, the command whose report it is (``estimate`` for
    the command whose own section the run lacks: :func:`~layerscope.report.command_terminal.command_report`);
    ``top`` as given (``None``: the command's default); ``rows``, the rows of a layer or item table (``top``, else
    the command's ``default_top``; 0: no table); ``timeline``, whether to print the timeline report."""

    kind: str
    top: int | None
    rows: int
    timeline: bool


#: A terminal view: the renderables a report prints for a capability (none: it prints nothing for this run).
TerminalView = Callable[[RunFile, ReportRequest], list[RenderableType]]


def section_value(run: RunFile, name: str) -> Any:
    """The run's section ``name`` as the file names it (``import``: the ``import_`` field), or the value of an
    unknown key the run file kept; ``None`` when the run does not hold it."""
    attribute = _FIELD_BY_KEY.get(name)
    if attribute is not None:
        return getattr(run, attribute)
    return (run.model_extra or {}).get(name)


#: RunFile's field names by the key the file uses (its alias where it has one).
_FIELD_BY_KEY: Mapping[str, str] = {info.alias or name: name for name, info in RunFile.model_fields.items()}


@dataclass(frozen=True)
class HtmlPart:
    """A capability's part of the HTML report's Experiments tab: ``template``, the Jinja2 template under
    ``report/templates`` that lays it out (it reads ``part.view``), and ``view``, the frozen view it lays out
    (``None``: the run lacks the section, and the part shows nothing)."""

    template: str
    view: Callable[[RunFile], object | None]


@dataclass(frozen=True)
class Capability:
    """One capability's sections and views.

    ``name``: what it is; ``sections``: the run-file keys it owns; ``commands``: the commands that write them
    (the first is the one a run holding them is guessed to come from); ``shown_by``: the commands whose terminal
    report prints ``terminal`` (empty: none); ``default_top``: rows of the table of ``commands[0]``'s report when
    ``--top`` is not given; ``precedence``: rank in :func:`~layerscope.report.command_terminal.guessed_kind`
    (lower first; ``None``: never guessed from); ``held``: whether a run holds the capability as ``commands[0]``
    writes it (``None``: it holds any of ``sections``); ``needs_section``: ``commands[0]``'s report is an
    estimate's when the run holds none of ``sections`` (``False``: its view prints whatever the run holds);
    ``html``: its part of the HTML report's Experiments tab (``None``: none, or shown elsewhere on the page; the
    parts follow registration order)."""

    name: str
    sections: tuple[str, ...]
    commands: tuple[str, ...]
    terminal: TerminalView | None = None
    shown_by: tuple[str, ...] = ()
    default_top: int = 0
    precedence: int | None = None
    held: Callable[[RunFile], bool] | None = None
    needs_section: bool = False
    html: HtmlPart | None = None

    @property
    def command(self) -> str:
        """The command whose run this capability marks (``commands[0]``)."""
        return self.commands[0]

    def holds(self, run: RunFile) -> bool:
        """True when ``run`` holds any of this capability's sections."""
        return any(section_value(run, name) is not None for name in self.sections)

    def marks(self, run: RunFile) -> bool:
        """True when ``run`` holds this capability as :attr:`command` writes it (:attr:`held`, else :meth:`holds`)."""
        return self.held(run) if self.held is not None else self.holds(run)


# ------------------------------------------------------------------------------------------------ terminal views


def _comparison(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.compare_terminal import compare_report, saved_comparison

    return [] if run.comparison is None else [compare_report(saved_comparison(run.comparison), request.rows)]


def _findings(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.analysis_terminal import advice_view

    return [] if run.findings is None else [advice_view(run.findings, len(run.layers), request.rows)]


#: The ``reconcile.method`` of a section ``layerscope reconcile`` wrote (``layerscope import`` writes its own).
RECONCILE_METHOD = "layerscope reconcile"


def _reconcile(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.analysis_terminal import latency_stat_name, reconcile_view, spread_view

    if run.reconcile is None:
        return []
    # named as ``reconcile_run`` names them
    model_name, target_name = str(run.model.name or run.model.path or "?"), str(run.target_or_empty.name or "?")
    parts: list[RenderableType] = [
        reconcile_view(run.reconcile, model_name, target_name, request.rows, latency_stat_name(run.latency)), Text("")]
    if run.reconcile.spread is not None:
        parts.append(spread_view(run.reconcile.spread))
    return parts


def _pipeline(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.pipeline_terminal import pipeline_report

    return [pipeline_report(run, request.rows)]


def _bisect(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.bisect_terminal import bisect_report, validation_report

    parts = [bisect_report(run, request.top)]
    # ``bisect.validation`` read as an attribute: an unknown key of the section today, a field once typed
    if run.bisect is not None and getattr(run.bisect, "validation", None) is not None:
        parts += [Text(""), validation_report(run)]
    return parts


def _import(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.import_terminal import import_report

    return [import_report(run, request.rows)]


def _bench(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    from layerscope.report.bench_terminal import bench_report

    return [bench_report(run, request.top)]


def _layer_tables(run: RunFile, request: ReportRequest, measured: bool) -> list[RenderableType]:
    from layerscope.report.terminal import (
        estimate_summary,
        measured_layers_table,
        measurement_summary,
        top_layers_table,
    )

    parts: list[RenderableType] = []
    if request.rows:
        parts.append(measured_layers_table(run, request.rows) if measured else top_layers_table(run, request.rows))
    parts.append(measurement_summary(run) if measured else estimate_summary(run))
    return parts


def _profile(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    return _layer_tables(run, request, run.latency is not None and run.measurement is not None)


def _estimate(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    return _layer_tables(run, request, False)


def _timeline(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    if not request.timeline:
        return []
    from layerscope.report.timeline_terminal import timeline_report

    return [timeline_report(run)]


def _predictor(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    if run.predictor is None:
        return []
    from layerscope.report.predictor_terminal import predictor_report

    return [predictor_report(run, request.rows)]


def _stress(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    if run.stress is None:
        return []
    from layerscope.report.stress_terminal import stress_report

    # ``bench`` lists its stress layers by the view's own default: its ``--top`` is the sweep table's
    return [stress_report(run) if request.kind == "bench" else stress_report(run, request.rows or 10)]


# ------------------------------------------------------------------------------------------------ HTML parts


def _bisect_html(run: RunFile) -> object | None:
    from layerscope.report.views.bisect import bisect_view

    return bisect_view(run)


def _comparison_html(run: RunFile) -> object | None:
    from layerscope.report.views.comparison import comparison_view

    return comparison_view(run)


def _pipeline_html(run: RunFile) -> object | None:
    from layerscope.report.views.pipeline import pipeline_view

    return pipeline_view(run)


def _stress_html(run: RunFile) -> object | None:
    from layerscope.report.views.stress import stress_view

    return stress_view(run)


# ------------------------------------------------------------------------------------------------ guesses


def _is_reconcile_run(run: RunFile) -> bool:
    return run.reconcile is not None and run.reconcile.method == RECONCILE_METHOD


def _is_bench_run(run: RunFile) -> bool:
    return isinstance(run.measurement, BenchMeasurement)


def _always(_run: RunFile) -> bool:
    return True


# ------------------------------------------------------------------------------------------------ the registry

#: Every capability, in the order a command's report prints their views (an order that matters only among the
#: views one command prints) and the Experiments tab shows their parts. The precedences order the guess: an
#: analysis writes its section over the run it read, so its section comes first (``compare``, then ``advise``,
#: then ``reconcile``: the order they are usually run in, last first); then ``pipeline`` or ``bisect``, ``import``
#: for a run made of vendor files, ``bench`` for a bench measurement, ``profile`` for any other, else ``estimate``.
_REGISTRY: list[Capability] = [
    Capability("bisect", ("bisect",), ("bisect",), _bisect, ("bisect",), 0, 50,
               html=HtmlPart("_exp_bisect.html", _bisect_html)),
    Capability("comparison", ("comparison",), ("compare",), _comparison, ("compare",), 10, 10, needs_section=True,
               html=HtmlPart("_exp_comparison.html", _comparison_html)),
    Capability("pipeline", ("pipeline",), ("pipeline",), _pipeline, ("pipeline",), 15, 40,
               html=HtmlPart("_exp_pipeline.html", _pipeline_html)),
    Capability("findings", ("findings",), ("advise",), _findings, ("advise",), 10, 20, needs_section=True),
    Capability("reconcile", ("reconcile",), ("reconcile", "import"), _reconcile, ("reconcile",), 10, 30,
               held=_is_reconcile_run, needs_section=True),
    Capability("import", ("import",), ("import",), _import, ("import",), 20, 60),
    Capability("bench", ("measurement", "latency", "bench_sweep"), ("bench",), _bench, ("bench",), 0, 70,
               held=_is_bench_run),
    Capability("profile", ("measurement", "latency"), ("profile", "import"), _profile, ("profile",), 20, 80),
    Capability("estimate", (), ("estimate",), _estimate, ("estimate",), 20, 90, held=_always),
    Capability("timeline", ("timeline",), ("estimate", "profile"), _timeline, ("estimate", "profile")),
    Capability("predictor", ("predictor",), ("estimate",), _predictor, ("estimate", "profile")),
    Capability("stress", ("stress",), ("profile", "bench", "pipeline"), _stress, ("bench", "estimate", "profile"),
               html=HtmlPart("_exp_stress.html", _stress_html)),
]

def capabilities() -> tuple[Capability, ...]:
    """Every registered capability, in registration order (the order a report prints their views)."""
    return tuple(_REGISTRY)


def register(capability: Capability) -> Capability:
    """Add ``capability`` after the others (its view prints after theirs); ``ValueError`` when its name is taken."""
    if any(c.name == capability.name for c in _REGISTRY):
        raise ValueError(f"capability {capability.name!r} is already registered")
    _REGISTRY.append(capability)
    return capability


def unregister(name: str) -> None:
    """Remove the capability ``name`` (nothing when none is registered under it)."""
    _REGISTRY[:] = [c for c in _REGISTRY if c.name != name]


def commands() -> tuple[str, ...]:
    """The commands that mark a run (the :attr:`Capability.command` of each guessable capability), by precedence."""
    return tuple(c.command for c in _by_precedence())


def own_capability(command: str) -> Capability | None:
    """The capability that marks ``command``'s runs (its ``default_top`` and ``needs_section`` hold for the
    command's report); ``None`` for a command none marks."""
    return next((c for c in _by_precedence() if c.command == command), None)


def guessed_command(run: RunFile) -> str:
    """The command of the first capability, by precedence, that :meth:`Capability.marks` ``run``."""
    return next((c.command for c in _by_precedence() if c.marks(run)), "estimate")


def shown_by(command: str) -> tuple[Capability, ...]:
    """The capabilities whose terminal view ``command``'s report prints, in registration order."""
    return tuple(c for c in _REGISTRY if command in c.shown_by and c.terminal is not None)


def _by_precedence() -> list[Capability]:
    return sorted((c for c in _REGISTRY if c.precedence is not None), key=lambda c: c.precedence or 0)
