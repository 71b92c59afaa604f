"""``layerscope bench [MODEL]``: end-to-end latency distribution and throughput on ONNX Runtime.

In the spirit of ``hrt_model_exec perf`` and ``trtexec``: warm-up, a run count or a duration, concurrent
streams; prints latency mean/min/max/P50/P90/P99/P99.9, FPS, CPU utilization and peak RSS, each stated
with the runtime, provider, threads and machine it was measured on; ``--json`` writes the run file.
Exit codes: 0, 2 (bad model, shape or input file), 3 (provider not available here), 130/143/129 (Ctrl-C,
SIGTERM, SIGHUP: what was measured by then is printed and saved).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.cli.console import SafeConsole
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
)
from layerscope.cli.outputs import OutputPath
from layerscope.cli.pipeline import stress_option, stress_progress, stress_report
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
from layerscope.report.terminal import key_value_grid
from layerscope.report.units import human_bytes, human_us
from layerscope.run import save_run
from layerscope.samples import DEFAULT_SAMPLE, sample_path


@click.command("bench")
@click.argument("model", type=click.Path(path_type=Path), required=False)
@click.option("--warmup", default=DEFAULT_WARMUP_RUNS, show_default=True, type=click.IntRange(min=0),
              help="Untimed runs per stream before measuring.")
@click.option("--runs", type=click.IntRange(min=1), default=None,
              help=f"Measured runs, all streams together [default: {DEFAULT_RUNS}].")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
              help="Measure for S seconds instead of a run count.")
@click.option("--threads", "streams", default=1, show_default=True, type=click.IntRange(min=1),
              help="Concurrent inference streams: threads calling session.run on one shared session.")
@intra_threads_option("--intra-threads")
@provider_option
@backend_option
@openvino_options
@opt_level_option
@shape_option
@input_option
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@click.option("--json", "json_out", type=OutputPath(), default=None, metavar="OUT",
              help="Write the run file (JSON) with the measurement and latency sections.")
@stress_option
def command(*, model: Path | None, warmup: int, runs: int | None, duration: float | None, streams: int,
            intra_threads: int, provider: str, backend_name: str, opt_level: str, shapes: tuple[str, ...],
            input_specs: tuple[str, ...], seed: int, json_out: Path | None, stress: StressSpec | None) -> None:
    """Measure the end-to-end latency of MODEL (default: the bundled YOLOv5s sample) on ONNX Runtime or
    OpenVINO (--backend openvino: each stream one synchronous infer request on the compiled model)."""
    if runs is not None and duration is not None:
        raise click.UsageError("give --runs or --duration, not both")
    config = BenchConfig(warmup_runs=warmup, runs=None if duration is not None else runs or DEFAULT_RUNS,
                         duration_s=duration, streams=streams)
    backend, provider = selected_backend(backend_name, provider)  # exit 3 before any work
    session_config = SessionConfig(provider=provider, threads=intra_threads,
                                   opt_level=opt_level if backend_name == "onnxruntime" else "compiler")
    model_path = model if model is not None else sample_path(DEFAULT_SAMPLE)
    graph = load_model(model_path, parse_shapes(shapes), cli_dims(), feeds=feeder(input_specs, seed))
    print_shape_notes(graph)
    inputs = resolve_inputs(graph, input_specs, seed)
    backend_info: dict[str, Any] = {}
    if backend_name == "openvino":
        from layerscope.measure.openvino_backend import InferSession, OpenVinoBackend, compile_for, compiled_settings

        assert isinstance(backend, OpenVinoBackend)
        compiled = compile_for(graph, session_config, backend.options, profiling=False)
        session: Any = InferSession(compiled, streams)
        backend_info = {"backend": "openvino", "backend_version": backend.info().version,
                        "settings": {"device": provider, **compiled_settings(compiled)}}
        full_provider = provider
    else:
        full_provider = ort_provider(provider)
        session = make_session(model_path, session_config)
    unit = "s" if config.duration_s is not None else "runs"
    labels = {"warmup": "warm-up", "measure": "measuring"}
    throughput = backend_name == "openvino" and backend_info["settings"]["performance_hint"] != "LATENCY"
    with phase_progress(labels, {"measure": unit}) as progress:
        if throughput:  # OpenVINO's throughput mode: an AsyncInferQueue, --threads requests (1: its optimum)
            from layerscope.measure.openvino_backend import async_bench

            jobs = streams if streams > 1 else int(session.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            result = async_bench(session.compiled, inputs.arrays, config, jobs, progress)
            backend_info["settings"].update(mode="throughput: AsyncInferQueue", async_requests=jobs)
        else:
            result = run_bench(session, inputs.arrays, config, progress)
    run = run_from_bench(graph, result, session_config=session_config, provider=full_provider, inputs=inputs,
                         seed=seed, machine=machine_info(), **backend_info)
    interrupted = result.interrupted
    if stress is not None and not interrupted:
        with stress_progress(labels, stress.rounds, {"measure": unit}) as progress_for:
            experiment = paired_rounds(lambda stressed, i: run_bench(  # (latency mode)
                session, inputs.arrays, config, progress_for(stressed, i)), stress, interrupted=lambda r: r.interrupted)
        add_stress(run, experiment, lambda r: r.latency, model_threads=intra_threads * streams)
        interrupted = experiment.cut_short(stress, lambda r: r.interrupted)
    console = SafeConsole()
    console.print(bench_report(run))
    if "stress" in run:
        console.print(stress_report(run))
    written = save_run(run, json_out) if json_out is not None else None
    if written is not None:
        console.print(f"run file: {written}")
    if interrupted:
        # What was measured is printed and saved; the CLI's handler reports the interruption and exits 130.
        raise KeyboardInterrupt(f"what was measured is saved in {written} (marked interrupted)" if written else "")


def bench_report(run: Mapping[str, Any]) -> RenderableType:
    """The latency table and the context lines of a bench run file (a pure function of the saved run)."""
    return Group(latency_table(run), Text(""), bench_context(run))


def latency_table(run: Mapping[str, Any]) -> Table:
    """One row per stream (when several) and one for all runs: runs, mean, min, max, percentiles, FPS."""
    m, lat = run["measurement"], run["latency"]
    table = Table(title=f"End-to-end latency, {lat['samples']} measured runs"
                        f"{' (INTERRUPTED)' if m.get('interrupted') else ''}",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                  pad_edge=False, caption=_p999_caption(lat['samples']), caption_justify="left")
    table.add_column("stream", no_wrap=True)
    for header in ("runs", "mean", "min", "max", "P50", "P90", "P99", "P99.9", "FPS"):
        table.add_column(header, justify="right", no_wrap=True)
    streams = m.get("stream_results", [])
    if len(streams) > 1:
        for s in streams:
            if s["latency"] is not None:
                table.add_row(str(s["stream"]), *_latency_cells(s["latency"], s["runs"], s["fps"]))
    table.add_row("all", *_latency_cells(lat, lat["samples"], lat["fps"]))
    return table


def _latency_cells(lat: Mapping[str, Any], runs: int, fps: float) -> list[str]:
    p50 = lat.get("p50_us", lat.get("median_us"))
    return [str(runs), *(human_us(v) for v in (lat["mean_us"], lat["min_us"], lat["max_us"], p50,
                                               lat["p90_us"], lat["p99_us"], lat["p999_us"])), _fps(fps)]


def _fps(fps: float) -> str:
    return f"{fps:.1f}" if fps >= 10 else f"{fps:.2f}"


def _p999_caption(samples: int) -> str | None:
    if samples >= 1000:
        return None
    return f"P99.9 of {samples} runs is interpolated between the largest samples (numpy 'linear')"


def bench_context(run: Mapping[str, Any]) -> Table:
    """Throughput, CPU, memory, inputs, and what it was measured on: runtime, provider, threads, machine."""
    m, lat = run["measurement"], run["latency"]
    machine = m["machine"]
    grid = key_value_grid()
    model = run["model"]
    grid.add_row("model", Text(f"{model['name']}  ({model['path']})"))
    for item in m["inputs"]:
        shape = next((t for t in model["inputs"] if t["name"] == item["name"]), None)
        described = f"{'x'.join(map(str, shape['shape']))} {shape['dtype']}  " if shape else ""
        grid.add_row("input", Text(f"{item['name']} {described}{item['source']}"))
    streams = m["streams"]
    per_stream = f"; {_fps(lat['fps'] / streams)} per stream" if streams > 1 else ""
    grid.add_row("throughput", f"{_fps(lat['fps'])} FPS ({streams} stream{'s' if streams > 1 else ''}{per_stream})")
    grid.add_row("CPU", f"{100 * m['cpu_util']:.1f}% of {m['cores']} cores "
                        f"({m['cpu_time_s'] / m['wall_s'] if m['wall_s'] else 0:.2f} cores busy, whole process)")
    rss = m.get("peak_rss_bytes")
    grid.add_row("peak RSS", f"{human_bytes(rss)} (whole process, since start)" if rss is not None else "n/a")
    openvino = m["backend"] == "openvino"
    grid.add_row("runtime", f"{m['backend']} {m['backend_version']}, {m['provider']}, " + (
        f"precision {m.get('precision')}, {m.get('performance_hint')} hint, {m.get('num_streams')} OpenVINO "
        "stream(s)" if openvino else f"opt level {m['opt_level']}"))
    intra = m["threads"] or ("OpenVINO default" if openvino else "onnxruntime default (one per physical core)")
    grid.add_row("threads", f"{streams} stream{'s' if streams > 1 else ''} x intra-op threads: {intra}")
    grid.add_row("machine", Text(f"{machine.get('hostname')}: {machine.get('cpu')}, {machine.get('cores')} "
                                 f"cores, {machine.get('os')}, Python {machine.get('python')}"))
    if m.get("async_requests"):
        grid.add_row("MEASURED", f"{lat['samples']} runs after {m['warmup']} warm-up run(s) per request; "
                                 f"latency = start_async to completion on an AsyncInferQueue of "
                                 f"{m['async_requests']} requests, inputs already in memory")
    else:
        grid.add_row("MEASURED", f"{lat['samples']} runs after {m['warmup']} warm-up run(s) per stream; "
                                 f"latency = one {'InferRequest.infer' if openvino else 'session.run'} call, "
                                 "inputs already in memory")
    if m.get("interrupted"):
        planned = f"{m['planned_runs']} planned" if m.get("planned_runs") else f"{m['duration_s']:g} s planned"
        grid.add_row("INTERRUPTED", f"after {lat['samples']} runs ({planned}): the figures cover "
                                    "the runs measured")
    return grid
