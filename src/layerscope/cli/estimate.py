"""``layerscope estimate MODEL``: a static, per-layer estimate of a model on a hardware profile
(:mod:`layerscope.workflows.estimate`)."""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.analysis.fusion_rules import FUSION_SOURCES
from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    CLI_HOOKS,
    Command,
    cli_dims,
    html_option,
    input_option,
    output_option,
    parse_shapes,
    shape_option,
    target_option,
    usage_errors,
)
from layerscope.cli.outputs import write_html
from layerscope.collector import collector_paused
from layerscope.report.command_terminal import command_report
from layerscope.run import save_run
from layerscope.workflows.estimate import DTYPES, EstimateRequest, estimate


@click.command("estimate", cls=Command)
@click.argument("model", type=click.Path(path_type=Path))
@target_option
@shape_option
@input_option
@click.option("--dtype", type=click.Choice(DTYPES), default=None,
              help="Deployed dtype of the accelerator layers (default: the profile's).")
@click.option("--quantized-outputs", is_flag=True,
              help="Estimate the model deployed without the Dequantize nodes at its outputs (hb_mapper "
                   "remove_node_type: \"Dequantize\"): the outputs are handed over as the accelerator wrote them, "
                   "without the float32 hand-over the RDK profiles price per inference.")
@output_option(help="Write the run file (JSON) that later commands read and extend. An existing run of the same "
                   "model keeps its measured sections; only its estimate (and timeline) is refreshed.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=0),
              help="How many layers the table shows.")
@click.option("--timeline", is_flag=True,
              help="Also schedule one frame over the units, cores and DDR: summary, memory plan, and with -o "
                   "the timeline per unit and core and the bandwidth over time.")
@html_option()
@click.option("--predictor", "predictor_path", type=click.Path(path_type=Path), default=None, metavar="P.json",
              help="Also predict the latency per kernel with a predictor from `calibrate --kernels` (the roofline "
                   "stays the explanation).")
@click.option("--fusion", "fusion", type=click.Choice(FUSION_SOURCES), default="auto", show_default=True,
              help="With --predictor: group layers into kernels as the predictor's runtime does (runtime), by the "
                   "rules learnt at calibration (rules), or the runtime where it is installed (auto).")
def command(*, model: Path, target: str, shapes: tuple[str, ...], input_specs: tuple[str, ...], dtype: str | None,
            json_out: Path | None,
            top: int, timeline: bool, html_out: Path | None, predictor_path: Path | None, fusion: str,
            quantized_outputs: bool) -> None:
    """Estimate every layer of MODEL on a hardware profile (roofline; an estimate, not a measurement)."""
    # a run to merge into is a regular file; a device or FIFO named as the output (/dev/stdout) is written through
    merge_into = json_out if json_out is not None and json_out.is_file() else None
    request = EstimateRequest(model, target=target, shapes=parse_shapes(shapes), dims=cli_dims(),
                              inputs=input_specs, dtype=dtype, timeline=timeline, predictor=predictor_path,
                              fusion=fusion, merge_into=merge_into, quantized_outputs=quantized_outputs)
    with collector_paused(), usage_errors():
        result = estimate(request, CLI_HOOKS)
        console = SafeConsole()
        console.print(command_report(result.run, top, timeline=timeline, kind="estimate"))
        if json_out is not None:
            written = save_run(result.run, json_out, result.as_read)
            refreshed = " (estimate refreshed in the existing run)" if result.notes is not None else ""
            console.print(f"run file: {written}{refreshed}")
            for note in result.notes or ():
                console.print(f"  {note}", markup=False, highlight=False)
        if html_out is not None:
            console.print(f"report: {write_html(result.run, html_out)}")
