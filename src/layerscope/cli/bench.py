"""``layerscope bench [MODEL]``: end-to-end latency distribution and throughput on ONNX Runtime
(:mod:`layerscope.workflows.bench`).

In the spirit of ``hrt_model_exec perf`` and ``trtexec``: warm-up, a run count or a duration, concurrent
streams; prints latency mean/min/max/P50/P90/P99/P99.9, FPS, CPU utilization and peak RSS, each stated
with the runtime, provider, threads and machine it was measured on; ``-o`` writes the run file.
``--sweep AXIS=V1,V2`` (axes ``streams``, ``batch``, ``threads``; repeatable, the product is measured) prints a
table of latency against throughput with the knee, and with ``--latency-budget 20ms`` the best point within it.
Exit codes: 0, 2 (bad model, shape or input file, bad --sweep), 3 (provider not available here), 130/143/129
(Ctrl-C, SIGTERM, SIGHUP: what was measured by then is printed and saved).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from layerscope.cli.console import SafeConsole
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
    usage_errors,
)
from layerscope.cli.outputs import write_html
from layerscope.cli.pipeline import stress_option
from layerscope.measure.bench import DEFAULT_RUNS, DEFAULT_WARMUP_RUNS
from layerscope.measure.stress import StressSpec
from layerscope.report.command_terminal import command_report
from layerscope.run import save_run
from layerscope.workflows.bench import SWEEP_AXES, BenchRequest, Sweep, bench

#: ``--latency-budget`` units, in µs.
_TIME_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


class SweepAxis(click.ParamType[tuple[str, tuple[int, ...]]]):
    """``--sweep AXIS=V1,V2,...``: an axis of :data:`~layerscope.workflows.bench.SWEEP_AXES` and its counts."""

    name = "AXIS=V,V"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        axis, _, values = str(value).partition("=")
        axis = axis.strip().lower()
        if axis not in SWEEP_AXES or not values:
            self.fail(f"{value!r}: expected AXIS=V1,V2 with AXIS one of {', '.join(SWEEP_AXES)}, "
                      "e.g. --sweep streams=1,2,4", param, ctx)
        try:
            counts = tuple(dict.fromkeys(int(v) for v in values.split(",") if v.strip()))
        except ValueError:
            self.fail(f"{value!r}: the values must be whole numbers, e.g. {axis}=1,2,4", param, ctx)
        if not counts or min(counts) < (0 if axis == "threads" else 1):
            self.fail(f"{value!r}: {axis} must be {'>= 0' if axis == 'threads' else '>= 1'}", param, ctx)
        return axis, counts


class Duration(click.ParamType[float]):
    """A time with a unit (``20ms``, ``500us``, ``0.02s``; a bare number is ms), converted to µs."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        text = str(value).strip().lower()
        unit = next((u for u in ("ms", "us", "µs", "s") if text.endswith(u)), "")
        try:
            number = float(text[:len(text) - len(unit)] if unit else text)
        except ValueError:
            number = -1.0
        if not number > 0 or number == float("inf"):
            self.fail(f"{value!r}: expected a positive time such as 20ms, 500us or 0.02s", param, ctx)
        return number * _TIME_UNITS[unit or "ms"]


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
@click.option("--ov-fallback/--no-ov-fallback", "fallback", default=True, show_default=True,
              help="OpenVINO: run the layers it cannot convert (ai.onnx.ml ops, ...) on ONNX Runtime's CPU provider, "
                   "chained per inference in one stream; --no-ov-fallback fails instead.")
@opt_level_option
@shape_option
@input_option
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@output_option(help="Write the run file (JSON) with the measurement and latency sections.")
@html_option(note="a sweep's curve is in its Charts tab")
@click.option("--top", default=None, type=click.IntRange(min=0),
              help="Rows of the sweep table: the points of highest samples/s, the knee and the best always among "
                   "them (default: all; 0: no table).")
@click.option("--sweep", "sweep_axes", multiple=True, type=SweepAxis(), metavar="AXIS=V,V",
              help="Measure every combination of the axes given: streams (concurrent requests), batch (the "
                   "model's symbolic batch dim), threads (intra-op threads), e.g. --sweep streams=1,2,4,8 "
                   "--sweep batch=1,4. Each point warms up and runs for --duration (default 2 s) or --runs.")
@click.option("--latency-budget", "latency_budget_us", type=Duration(), default=None, metavar="TIME",
              help="With --sweep: choose the point of highest samples/s whose P99 per request is within TIME "
                   "(e.g. 20ms, 500us; a bare number is ms).")
@stress_option
def command(*, model: Path | None, warmup: int, runs: int | None, duration: float | None, streams: int,
            threads: int, provider: str, backend_name: str, opt_level: str, shapes: tuple[str, ...],
            input_specs: tuple[str, ...], seed: int, json_out: Path | None, html_out: Path | None, top: int | None,
            sweep_axes: tuple[tuple[str, tuple[int, ...]], ...], latency_budget_us: float | None,
            stress: StressSpec | None, fallback: bool) -> None:
    """Measure the end-to-end latency of MODEL (default: the bundled YOLOv5s sample) on ONNX Runtime or
    OpenVINO (--backend openvino: each stream one synchronous infer request on the compiled model; with --sweep
    an AsyncInferQueue of `streams` requests compiled with NUM_STREAMS = streams)."""
    openvino = openvino_values()
    sweep = Sweep(**dict(sweep_axes)) if sweep_axes else None
    request = BenchRequest(model, warmup=warmup, runs=runs, duration=duration, streams=streams, threads=threads,
                           provider=provider, backend=backend_name, device=str(openvino["device"]),
                           precision=str(openvino["precision"]), performance_hint=str(openvino["performance_hint"]),
                           opt_level=opt_level, shapes=parse_shapes(shapes), dims=cli_dims(), inputs=input_specs,
                           seed=seed, stress=stress, sweep=sweep, latency_budget_us=latency_budget_us,
                           fallback=fallback)
    with usage_errors():
        result = bench(request, dataclasses.replace(CLI_HOOKS, ready=_note_threads_meaning))
    run, interrupted = result.run, result.interrupted
    console = SafeConsole()
    console.print(command_report(run, top, kind="bench"))
    written = save_run(run, json_out) if json_out is not None else None
    if written is not None:
        console.print(f"run file: {written}")
    if html_out is not None:
        console.print(f"report: {write_html(run, html_out)}")
    if interrupted:
        # What was measured is printed and saved; the CLI's handler reports the interruption and exits 130.
        raise KeyboardInterrupt(f"what was measured is saved in {written} (marked interrupted)" if written else "")


def _note_threads_meaning() -> None:
    """``--threads N`` was the number of concurrent streams in bench until this release: say so once where a
    script written for that meaning would now measure something else without a word, that is ``--threads`` above
    1 with the streams left at their default (neither ``--streams`` nor a streams axis of ``--sweep``). ``--threads
    0`` or ``1`` asked for one stream, which bench still runs by default, so they get no note."""
    ctx = click.get_current_context()
    given = click.core.ParameterSource.COMMANDLINE
    streams_given = ctx.get_parameter_source("streams") is given or any(
        axis == "streams" for axis, _ in ctx.params.get("sweep_axes", ()))
    if ctx.get_parameter_source("threads") is given and int(ctx.params["threads"]) > 1 and not streams_given:
        threads = ctx.params["threads"]
        click.echo(f"layerscope: note: bench --threads {threads} sets ONNX Runtime's intra-op threads, as in every "
                   f"command; for {threads} concurrent streams use --streams {threads} (--threads meant streams before "
                   "this release)", err=True)
