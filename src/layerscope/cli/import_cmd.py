"""``layerscope import FILES...``: the vendors' own profiling outputs into a run file
(:mod:`layerscope.workflows.import_run`).

With ``--model`` the vendor entries are joined to the ONNX model's layers (what cannot be joined is
listed); without it the run's layers are the vendor's entries. A Horizon ``profiler.log`` given with the
compiler's static report JSON also prints k (board BPU time / static estimate) and the static per-layer
shares scaled by k. The report is :mod:`layerscope.report.import_terminal`'s.
"""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    Command,
    cli_dims,
    deprecated_option,
    html_option,
    output_option,
    parse_shapes,
    shape_option,
)
from layerscope.cli.outputs import write_html
from layerscope.importers import FORMATS
from layerscope.report.import_terminal import import_report
from layerscope.run import save_run
from layerscope.workflows.import_run import ImportRequest, import_run


@click.command("import", cls=Command)
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--model", type=click.Path(path_type=Path), default=None, metavar="MODEL",
              help="The ONNX model the vendor files profile: join their entries to its layers.")
@shape_option
@click.option("--from", "fmt", type=click.Choice(("auto", *FORMATS)), default="auto", show_default=True,
              help="The vendor tool whose files these are (auto: detected from each file's content).")
@deprecated_option("--format", dest="fmt", new="--from", type=click.Choice(("auto", *FORMATS)), default=None)
@output_option(dest="output", help="Write the run file that later commands read.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=0),
              help="How many layers each table shows.")
@html_option()
def command(*, files: tuple[Path, ...], model: Path | None, shapes: tuple[str, ...], fmt: str,
            output: Path | None, top: int, html_out: Path | None) -> None:
    """Import vendor profiling outputs (Horizon, TensorRT, ONNX Runtime, OpenVINO, RKNN) into a run."""
    request = ImportRequest(files, model=model, shapes=parse_shapes(shapes), dims=cli_dims(), format=fmt)
    imported = import_run(request)
    console = SafeConsole()
    console.print(import_report(imported.run, top, imported.warnings))
    if output is not None:
        console.print(f"run file: {save_run(imported.run, output)}")
    if html_out is not None:
        console.print(f"report: {write_html(imported.run, html_out)}")
