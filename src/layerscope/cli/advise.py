"""``layerscope advise RUN``: hot spots, bounds and CPU fallback, then findings with advice, as data
(:mod:`layerscope.workflows.advise`). The model is reloaded from the run's path (sha256 checked) for the rules that
read the graph; exit 2 when it changed. With ``--measure`` (the default when the run was measured on ONNX Runtime),
mitigations that can be tried on ONNX Runtime are measured: the subnormal-weights finding then reports the flushed
model's measured gain."""

from __future__ import annotations

import json
from pathlib import Path

import click

from layerscope.cli.console import SafeConsole, echo, echo_json
from layerscope.cli.options import Command, html_option, input_option, one_target_option, output_option
from layerscope.cli.outputs import write_html
from layerscope.report.analysis_terminal import advice_report
from layerscope.run import save_run
from layerscope.workflows.advise import AdviseRequest, advise


@click.command("advise", cls=Command)
@click.argument("run_path", metavar="RUN", type=click.Path(path_type=Path))
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="The model file, when it moved since the run was made (its sha256 must match the run's).")
@click.option("--no-model", is_flag=True, help="Do not load the model; rules that read the graph are skipped.")
@one_target_option(default=None, help="Profile for the rules (default: the one the run was estimated on).")
@click.option("--measure/--no-measure", "measure", default=None,
              help="Measure the gain of mitigations that can be tried on ONNX Runtime (flushing subnormal weights) "
                   "[default: when the run was measured on ONNX Runtime, with its session settings].")
@click.option("--measure-runs", default=20, show_default=True, type=click.IntRange(min=3),
              help="Paired rounds (the model, then its mitigated copy, alternating) when measuring a mitigation.")
@input_option
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=0), help="Hot spots shown.")
@click.option("--save", is_flag=True, help="Write the findings back into RUN.")
@output_option(allow_stdout=True,
               help="Write the run with its findings section to OUT ('-' for the findings alone on stdout).")
@html_option("the run with its findings")
def command(*, run_path: Path, model_path: Path | None, no_model: bool, target: str | None, measure: bool | None,
            measure_runs: int, input_specs: tuple[str, ...], top: int, save: bool, json_out: Path | None,
            html_out: Path | None) -> None:
    """Diagnose RUN and advise what to change, layer by layer."""
    result = advise(AdviseRequest(run_path, model=model_path, no_model=no_model, target=target, measure=measure,
                                  measure_runs=measure_runs, inputs=input_specs, top=top))
    run = result.run
    if json_out is not None and str(json_out) == "-":
        findings = run.findings.model_dump(mode="json", exclude_unset=True) if run.findings is not None else None
        echo_json(json.dumps(findings, indent=1, sort_keys=True, ensure_ascii=False))
        if html_out is not None:  # stdout holds the JSON alone
            echo(f"report: {write_html(run, html_out)}", err=True)
        return
    console = SafeConsole()
    console.print(advice_report(result.report, top))
    if save:
        save_run(run, run_path)
        console.print(f"findings saved in {run_path}")
    if json_out is not None:
        console.print(f"run file: {save_run(run, json_out)}")
    if html_out is not None:
        console.print(f"report: {write_html(run, html_out)}")
