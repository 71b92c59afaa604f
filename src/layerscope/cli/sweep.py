"""``layerscope sweep MODEL... -t host,rdk-s100 --mode estimate,profile -o DIR``: every model on every target in
every mode and setting, each cell a task on Ray (a local runtime, or ``--ray ADDRESS``), gathered into
``DIR/runs.parquet``, ``DIR/layers.parquet`` and ``DIR/leaderboard.html``; each cell's run file is kept under
``DIR/runs/``. Rerunning the same sweep skips the cells already done (and retries the failed ones).

Exit status: 0 when every cell has its run file; else that of the worst failed cell (2 bad input, 3 an unavailable
backend, 1 a failure of ours), after the dataset and the leaderboard are written with the failures listed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from layerscope.cli.options import parse_shapes
from layerscope.cli.progress import phase_progress
from layerscope.errors import BackendUnavailable, InputError, LayerscopeError, OutputError
from layerscope.fileio import write_atomic
from layerscope.sweep.dataset import LAYERS_TABLE, RUNS_TABLE, gather
from layerscope.sweep.executor import run_sweep
from layerscope.sweep.leaderboard import render_leaderboard
from layerscope.sweep.plan import MODES, Cell, SweepSpec, expand, load_spec
from layerscope.sweep.tasks import RUNNING, RUNS, CellOutcome, is_done

LEADERBOARD = "leaderboard.html"
PLAN = "sweep.json"


def _split(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _remove_markers(out_dir: Path, cells: Sequence[Cell]) -> None:
    """Once the sweep has run every cell, no task of it runs: the markers its workers left (a worker killed as it
    wrote one leaves the atomic writer's ``.<key>.json.*.tmp``; one of a terminated sweep that Ray started while
    that sweep's driver was leaving leaves ``<key>.json``) go, then the folder when it is empty."""
    folder = out_dir / RUNNING
    names = {f"{cell.key}.json" for cell in cells}
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            ours = entry.name in names or (entry.name.startswith(".") and entry.name.endswith(".tmp")
                                           and entry.name[1:].split(".json.", 1)[0] + ".json" in names)
            if ours and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
        folder.rmdir()


@click.command("sweep")
@click.argument("models", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              metavar="DIR", help="Folder of the sweep: run files, Parquet tables, leaderboard (resumed if it exists).")
@click.option("--config", "config", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="A TOML/YAML/JSON file with any of: models, targets, modes, dtypes, threads, opt_levels, shapes, "
                   "runs, warmup. Options given on the command line replace the file's.")
@click.option("--target", "-t", "targets", multiple=True, metavar="NAME[,NAME]",
              help="Hardware profiles (repeatable or comma-separated; default host).")
@click.option("--mode", "modes", multiple=True, metavar="MODE[,MODE]",
              help=f"What each cell does: {', '.join(MODES)} (repeatable or comma-separated; default estimate).")
@click.option("--dtype", "dtypes", multiple=True, metavar="DTYPE[,DTYPE]",
              help="Dtypes of the estimate cells (default: each profile's own).")
@click.option("--threads", "threads", multiple=True, metavar="N[,N]",
              help="ONNX Runtime intra-op threads of the profile cells (0: its default).")
@click.option("--opt-level", "opt_levels", multiple=True, metavar="LEVEL[,LEVEL]",
              help="ONNX Runtime graph optimization levels of the profile cells (default all).")
@click.option("--shape", "shapes", multiple=True, metavar="NAME=DIMS", help="Fix an input's dims in every cell.")
@click.option("--runs", type=click.IntRange(min=1), default=None, help="Profiled runs per profile cell (default 20).")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up runs per profile cell (default 5).")
@click.option("--ray", "address", default=None, metavar="ADDRESS",
              help="An existing Ray cluster (e.g. 10.0.0.5:6379 or auto); default: a local Ray runtime.")
@click.option("--num-cpus", type=click.IntRange(min=1), default=None,
              help="CPUs of the local Ray runtime (default: all); estimate cells run this many at a time.")
@click.option("--no-ray", is_flag=True, help="Run the cells one after another in this process instead of on Ray.")
@click.option("--dry-run", is_flag=True, help="Print the cells (and which are done) and stop.")
def command(*, models: tuple[Path, ...], out_dir: Path, config: Path | None, targets: tuple[str, ...],
            modes: tuple[str, ...], dtypes: tuple[str, ...], threads: tuple[str, ...], opt_levels: tuple[str, ...],
            shapes: tuple[str, ...], runs: int | None, warmup: int | None, address: str | None,
            num_cpus: int | None, no_ray: bool, dry_run: bool) -> None:
    """Run MODEL... x targets x modes x settings as a sweep of cells (see `layerscope sweep --help`)."""
    axes: dict[str, Any] = load_spec(config) if config is not None else {}
    cli: dict[str, Any] = {"models": tuple(str(m) for m in models), "targets": _split(targets),
                           "modes": _split(modes), "dtypes": _split(dtypes), "opt_levels": _split(opt_levels),
                           "threads": tuple(_int(t) for t in _split(threads))}
    axes.update({k: v for k, v in cli.items() if v})
    given: dict[str, Any] = {"shapes": tuple(sorted(parse_shapes(shapes).items())) if shapes else None,
                             "runs": runs, "warmup": warmup}
    axes.update({k: v for k, v in given.items() if v is not None})
    if address and no_ray:
        raise click.UsageError("--ray and --no-ray exclude each other")
    spec = SweepSpec(**{"models": (), **axes})
    cells = expand(spec)
    _check_targets(spec.targets)  # before the first cell runs, not in each cell
    if dry_run:
        for cell in cells:
            click.echo(f"{'done ' if is_done(out_dir, cell) else 'to do'}  {cell.key}")
        click.echo(f"{len(cells)} cells")
        return
    with _folder_lock(out_dir):
        _run(cells, out_dir, address=address, num_cpus=num_cpus, no_ray=no_ray)


def _run(cells: Sequence[Cell], out_dir: Path, *, address: str | None, num_cpus: int | None, no_ray: bool) -> None:
    """Run the sweep's cells (resuming), then write its tables and leaderboard (see the module docstring)."""
    write_atomic(out_dir / PLAN, json.dumps({"cells": [{"key": c.key, **c.to_dict()} for c in cells]}, indent=1))
    todo = sum(1 for cell in cells if not is_done(out_dir, cell))
    with phase_progress({"cells": "sweep"}, {"cells": "cells"}) as update:
        update("cells", 0, todo)

        def on_done(outcome: CellOutcome, finished: int, total: int) -> None:
            update("cells", finished, total)
            if not outcome.ok:
                click.echo(f"failed: {outcome.key}: {outcome.error}", err=True)

        try:
            outcome = run_sweep(cells, out_dir, executor="inline" if no_ray else "ray", address=address,
                                num_cpus=num_cpus, on_done=on_done)
        except KeyboardInterrupt:
            with contextlib.suppress(OSError):
                (out_dir / RUNNING).rmdir()
            done = sum(1 for cell in cells if is_done(out_dir, cell))
            raise KeyboardInterrupt(f"{done} of {len(cells)} cells are done, their run files in {out_dir / RUNS}; "
                                    "run the same command again to run the others") from None
    _remove_markers(out_dir, cells)
    rows, layer_rows = gather(cells, out_dir)
    write_atomic(out_dir / LEADERBOARD, render_leaderboard(rows))
    click.echo(f"{len(cells)} cells: {len(outcome.skipped)} already done, {len(outcome.finished)} run now, "
               f"{len(outcome.failed)} failed")
    click.echo(f"wrote {out_dir / RUNS_TABLE} ({len(rows)} rows), {out_dir / LAYERS_TABLE} ({layer_rows} rows), "
               f"{out_dir / LEADERBOARD}")
    if outcome.failed:
        codes = [o.exit_code or 1 for o in outcome.failed]
        worst = 3 if 3 in codes else (2 if 2 in codes else 1)
        error_class: type[LayerscopeError] = {3: BackendUnavailable, 2: InputError}.get(worst, LayerscopeError)
        raise error_class(f"{len(outcome.failed)} of {len(cells)} cells failed; their errors are in "
                          f"{out_dir / 'failed'} and the leaderboard")


def _check_targets(targets: Iterable[str]) -> None:
    """Load every target profile the cells name (``host`` is measured where its cells run, so not here):
    a bad one stops the sweep before any cell runs."""
    from layerscope.targets import load_profile
    from layerscope.targets.profile import HOST_NAME

    for target in dict.fromkeys(targets):
        if target.strip().lower() != HOST_NAME:
            load_profile(target)


#: The lock file of a sweep's folder: one sweep at a time runs cells there.
LOCK = ".sweep.lock"


@contextlib.contextmanager
def _folder_lock(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``DIR/.sweep.lock`` while the sweep runs: a second sweep on the same folder would
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
                             "wait for it to finish, or give another -o/--out") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # the lock goes with the file descriptor, also when the process is killed


def _int(text: str) -> int:
    if not text.isdigit():
        raise click.BadParameter(f"{text!r} is not a non-negative integer", param_hint="--threads")
    return int(text)
