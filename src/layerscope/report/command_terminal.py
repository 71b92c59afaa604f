"""What each command that writes a run prints, as one pure function of the run it saved.

``estimate``, ``profile``, ``bench``, ``bisect``, ``pipeline`` and ``import`` print :func:`command_report` of their run,
and ``layerscope report RUN --format terminal`` prints the same function of the saved file: the tables are
the same, only the lines naming the files a command wrote are the command's own. ``compare``, ``advise`` and
``reconcile`` print the section they save (:mod:`layerscope.report.analysis_terminal`), and
:func:`command_report` of a run they wrote prints that section the same way (``reconcile`` also prints each run's
path before its report: a line naming a file). ``calibrate`` writes a profile, not a run. Which command made a
run is read from the run itself (:func:`run_kind`). What each command's report holds is registered by capability
(:mod:`layerscope.report.capabilities`): this module only puts the registered views together.
"""

from __future__ import annotations

from rich.console import Group, RenderableType

from layerscope.report.capabilities import ReportRequest, commands, guessed_command, own_capability, shown_by
from layerscope.runfile.models import RunFile


def run_kind(run: RunFile) -> str:
    """The command whose report a run gets: the one its ``tool`` section names (``tool.command``, which every
    command that writes a run records) when a registered capability marks that command's runs, else the one
    guessed from the sections it holds (a run written before the command was recorded, by another tool or by
    hand; :func:`guessed_kind`)."""
    tool = run.tool
    if tool is not None and tool.name == "layerscope" and tool.command is not None and tool.command in commands():
        return tool.command
    return guessed_kind(run)


def guessed_kind(run: RunFile) -> str:
    """The command that most likely wrote ``run``, from the sections it holds: the capability of lowest
    precedence that marks the run names it (:func:`layerscope.report.capabilities.guessed_command`; the order
    is explained at :data:`layerscope.report.capabilities._REGISTRY`): ``compare``, ``advise``, ``reconcile``
    (a section that ``layerscope reconcile`` wrote), ``pipeline``, ``bisect``, ``import``, ``bench`` for a bench
    measurement, ``profile`` for any other measurement, else ``estimate``."""
    return guessed_command(run)


def command_report(run: RunFile, top: int | None = None, *, timeline: bool | None = None,
                   kind: str | None = None) -> RenderableType:
    """The tables the command that made ``run`` printed: ``kind`` names it (``None``: :func:`run_kind`; a
    command passes its own, so that ``estimate -o`` into a measured run still prints the estimate); ``top`` rows
    in the layer table (``None``: the command's default; 0: no table); the timeline report when ``timeline``
    (``None``: when the run holds a timeline). The views are those of every capability the command's report
    shows (:func:`layerscope.report.capabilities.shown_by`), in registration order; a command whose own
    section the run lacks (``compare``, ``advise``, ``reconcile``), or that no capability marks, prints an
    estimate's report (with the command's rows)."""
    kind = run_kind(run) if kind is None else kind
    own = own_capability(kind)
    rows = (own.default_top if own is not None else 0) if top is None else top
    shown = kind if own is not None and (not own.needs_section or own.holds(run)) else "estimate"
    request = ReportRequest(shown, top, rows, run.timeline is not None if timeline is None else timeline)
    parts: list[RenderableType] = []
    for capability in shown_by(shown):
        if capability.terminal is not None:
            parts += capability.terminal(run, request)
    return Group(*parts)
