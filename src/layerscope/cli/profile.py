"""``layerscope profile [MODEL]``: measure every layer on ONNX Runtime, joined to the estimate in one run.

Each runtime kernel is mapped back to the source layers it covers (see ``layerscope.measure.fusion``); a
fused kernel's time is split over its layers in proportion to their estimated cost and flagged as split.
Exit codes: 0, 2 (bad model, shape or input), 3 (provider not available), 130/143/129 (Ctrl-C, SIGTERM, SIGHUP:
what was measured by then is printed and saved; before the profiled runs, the end-to-end runs, marked partial).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import click

from layerscope.cli.console import SafeConsole, echo_json
from layerscope.cli.options import (
    backend_option,
    cli_dims,
    input_option,
    intra_threads_option,
    openvino_options,
    opt_level_option,
    parse_shapes,
    print_shape_notes,
    provider_option,
    selected_backend,
    shape_option,
    target_option,
)
from layerscope.cli.outputs import OutputPath, write_html
from layerscope.cli.pipeline import stress_option, stress_progress
from layerscope.cli.progress import phase_progress
from layerscope.estimate import estimate_graph, simulate_timeline
from layerscope.measure.backend import get_backend
from layerscope.measure.inputs import feeder, make_inputs
from layerscope.measure.profile import PartialProfile
from layerscope.measure.session import SessionConfig, machine_info
from layerscope.measure.stress import StressSpec, add_stress, layer_medians, paired_rounds
from layerscope.model import load_model
from layerscope.report.command_terminal import command_report
from layerscope.report.exec_trace import LEVELS, execution_trace
from layerscope.report.units import human_us
from layerscope.run import add_measurement, add_partial_latency, add_timeline, estimate_run, save_run
from layerscope.runfile.models import Latency, RunFile
from layerscope.samples import DEFAULT_SAMPLE, sample_path
from layerscope.targets import load_profile

_PHASES = {"warmup": "warm-up", "latency": "end-to-end runs", "warmup-profiled": "warm-up (profiler on)",
           "profiled": "profiled runs"}


@click.command("profile")
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
@openvino_options
@click.option("-o", "--output", "--json", "json_out", type=OutputPath(), default=None, metavar="RUN.json",
              help="Write the run file (estimate and measurement joined per layer).")
@click.option("--html", "html_out", type=OutputPath(), default=None, metavar="OUT",
              help="Also write the self-contained HTML report (as `layerscope report` renders it).")
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
            warmup: int, seed: int, threads: int, opt_level: str, provider: str, backend_name: str,
            json_out: Path | None, html_out: Path | None, top: int, output_format: str, level: str, timeline: bool,
            stress: StressSpec | None) -> None:
    """Measure every layer of MODEL (default: the bundled sample) on ONNX Runtime or OpenVINO, beside its
    estimate."""
    # exit 3 before any work when the provider (OpenVINO: the device) is missing
    backend, provider = selected_backend(backend_name, provider)
    model = model if model is not None else sample_path(DEFAULT_SAMPLE)
    graph = load_model(model, parse_shapes(shapes), cli_dims(), feeds=feeder(input_specs, seed))
    print_shape_notes(graph)
    feeds = make_inputs(graph, input_specs, seed)
    profile = load_profile(target)
    estimate = estimate_graph(graph, profile)
    weights = {e.layer_id: e.latency_us for e in estimate.layers}
    config = SessionConfig(provider=provider, threads=threads,
                           opt_level=opt_level if backend_name == "onnxruntime" else "compiler")
    try:
        with phase_progress(_PHASES) as progress:
            measurement = backend.profile(graph, feeds, config, runs=runs, warmup=warmup, weights=weights,
                                          progress=progress)
    except PartialProfile as partial:
        _keep_partial(estimate_run(graph, estimate, profile), partial, json_out, html_out, backend.name)
    run = add_measurement(estimate_run(graph, estimate, profile), measurement)
    if timeline:
        run = add_timeline(run, simulate_timeline(graph, profile, None, costs=estimate.costs),
                           profile.ddr_nominal_bytes_per_s)
    interrupted = measurement.interrupted
    if stress is not None and not interrupted:
        with stress_progress(_PHASES, stress.rounds) as progress_for:
            experiment = paired_rounds(lambda stressed, i: backend.profile(
                graph, feeds, config, runs=runs, warmup=warmup, weights=weights, progress=progress_for(stressed, i)),
                stress, interrupted=lambda m: m.interrupted)
        run = add_stress(run, experiment, lambda m: m.latency, model_threads=threads, layer_times=layer_medians)
        interrupted = experiment.cut_short(stress, lambda m: m.interrupted)
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


def _keep_partial(run: RunFile, partial: PartialProfile, json_out: Path | None,
                  html_out: Path | None, backend_name: str = "onnxruntime") -> NoReturn:
    """Print and save the end-to-end runs of a profile interrupted before its profiled runs, then re-raise."""
    version = get_backend(backend_name).info().version
    run = add_partial_latency(run, partial, backend_version=version, machine=machine_info(), backend=backend_name)
    lat = run.latency or Latency()  # add_partial_latency always writes it
    SafeConsole().print(f"PARTIAL: interrupted before the profiled runs; {lat.samples} of {partial.planned_runs} "
                        f"end-to-end runs: median {human_us(lat.median_us or 0.0)}, "
                        f"P90 {human_us(lat.p90_us or 0.0)} "
                        "(no per-layer times)", markup=False, highlight=False)
    saved = [save_run(run, json_out)] if json_out is not None else []
    if html_out is not None:
        saved.append(write_html(run, html_out))
    raise KeyboardInterrupt(_saved_note(saved, "partial"))
