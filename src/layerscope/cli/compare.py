"""``layerscope compare BEFORE AFTER``: the before/after table (latency, FPS, P99, utilization, CPU-fallback
count, peak memory, MACs) and per-layer deltas matched by id, with renamed, added and removed layers."""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.analysis.compare import compare_runs, comparison_section
from layerscope.cli.console import SafeConsole, echo
from layerscope.cli.outputs import OutputPath
from layerscope.fileio import write_atomic
from layerscope.report.analysis_markdown import compare_markdown
from layerscope.report.analysis_terminal import compare_report
from layerscope.run import save_run
from layerscope.runfile.io import load
from layerscope.runfile.models import Comparison


@click.command("compare")
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=0), help="Per-layer rows shown.")
@click.option("--markdown", "markdown_out", type=OutputPath(allow_stdout=True), default=None, metavar="OUT",
              help="Write the comparison as Markdown ('-' for stdout instead of the terminal table).")
@click.option("-o", "--output", "--json", "json_out", type=OutputPath(), default=None, metavar="RUN.json",
              help="Write the AFTER run with a 'comparison' section (a run file reports can render).")
@click.option("--labels", default="before,after", show_default=True, metavar="A,B", help="Column names.")
def command(*, before: Path, after: Path, top: int, markdown_out: Path | None, json_out: Path | None,
            labels: str) -> None:
    """Compare two runs of a model: before and after a change."""
    names = [part.strip() for part in labels.split(",")]
    if len(names) != 2 or not all(names):
        raise click.BadParameter("give two names separated by a comma", param_hint="--labels")
    run_before, run_after = load(before), load(after)
    cmp = compare_runs(run_before, run_after, before_label=names[0], after_label=names[1])
    if markdown_out is not None and str(markdown_out) == "-":
        echo(compare_markdown(cmp, top), nl=False)
    else:
        SafeConsole().print(compare_report(cmp, top))
        if markdown_out is not None:
            echo(f"markdown: {write_atomic(markdown_out, compare_markdown(cmp, top))}")
    if json_out is not None:
        compared = run_after.model_copy(update={
            "comparison": Comparison.model_validate(comparison_section(cmp, run_before, run_after))})
        echo(f"run file: {save_run(compared, json_out)}")
