"""``layerscope bench [MODEL]``: end-to-end latency distribution and throughput on ONNX Runtime.

In the spirit of ``hrt_model_exec perf`` and ``trtexec``: warm-up, a run count or a duration, concurrent
streams; prints latency mean/min/max/P50/P90/P99/P99.9, FPS, CPU utilization and peak RSS, each stated
with the runtime, provider, threads and machine it was measured on; ``--json`` writes the run file.
Exit codes: 0, 2 (bad model, shape or input file), 3 (provider not available here), 130/143/129 (Ctrl-C,
SIGTERM, SIGHUP: what was measured by then is printed and saved).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    Command,
    backend_option,
    cli_dims,
    deprecated_option,
    input_option,
    intra_threads_option,
    openvino_bench_options,
    opt_level_option,
    parse_shapes,
    print_shape_notes,
    provider_option,
    selected_backend,
    shape_option,
)
from layerscope.cli.outputs import OutputPath
from layerscope.cli.pipeline import stress_option, stress_progress
from layerscope.cli.progress import phase_progress
from layerscope.measure.bench import (
    DEFAULT_RUNS,
    DEFAULT_WARMUP_RUNS,
    BenchConfig,
    run_bench,
    run_from_bench,
)
from layerscope.measure.inputs import feeder, resolve_inputs
from layerscope.measure.session import (
    SessionConfig,
    machine_info,
    make_session,
    ort_provider,
)
from layerscope.measure.stress import StressSpec, add_stress, paired_rounds
from layerscope.model import load_model
from layerscope.report.command_terminal import command_report
from layerscope.run import save_run
from layerscope.samples import DEFAULT_SAMPLE, sample_path


@click.command("bench", cls=Command)
@click.argument("model", type=click.Path(path_type=Path), required=False)
@click.option("--warmup", default=DEFAULT_WARMUP_RUNS, show_default=True, type=click.IntRange(min=0),
              help="Untimed runs per stream before measuring.")
@click.option("--runs", type=click.IntRange(min=1), default=None,
              help=f"Measured runs, all streams together [default: {DEFAULT_RUNS}].")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
              help="Measure for S seconds instead of a run count.")
@click.option("--streams", "streams", default=1, show_default=True, type=click.IntRange(min=1),
              help="Concurrent inference streams: threads calling session.run on one shared session.")
@intra_threads_option()
@deprecated_option("--intra-threads", dest="threads", new="--threads", type=click.IntRange(min=0), default=None)
@provider_option
@backend_option
@openvino_bench_options
@opt_level_option
@shape_option
@input_option
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@click.option("-o", "--output", "--json", "json_out", type=OutputPath(), default=None, metavar="RUN.json",
              help="Write the run file (JSON) with the measurement and latency sections.")
@stress_option
def command(*, model: Path | None, warmup: int, runs: int | None, duration: float | None, streams: int,
            threads: int, provider: str, backend_name: str, opt_level: str, shapes: tuple[str, ...],
            input_specs: tuple[str, ...], seed: int, json_out: Path | None, stress: StressSpec | None) -> None:
    """Measure the end-to-end latency of MODEL (default: the bundled YOLOv5s sample) on ONNX Runtime or
    OpenVINO (--backend openvino: each stream one synchronous infer request on the compiled model)."""
    if runs is not None and duration is not None:
        raise click.UsageError("give --runs or --duration, not both")
    config = BenchConfig(warmup_runs=warmup, runs=None if duration is not None else runs or DEFAULT_RUNS,
                         duration_s=duration, streams=streams)
    backend, provider = selected_backend(backend_name, provider)  # exit 3 before any work
    _note_threads_meaning()
    session_config = SessionConfig(provider=provider, threads=threads,
                                   opt_level=opt_level if backend_name == "onnxruntime" else "compiler")
    model_path = model if model is not None else sample_path(DEFAULT_SAMPLE)
    graph = load_model(model_path, parse_shapes(shapes), cli_dims(), feeds=feeder(input_specs, seed))
    print_shape_notes(graph)
    inputs = resolve_inputs(graph, input_specs, seed)
    backend_version = backend.info().version
    settings: dict[str, Any] = {}  # OpenVINO: what its compiler chose (device, precision, hint, streams, threads)
    throughput = False
    if backend_name == "openvino":
        from layerscope.measure.openvino_backend import InferSession, OpenVinoBackend, compile_for, compiled_settings

        assert isinstance(backend, OpenVinoBackend)
        compiled = compile_for(graph, session_config, backend.options, profiling=False)
        session: Any = InferSession(compiled, streams)
        settings = {"device": provider, **compiled_settings(compiled)}
        throughput = str(compiled.get_property("PERFORMANCE_HINT")) != "LATENCY"
        full_provider = provider
    else:
        full_provider = ort_provider(provider)
        session = make_session(model_path, session_config)
    unit = "s" if config.duration_s is not None else "runs"
    labels = {"warmup": "warm-up", "measure": "measuring"}
    with phase_progress(labels, {"measure": unit}) as progress:
        if throughput:  # OpenVINO's throughput mode: an AsyncInferQueue, --streams requests (1: its optimum)
            from layerscope.measure.openvino_backend import async_bench

            jobs = streams if streams > 1 else int(session.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            result = async_bench(session.compiled, inputs.arrays, config, jobs, progress)
            settings.update(mode="throughput: AsyncInferQueue", async_requests=jobs)
        else:
            result = run_bench(session, inputs.arrays, config, progress)
    run = run_from_bench(graph, result, session_config=session_config, provider=full_provider, inputs=inputs,
                         seed=seed, machine=machine_info(), backend=backend_name, backend_version=backend_version,
                         settings=settings or None)
    interrupted = result.interrupted
    if stress is not None and not interrupted:
        with stress_progress(labels, stress.rounds, {"measure": unit}) as progress_for:
            experiment = paired_rounds(lambda stressed, i: run_bench(  # (latency mode)
                session, inputs.arrays, config, progress_for(stressed, i)), stress, interrupted=lambda r: r.interrupted)
        run = add_stress(run, experiment, lambda r: r.latency, model_threads=threads * streams)
        interrupted = experiment.cut_short(stress, lambda r: r.interrupted)
    console = SafeConsole()
    console.print(command_report(run, kind="bench"))
    written = save_run(run, json_out) if json_out is not None else None
    if written is not None:
        console.print(f"run file: {written}")
    if interrupted:
        # What was measured is printed and saved; the CLI's handler reports the interruption and exits 130.
        raise KeyboardInterrupt(f"what was measured is saved in {written} (marked interrupted)" if written else "")


def _note_threads_meaning() -> None:
    """``--threads`` was the number of streams in bench until this release: say so once when it is given and
    ``--streams`` is not (a script written for the old meaning now sets intra-op threads)."""
    ctx = click.get_current_context()
    given = click.core.ParameterSource.COMMANDLINE
    if ctx.get_parameter_source("threads") is given and ctx.get_parameter_source("streams") is not given:
        click.echo("layerscope: note: bench --threads is ONNX Runtime's intra-op threads, as in every command; "
                   "concurrent streams are --streams (--threads meant streams before this release)", err=True)
