"""One progress bar for every measuring command: a task per phase, on stderr, silent off a terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

#: update(phase, done, total): what measuring code calls as it goes.
PhaseUpdate = Callable[[str, float, float], None]


@contextmanager
def phase_progress(labels: Mapping[str, str], units: Mapping[str, str] | None = None) -> Iterator[PhaseUpdate]:
    """Yield an update function; each new phase gets a bar labelled ``labels[phase]`` counting ``units[phase]``."""
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed:.0f}/{task.total:.0f} {task.fields[unit]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[str, TaskID] = {}

        def update(phase: str, done: float, total: float) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(labels.get(phase, phase), total=total,
                                            unit=(units or {}).get(phase, "runs"))
            bar.update(tasks[phase], completed=done)

        yield update
