"""``layerscope reconcile RUN [RUN ...]``: k = measured / estimated for the same part of the model, the estimate
scaled by k against the measurement per layer, k per op type, rank agreement, a verdict; across several runs,
the spread of k and what drives it (:mod:`layerscope.workflows.reconcile`). Exit 2 for a run without an estimate
and a measurement of the same part."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import Command, html_option, output_option
from layerscope.cli.outputs import write_html
from layerscope.errors import InputError
from layerscope.report.analysis_terminal import latency_stat_name, reconcile_report, spread_report
from layerscope.run import save_run
from layerscope.workflows.reconcile import ReconcileRequest, reconcile


@click.command("reconcile", cls=Command)
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=0), help="Rows in the tables.")
@click.option("--save", is_flag=True, help="Write the reconcile section back into each run file.")
@output_option(help="Write the (single) run with its reconcile section to OUT.")
@html_option("the run with its reconcile section", note="one RUN only")
def command(*, runs: tuple[Path, ...], top: int, save: bool, json_out: Path | None, html_out: Path | None) -> None:
    """Reconcile the estimate with the measurement in each RUN (from `profile` or `import`)."""
    if len(runs) > 1 and (json_out is not None or html_out is not None):
        if json_out is not None:
            raise InputError("-o/--output takes one run; with several runs use --save to update each run file")
        raise InputError("--html takes one run; with several runs use --save to update each run file, then "
                         "`layerscope report RUN` writes each one's HTML report")
    result = reconcile(ReconcileRequest(runs))
    console = SafeConsole()
    for path, rec, run in zip(runs, result.reconciliations, result.runs, strict=True):
        console.print(Text(str(path), style="bold"))
        console.print(reconcile_report(rec, top, latency_stat_name(run.latency)))
        console.print()
    if result.spread is not None:
        console.print(spread_report(result.spread))
    if save:
        for path, run in zip(runs, result.runs, strict=True):
            save_run(run, path)
    if json_out is not None:
        console.print(f"run file: {save_run(result.runs[0], json_out)}")
    elif save:
        console.print(f"reconcile saved in {len(runs)} run file(s)")
    if html_out is not None:
        console.print(f"report: {write_html(result.runs[0], html_out)}")
