"""``layerscope pipeline SCRIPT.py:FUNCTION --model MODEL``, and the ``--stress`` option of ``bench`` and ``profile``.

``pipeline`` (:mod:`layerscope.workflows.pipeline`) loads the user's script by path (it is their own code: that
is the point), calls FUNCTION once per run with a model session made by layerscope
(:mod:`layerscope.runtimes.onnxruntime.pipeline`), and prints where the end-to-end time goes: the user's trace
points beside the model's layers, and the split into pre-processing / model / post-processing / other. An exception
in the script is one line (exit 2) naming its file and line; the script's traceback only with ``--debug``.

``--stress memory[:N]`` (:mod:`layerscope.measure.stress`) is defined here, so that ``bench`` and ``profile``
share one definition of the option; its terminal report is :mod:`layerscope.report.stress_terminal`.
Exit codes: 0, 2 (bad script, model or input; an exception in the script), 3 (provider not available),
130 (Ctrl-C: what was measured by then is printed and saved).
"""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    CLI_HOOKS,
    Command,
    cli_dims,
    deprecated_option,
    html_option,
    intra_threads_option,
    opt_level_option,
    output_option,
    parse_shapes,
    provider_option,
    shape_option,
    target_option,
    usage_errors,
)
from layerscope.cli.outputs import OutputPath, write_html
from layerscope.errors import InputError
from layerscope.fileio import write_atomic
from layerscope.measure.stress import StressSpec, parse_stress
from layerscope.report.command_terminal import command_report
from layerscope.run import save_run

# --- the command --------------------------------------------------------------------------------------------------

@click.command("pipeline", cls=Command)
@click.argument("function", metavar="SCRIPT.py:FUNCTION")
@click.argument("model", metavar="MODEL", required=False, type=click.Path(path_type=Path))
@deprecated_option("--model", "-m", dest="model", new="MODEL as the second argument",
                   type=click.Path(path_type=Path), default=None)
@target_option
@shape_option
@click.option("--runs", default=20, show_default=True, type=click.IntRange(min=1), help="Measured pipeline runs.")
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(min=0), help="Untimed runs first.")
@intra_threads_option()
@opt_level_option
@provider_option
@click.option("--layers/--no-layers", default=True, show_default=True,
              help="Run the pipeline again with ONNX Runtime's profiler on for per-layer times and kernels.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of model.example_inputs.")
@output_option(help="Write the run file (estimate, per-layer measurement and the pipeline section).")
@click.option("--trace", "trace_out", type=OutputPath(), default=None, metavar="OUT",
              help="Write a Perfetto trace of one run: user spans with the model's layers (OUT.gz: compressed).")
@click.option("--top", default=15, show_default=True, type=click.IntRange(min=0), help="Rows in the top table.")
@html_option()
def command(*, function: str, model: Path | None, target: str, shapes: tuple[str, ...], runs: int, warmup: int,
            threads: int, opt_level: str, provider: str, layers: bool, seed: int, json_out: Path | None,
            trace_out: Path | None, top: int, html_out: Path | None) -> None:
    """Profile a whole pipeline: FUNCTION(model) from SCRIPT.py, run after run, with its trace points; FUNCTION
    is called with a session on the ONNX MODEL (call model.run(None, feeds))."""
    from layerscope.workflows.pipeline import PipelineRequest, pipeline  # bench and profile import --stress here

    if model is None:
        raise click.UsageError("Missing argument 'MODEL'.")
    request = PipelineRequest(function, model, target=target, shapes=parse_shapes(shapes), dims=cli_dims(),
                              runs=runs, warmup=warmup, threads=threads, opt_level=opt_level, provider=provider,
                              layers=layers, seed=seed)
    with usage_errors():
        run = pipeline(request, CLI_HOOKS)
    console = SafeConsole()
    console.print(command_report(run, top, kind="pipeline"))
    if trace_out is not None:
        from layerscope.report.perfetto import trace_bytes

        written = write_atomic(trace_out, trace_bytes(run, compress=trace_out.suffix == ".gz"))
        console.print(f"trace: {written} (open in https://ui.perfetto.dev)")
    saved = save_run(run, json_out) if json_out is not None else None
    if saved is not None:
        console.print(f"run file: {saved}")
    if html_out is not None:
        console.print(f"report: {write_html(run, html_out)}")
    if run.pipeline is not None and run.pipeline.interrupted:
        raise KeyboardInterrupt(f"what was measured is saved in {saved} (marked interrupted)" if saved else "")


# --- --stress for bench and profile -------------------------------------------------------------------------------

def _stress_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> StressSpec | None:
    if value is None:
        return None
    try:
        return parse_stress(value)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from None


stress_option = click.option(
    "--stress", "stress", default=None, metavar="memory[:N]", callback=_stress_callback,
    help="Then measure in paired rounds without and with N background processes (default 1) streaming memory "
         "(arrays 4x the last-level cache) and report the change end to end, and per layer for profile; the "
         "layers that slow down most are marked memory_sensitive in the run.")
