"""The layerscope commands that write a run, in one place, and the run's ``tool`` section naming the one that wrote it.

Contract:
- :data:`RunKind` names every layerscope command that writes a run; :data:`RUN_COMMANDS` is the same names as a
  tuple. A new command that writes runs adds its name here and registers the capability its run holds (its
  section, its terminal view, its place in the guess) in :mod:`layerscope.report.capabilities`, which is what
  ``layerscope report`` reads to print the run;
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

