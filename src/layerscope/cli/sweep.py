"""``layerscope sweep MODEL... -t host,rdk-s100 --mode estimate,profile -o DIR``: every model on every target in
every mode and setting, each cell a task on Ray (a local runtime, or ``--ray ADDRESS``), gathered into
``DIR/runs.parquet``, ``DIR/layers.parquet`` and ``DIR/leaderboard.html``; each cell's run file is kept under
``DIR/runs/`` (:mod:`layerscope.workflows.sweep`). Rerunning the same sweep skips the cells already done (and
retries the failed ones).

A profile cell measures the machine that runs it: on another target its k compares two devices, and the summary
says so (one WARNING line per distinct mismatch, as every report that prints k does). ``--out`` is the deprecated
spelling of ``-o/--output``.

Exit status: 0 when every cell has its run file; else that of the worst failed cell (2 bad input, 3 an unavailable
backend, 1 a failure of ours), after the dataset and the leaderboard are written with the failures listed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import click

from layerscope.cli.options import CLI_HOOKS, Command, deprecated_option, parse_shapes, usage_errors
from layerscope.sweep.dataset import LAYERS_TABLE, RUNS_TABLE
from layerscope.sweep.plan import MODES
from layerscope.workflows.sweep import LEADERBOARD, SweepRequest, sweep


def _split(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


@click.command("sweep", cls=Command)
@click.argument("models", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              metavar="DIR", help="Folder of the sweep: run files, Parquet tables, leaderboard (resumed if it exists). "
                                  "Required.")
@deprecated_option("--out", dest="out_dir", new="-o/--output", type=click.Path(path_type=Path, file_okay=False),
                   default=None, metavar="DIR")
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
def command(*, models: tuple[Path, ...], out_dir: Path | None, config: Path | None, targets: tuple[str, ...],
            modes: tuple[str, ...], dtypes: tuple[str, ...], threads: tuple[str, ...], opt_levels: tuple[str, ...],
            shapes: tuple[str, ...], runs: int | None, warmup: int | None, address: str | None,
            num_cpus: int | None, no_ray: bool, dry_run: bool) -> None:
    """Run every MODEL on every target, mode and setting, one cell each (on Ray, or in this process with --no-ray),
    into the folder -o DIR: a run file per cell, runs.parquet, layers.parquet, leaderboard.html. Rerun to resume."""
    if out_dir is None:
        raise click.UsageError("Missing option '-o' / '--output' (the sweep's folder).")
    request = SweepRequest(out_dir, models=models, config=config, targets=_split(targets), modes=_split(modes),
                           dtypes=_split(dtypes), threads=tuple(_int(t) for t in _split(threads)),
                           opt_levels=_split(opt_levels), shapes=parse_shapes(shapes), runs=runs, warmup=warmup,
                           ray_address=address, num_cpus=num_cpus, no_ray=no_ray, dry_run=dry_run)
    hooks = dataclasses.replace(CLI_HOOKS, note=lambda line: click.echo(line, err=True))
    with usage_errors():
        result = sweep(request, hooks)
    if result.outcome is None:  # a dry run
        for cell, done in zip(result.cells, result.done, strict=True):
            click.echo(f"{'done ' if done else 'to do'}  {cell.key}")
        click.echo(f"{len(result.cells)} cells")
        return
    outcome = result.outcome
    click.echo(f"{len(result.cells)} cells: {len(outcome.skipped)} already done, {len(outcome.finished)} run now, "
               f"{len(outcome.failed)} failed")
    click.echo(f"wrote {out_dir / RUNS_TABLE} ({result.rows} rows), {out_dir / LAYERS_TABLE} ({result.layer_rows} "
               f"rows), {out_dir / LEADERBOARD}")
    for line in result.device_mismatches:
        click.echo(f"WARNING: {line}.")
    failure = result.failure()
    if failure is not None:
        raise failure


def _int(text: str) -> int:
    if not text.isdigit():
        raise click.BadParameter(f"{text!r} is not a non-negative integer", param_hint="--threads")
    return int(text)
