"""One progress bar for every measuring command: a task per phase, on stderr, silent off a terminal.

``LAYERSCOPE_PROGRESS_FILE=PATH`` also appends one plain line to PATH when each phase starts its work
(``PHASE 1/TOTAL UNIT``: its first unit is done), terminal or not, for scripts and CI jobs that watch a long
measurement (or stop it with SIGTERM once it has begun). A path that cannot be opened exits 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from layerscope.cli.console import SafeConsole
from layerscope.errors import OutputError

#: update(phase, done, total): what measuring code calls as it goes.
PhaseUpdate = Callable[[str, float, float], None]
PROGRESS_FILE_ENV = "LAYERSCOPE_PROGRESS_FILE"


@contextmanager
def phase_progress(labels: Mapping[str, str], units: Mapping[str, str] | None = None) -> Iterator[PhaseUpdate]:
    """Yield an update function; each new phase gets a bar labelled ``labels[phase]`` counting ``units[phase]``."""
    console = SafeConsole(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed:.0f}/{task.total:.0f} {task.fields[unit]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with ExitStack() as stack:
        log_path = os.environ.get(PROGRESS_FILE_ENV)
        try:
            log = stack.enter_context(open(log_path, "a", encoding="utf-8", buffering=1)) if log_path else None
        except OSError as exc:
            raise OutputError(f"{log_path}: cannot write the progress file ({exc.strerror or exc})") from None
        bar = stack.enter_context(Progress(*columns, console=console, transient=True,
                                           disable=not console.is_terminal))
        tasks: dict[str, TaskID] = {}
        begun: set[str] = set()

        def update(phase: str, done: float, total: float) -> None:
            unit = (units or {}).get(phase, "runs")
            if phase not in tasks:
                tasks[phase] = bar.add_task(labels.get(phase, phase), total=total, unit=unit)
            bar.update(tasks[phase], completed=done)
            if log is not None and done > 0 and phase not in begun:
                begun.add(phase)
                log.write(f"{phase} {done:g}/{total:g} {unit}\n")

        yield update
