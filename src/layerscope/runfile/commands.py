"""The layerscope commands that write a run, in one place, and the run's ``tool`` section naming the one that wrote it.

Contract:
- :data:`RunKind` names every command whose run ``layerscope report`` knows how to print; :data:`RUN_COMMANDS` is
  the same names as a tuple. A new command that writes runs adds its name here (and its report to
  :func:`layerscope.report.command_terminal.command_report`);
- a command that makes a run writes :func:`written_by` of its name as the run's ``tool`` section; an analysis that
  writes its section over a run it read (``reconcile``, ``advise``, ``compare``) replaces the run's ``tool``
  section with its own (:func:`made_by`): ``tool`` names what last wrote the file;
- ``calibrate`` writes a hardware profile and ``sweep`` writes the runs of ``estimate`` and ``profile``: neither
  names a run of its own.
"""

from __future__ import annotations

from typing import Literal, get_args

from layerscope.runfile.models import RunFile, Tool
from layerscope.version import __version__

RunKind = Literal["compare", "advise", "reconcile", "pipeline", "bisect", "bench", "import", "profile", "estimate"]

#: Every :data:`RunKind`, in the order of the literal.
RUN_COMMANDS: tuple[RunKind, ...] = get_args(RunKind)


def written_by(command: RunKind) -> Tool:
    """The ``tool`` section of a run that layerscope's ``command`` writes now (this version)."""
    return Tool.trusted({"name": "layerscope", "version": __version__, "command": command})


def made_by(run: RunFile, command: RunKind) -> RunFile:
    """``run`` with its ``tool`` section naming ``command`` (and this version of layerscope) as its writer."""
    return run.model_copy(update={"tool": written_by(command)})


def recorded_command(run: RunFile) -> RunKind | None:
    """The command the run's ``tool`` section names, when it is layerscope's and one of :data:`RUN_COMMANDS`;
    ``None`` otherwise (a run written before the command was recorded, by another tool, or by hand)."""
    tool = run.tool
    if tool is None or tool.name != "layerscope":
        return None
    for command in RUN_COMMANDS:
        if tool.command == command:
            return command
    return None
