"""``layerscope profile [MODEL]``: measure every layer on ONNX Runtime, joined to the estimate in one run.

Each runtime kernel is mapped back to the source layers it covers (see ``layerscope.measure.fusion``); a
fused kernel's time is split over its layers in proportion to their estimated cost and flagged as split.
Exit codes: 0, 2 (bad model, shape or input), 3 (provider not available), 130/143/129 (Ctrl-C, SIGTERM, SIGHUP:
what was measured by then is printed and saved; before the profiled runs, the end-to-end runs, marked partial).

``--ov-streams N`` is OpenVINO's NUM_STREAMS (``--streams`` is its deprecated spelling: in ``bench`` ``--streams``
means concurrent requests). ``--no-ov-fallback``: a model with layers OpenVINO cannot convert fails (exit 2) instead
of running those layers on ONNX Runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import click

from layerscope.cli.console import SafeConsole, echo_json
from layerscope.cli.options import (
    CLI_HOOKS,
    Command,
    backend_option,
    cli_dims,
    deprecated_option,
    html_option,
    input_option,
    intra_threads_option,
    openvino_bench_options,
    openvino_values,
    opt_level_option,
    output_option,
    parse_shapes,
    provider_option,
    shape_option,
    target_option,
    usage_errors,
)
from layerscope.cli.outputs import write_html
from layerscope.cli.pipeline import stress_option
from layerscope.measure.stress import StressSpec
from layerscope.report.command_terminal import command_report
from layerscope.report.exec_trace import LEVELS, execution_trace
from layerscope.report.units import human_us
from layerscope.run import save_run
from layerscope.runfile.models import Latency, RunFile
from layerscope.workflows.profile import PartialProfileRun, ProfileRequest, profile


@click.command("profile", cls=Command)
@click.argument("model", type=click.Path(path_type=Path), required=False)
@target_option
@shape_option
@input_option
@click.option("--runs", default=50, show_default=True, type=click.IntRange(min=1), help="Measured runs.")
@click.option("--warmup", default=10, show_default=True, type=click.IntRange(min=0), help="Untimed runs first.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@intra_threads_option()
@opt_level_option
@provider_option
@backend_option
@openvino_bench_options
@click.option("--ov-streams", "streams", default=0, show_default=True, type=click.IntRange(min=0),
              help="OpenVINO: inference streams on the device, NUM_STREAMS (0: what the performance hint chooses).")
@deprecated_option("--streams", dest="streams", new="--ov-streams", type=click.IntRange(min=0), default=None)
@click.option("--ov-fallback/--no-ov-fallback", "fallback", default=True, show_default=True,
              help="OpenVINO: run the layers it cannot convert (ai.onnx.ml ops, ...) on ONNX Runtime's CPU provider, "
                   "chained per inference, as ONNX Runtime's OpenVINO provider does; --no-ov-fallback fails instead.")
@output_option(help="Write the run file (estimate and measurement joined per layer).")
@html_option()
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=0), help="Rows in the layer table.")
@click.option("--format", "output_format", type=click.Choice(["table", "trace"]), default="table", show_default=True,
              help="table: the terminal report; trace: the per-layer execution trace as JSON on stdout.")
@click.option("--level", type=click.Choice(LEVELS), default="full", show_default=True,
              help="Detail of --format trace: basic (times), full (times, cycles, shapes, memory, thread, core, "
                   "stage), memory (times, bytes), pipeline (times, core, pipeline stage, unit on --target).")
@click.option("--timeline", is_flag=True,
              help="Also schedule one frame of the estimate on --target over its units, cores and DDR (as "
                   "`estimate --timeline`): the run holds the measurement and the timeline together.")
@stress_option
def command(*, model: Path | None, target: str, shapes: tuple[str, ...], input_specs: tuple[str, ...], runs: int,
            warmup: int, seed: int, threads: int, opt_level: str, provider: str, backend_name: str, streams: int,
            fallback: bool, json_out: Path | None, html_out: Path | None, top: int, output_format: str, level: str,
            timeline: bool, stress: StressSpec | None) -> None:
    """Measure every layer of MODEL (default: the bundled sample) on ONNX Runtime or OpenVINO, beside its
    estimate."""
    openvino = openvino_values()
    request = ProfileRequest(model, target=target, shapes=parse_shapes(shapes), dims=cli_dims(), inputs=input_specs,
                             runs=runs, warmup=warmup, seed=seed, threads=threads, opt_level=opt_level,
                             provider=provider, backend=backend_name, device=str(openvino["device"]),
                             precision=str(openvino["precision"]),
                             performance_hint=str(openvino["performance_hint"]),
                             streams=streams, timeline=timeline, stress=stress, fallback=fallback)
    try:
        with usage_errors():
            result = profile(request, CLI_HOOKS)
    except PartialProfileRun as partial:
        _keep_partial(partial, json_out, html_out)
    run, interrupted = result.run, result.interrupted
    if json_out is not None:
        written = save_run(run, json_out)
    if html_out is not None:
        html_written = write_html(run, html_out)
    if output_format == "trace":
        echo_json(json.dumps(execution_trace(run, level), indent=1, ensure_ascii=False))
    else:
        console = SafeConsole()
        console.print(command_report(run, top, timeline=timeline, kind="profile"))
        if json_out is not None:
            console.print(f"run file: {written}")
        if html_out is not None:
            console.print(f"report: {html_written}")
    if interrupted:
        # What was measured is printed and saved; the CLI's handler reports the interruption and exits 130.
        raise KeyboardInterrupt(_saved_note([written] if json_out is not None else [], "interrupted"))


def _saved_note(paths: list[Path], mark: str) -> str:
    """Where an interrupted command kept what it measured (the CLI's interruption line adds it)."""
    if not paths:
        return ""
    return f"what was measured is saved in {', '.join(map(str, paths))} (marked {mark})"


def _keep_partial(partial: PartialProfileRun, json_out: Path | None, html_out: Path | None) -> NoReturn:
    """Print and save the end-to-end runs of a profile interrupted before its profiled runs, then re-raise."""
    run = partial.run
    assert isinstance(run, RunFile)  # a profile's partial run is typed
    lat = run.latency or Latency()  # add_partial_latency always writes it
    SafeConsole().print(f"PARTIAL: interrupted before the profiled runs; {lat.samples} of {partial.planned_runs} "
                        f"end-to-end runs: median {human_us(lat.median_us or 0.0)}, "
                        f"P90 {human_us(lat.p90_us or 0.0)} "
                        "(no per-layer times)", markup=False, highlight=False)
    saved = [save_run(run, json_out)] if json_out is not None else []
    if html_out is not None:
        saved.append(write_html(run, html_out))
    raise KeyboardInterrupt(_saved_note(saved, "partial"))
