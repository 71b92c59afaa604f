"""Sweep: every model on every target in every mode and setting, each cell a task on Ray (a local runtime, or
``ray_address``) or in this process (``no_ray``), gathered into ``OUT/runs.parquet``, ``OUT/layers.parquet`` and
``OUT/leaderboard.html``; each cell's run file is kept under ``OUT/runs/`` (``layerscope sweep``,
``layerscope.sweep``).

The product is the folder ``out_dir``: the use case writes it. Rerunning the same sweep skips the cells already
done (and retries the failed ones); one sweep at a time runs in a folder (a lock file). Interrupted, the cells done
keep their run files and the ``KeyboardInterrupt`` says so.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layerscope.errors import BackendUnavailable, InputError, LayerscopeError, OutputError
from layerscope.fileio import is_temporary_of, write_atomic
from layerscope.sweep.dataset import SweepRow, gather
from layerscope.sweep.executor import SweepOutcome, run_sweep
from layerscope.sweep.leaderboard import render_leaderboard
from layerscope.sweep.plan import Cell, SweepSpec, expand, load_spec
from layerscope.sweep.tasks import FAILED, RUNNING, RUNS, CellOutcome, is_done
from layerscope.targets import load_profile
from layerscope.targets.profile import HOST_NAME
from layerscope.workflows.common import QUIET, Hooks, PathLike, UsageConflict

#: The leaderboard, the plan and the lock file in the sweep's folder.
LEADERBOARD = "leaderboard.html"
PLAN = "sweep.json"
LOCK = ".sweep.lock"


@dataclass(frozen=True)
class SweepRequest:
    """``layerscope sweep``'s options: ``out_dir`` the sweep's folder (resumed if it exists); ``models`` and the
    axes (``targets``, ``modes``, ``dtypes``, ``threads``, ``opt_levels``, ``shapes``, ``runs``, ``warmup``;
    empty or ``None``: ``config``'s, else the defaults of :class:`~layerscope.sweep.plan.SweepSpec`);
    ``ray_address``: an existing Ray cluster; ``num_cpus``: the local Ray runtime's CPUs; ``no_ray``: the cells
    one after another in this process; ``dry_run``: plan only (which cells are done), run nothing."""

    out_dir: PathLike
    models: tuple[PathLike, ...] = ()
    config: PathLike | None = None
    targets: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    threads: tuple[int, ...] = ()
    opt_levels: tuple[str, ...] = ()
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    runs: int | None = None
    warmup: int | None = None
    ray_address: str | None = None
    num_cpus: int | None = None
    no_ray: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class SweepResult:
    """The sweep's cells and, per cell, whether its run file was there before (``dry_run``) or is there now;
    ``outcome`` (``None`` for a dry run): the cells skipped as done, run now, failed; ``rows`` and
    ``layer_rows``: the rows of the runs and layers tables written; ``device_mismatches``: one line per distinct
    device mismatch among the done cells' k (a profile cell on a non-host target measures the machine that ran
    it: its k compares two devices), with how many cells it concerns."""

    out_dir: Path
    cells: tuple[Cell, ...]
    done: tuple[bool, ...]
    outcome: SweepOutcome | None = None
    rows: int = 0
    layer_rows: int = 0
    device_mismatches: tuple[str, ...] = ()

    def failure(self) -> LayerscopeError | None:
        """The error the failed cells add up to, of the worst one's kind (3 an unavailable backend, 2 bad input, 1 a
        failure of ours); ``None`` when none failed."""
        failed = self.outcome.failed if self.outcome is not None else ()
        if not failed:
            return None
        codes = [o.exit_code or 1 for o in failed]
        worst = 3 if 3 in codes else (2 if 2 in codes else 1)
        error_class: type[LayerscopeError] = {3: BackendUnavailable, 2: InputError}.get(worst, LayerscopeError)
        return error_class(f"{len(failed)} of {len(self.cells)} cells failed; their errors are in "
                           f"{self.out_dir / 'failed'} and the leaderboard")


def sweep(request: SweepRequest, hooks: Hooks = QUIET) -> SweepResult:
    """Plan the sweep of ``request`` and (unless ``dry_run``) run the cells not done yet, then write its tables and
    leaderboard. ``hooks.note`` is told each failed cell as it fails; a failed cell does not stop the others (see
    :meth:`SweepResult.failure`). ``InputError`` for a bad axis or target (before any cell runs), or when another
    sweep holds the folder."""
    r = request
    out_dir = Path(r.out_dir)
    axes: dict[str, Any] = load_spec(Path(r.config)) if r.config is not None else {}
    given: dict[str, Any] = {"models": tuple(str(m) for m in r.models), "targets": r.targets, "modes": r.modes,
                             "dtypes": r.dtypes, "opt_levels": r.opt_levels, "threads": r.threads}
    axes.update({k: v for k, v in given.items() if v})
    settings: dict[str, Any] = {"shapes": tuple(sorted(r.shapes.items())) if r.shapes else None, "runs": r.runs,
                                "warmup": r.warmup}
    axes.update({k: v for k, v in settings.items() if v is not None})
    if r.ray_address and r.no_ray:
        raise UsageConflict("--ray and --no-ray exclude each other")
    spec = SweepSpec(**{"models": (), **axes})
    cells = expand(spec)
    _check_targets(spec.targets)  # before the first cell runs, not in each cell
    if r.dry_run:
        return SweepResult(out_dir, tuple(cells), tuple(is_done(out_dir, cell) for cell in cells))
    with _folder_lock(out_dir):
        return _run(cells, out_dir, address=r.ray_address, num_cpus=r.num_cpus, no_ray=r.no_ray, hooks=hooks)


def _run(cells: Sequence[Cell], out_dir: Path, *, address: str | None, num_cpus: int | None, no_ray: bool,
         hooks: Hooks) -> SweepResult:
    """Run the sweep's cells (resuming), then write its tables and leaderboard (see the module docstring)."""
    write_atomic(out_dir / PLAN, json.dumps({"cells": [{"key": c.key, **c.to_dict()} for c in cells]}, indent=1))
    todo = sum(1 for cell in cells if not is_done(out_dir, cell))
    with hooks.phases({"cells": "sweep"}, {"cells": "cells"}) as update:
        update("cells", 0, todo)

        def on_done(outcome: CellOutcome, finished: int, total: int) -> None:
            update("cells", finished, total)
            if not outcome.ok:
                hooks.note(f"failed: {outcome.key}: {outcome.error}")

        try:
            outcome = run_sweep(cells, out_dir, executor="inline" if no_ray else "ray", address=address,
                                num_cpus=num_cpus, on_done=on_done)
        except KeyboardInterrupt:
            # wherever the stop landed (a marker written, a file's atomic write begun), no cell of this sweep runs
            # on: its markers go, and the atomic writer's temporary files beside the run files and error records
            _remove_markers(out_dir, cells)
            for folder in (RUNS, FAILED):
                _remove_temps(out_dir / folder, {f"{cell.key}.json" for cell in cells})
            done = sum(1 for cell in cells if is_done(out_dir, cell))
            raise KeyboardInterrupt(f"{done} of {len(cells)} cells are done, their run files in {out_dir / RUNS}; "
                                    "run the same command again to run the others") from None
    _remove_markers(out_dir, cells)
    rows, layer_rows = gather(cells, out_dir)
    write_atomic(out_dir / LEADERBOARD, render_leaderboard(rows))
    return SweepResult(out_dir, tuple(cells), tuple(is_done(out_dir, cell) for cell in cells), outcome, len(rows),
                       layer_rows, _device_mismatches(rows))


def _device_mismatches(rows: Sequence[SweepRow]) -> tuple[str, ...]:
    """One line per distinct device mismatch of the done cells' k, prefixed with the number of cells it concerns."""
    counts: dict[str, int] = {}
    for row in rows:
        factor = row.run.k_factor if row.run is not None else None
        if factor is not None and factor.mismatch:
            counts[factor.mismatch] = counts.get(factor.mismatch, 0) + 1
    return tuple(f"{n} cell(s): {line}" for line, n in counts.items())


def _remove_markers(out_dir: Path, cells: Sequence[Cell]) -> None:
    """Once the sweep has run every cell, no task of it runs: the markers its workers left (a worker killed as it
    wrote one leaves the atomic writer's ``.<key>.json.*.tmp``; one of a terminated sweep that Ray started while
    that sweep's driver was leaving leaves ``<key>.json``) go, then the folder when it is empty."""
    folder = out_dir / RUNNING
    names = {f"{cell.key}.json" for cell in cells}
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.name in names and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
        _remove_temps(folder, names)
        folder.rmdir()


def _remove_temps(folder: Path, names: set[str]) -> None:
    """The atomic writer's temporary files (:func:`~layerscope.fileio.is_temporary_of`) of the files ``names`` in
    ``folder``: what a write cut short left."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if is_temporary_of(entry.name, names) and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)


def _check_targets(targets: Iterable[str]) -> None:
    """Load every target profile the cells name (``host`` is measured where its cells run, so not here):
    a bad one stops the sweep before any cell runs."""
    for target in dict.fromkeys(targets):
        if target.strip().lower() != HOST_NAME:
            load_profile(target)


@contextlib.contextmanager
def _folder_lock(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``OUT/.sweep.lock`` while the sweep runs: a second sweep on the same folder would
    run the same cells again and disturb the first one's measurements. ``InputError`` when another holds it."""
    import fcntl
    import os

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        handle = (out_dir / LOCK).open("a+")
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise InputError(f"{out_dir}: another layerscope sweep (process {holder}) is running in this folder; "
                             "wait for it to finish, or give another -o/--output") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # the lock goes with the file descriptor, also when the process is killed
