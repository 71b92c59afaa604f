"""``layerscope compare BEFORE AFTER``: the verdict on the end-to-end latency and on every matched layer (faster,
slower, or no change detectable at the runs' noise, with 95% intervals), the before/after table, renamed, added and
removed layers; Markdown for a pull-request comment; ``--fail-if-slower`` / ``--fail-if-layer-slower`` exit 4 on a
regression (:class:`layerscope.errors.Regression`) after printing and writing everything asked."""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.cli.console import SafeConsole, echo
from layerscope.cli.options import Command, html_option, output_option
from layerscope.cli.outputs import OutputPath, write_html
from layerscope.fileio import write_atomic
from layerscope.report.analysis_markdown import compare_markdown
from layerscope.report.compare_terminal import compare_report
from layerscope.run import save_run
from layerscope.workflows.compare import CompareRequest, compare


@click.command("compare", cls=Command)
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=0), help="Per-layer rows shown.")
@click.option("--markdown", "markdown_out", type=OutputPath(allow_stdout=True), default=None, metavar="OUT",
              help="Write the comparison as Markdown for a pull-request comment ('-' for stdout instead of the "
                   "terminal table).")
@output_option(help="Write the AFTER run with a 'comparison' section (a run file reports can render).")
@html_option("the AFTER run with its comparison")
@click.option("--labels", default="before,after", show_default=True, metavar="A,B", help="Column names.")
@click.option("--fail-if-slower", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Exit 4 when the end-to-end latency P50 is judged slower (its 95% interval above 0) by more than "
                   "PCT percent.")
@click.option("--fail-if-layer-slower", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Exit 4 when any layer in both runs is judged slower by more than PCT percent (runs that "
                   "measured layers: `profile`).")
def command(*, before: Path, after: Path, top: int, markdown_out: Path | None, json_out: Path | None,
            html_out: Path | None,
            labels: str, fail_if_slower: float | None, fail_if_layer_slower: float | None) -> None:
    """Compare two runs of a model: before and after a change; judge each difference against the runs' noise."""
    names = tuple(part.strip() for part in labels.split(","))
    if len(names) != 2:
        raise click.BadParameter("give two names separated by a comma", param_hint="--labels")
    result = compare(CompareRequest(before, after, labels=(names[0], names[1]), fail_if_slower=fail_if_slower,
                                    fail_if_layer_slower=fail_if_layer_slower))
    cmp = result.comparison
    to_stdout = markdown_out is not None and str(markdown_out) == "-"  # stdout holds the Markdown alone
    if to_stdout:
        echo(compare_markdown(cmp, top), nl=False)
    else:
        SafeConsole().print(compare_report(cmp, top))
        if markdown_out is not None:
            echo(f"markdown: {write_atomic(markdown_out, compare_markdown(cmp, top))}")
    if json_out is not None:
        echo(f"run file: {save_run(result.run, json_out)}", err=to_stdout)
    if html_out is not None:
        echo(f"report: {write_html(result.run, html_out)}", err=to_stdout)
    result.check()
