"""Terminal report of ``layerscope bench``: the latency table and the context lines (pure functions of the saved
run; ``bench`` and ``report --format terminal`` print the same). A figure the run does not hold reads ``-``."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import bytes_text, duration_text, key_value_grid, machine_text, shape_dtype_text
from layerscope.report.views.common import Run
from layerscope.runfile.models import BenchMeasurement, Latency
from layerscope.runtimes import registry


def bench_report(run: Run) -> RenderableType:
    """The latency table and the context lines of a bench run file (a pure function of the saved run)."""
    return Group(latency_table(run), Text(""), bench_context(run))


def _bench(run: Run) -> BenchMeasurement:
    """The run's ``bench`` measurement; an empty one (every figure unknown) when it holds another kind."""
    m = run.measurement
    return m if isinstance(m, BenchMeasurement) else BenchMeasurement(kind="bench")


def latency_table(run: Run) -> Table:
    """One row per stream (when several) and one for all runs: runs, mean, min, max, percentiles, FPS."""
    m, lat = _bench(run), run.latency or Latency()
    table = Table(title=f"End-to-end latency, {lat.samples} measured runs"
                        f"{' (INTERRUPTED)' if m.interrupted else ''}",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                  pad_edge=False, caption=_p999_caption(lat.samples), caption_justify="left")
    table.add_column("stream", no_wrap=True)
    for header in ("runs", "mean", "min", "max", "P50", "P90", "P99", "P99.9", "FPS"):
        table.add_column(header, justify="right", no_wrap=True)
    streams = m.stream_results
    if len(streams) > 1:
        for s in streams:
            if s.latency is not None:
                table.add_row(str(s.stream), *_latency_cells(s.latency, s.runs, s.fps))
    table.add_row("all", *_latency_cells(lat, lat.samples, lat.fps))
    return table


def _latency_cells(lat: Latency, runs: int | None, fps: float | None) -> list[str]:
    p50 = lat.p50_us if lat.p50_us is not None else lat.median_us
    return [str(runs), *(duration_text(v) for v in (lat.mean_us, lat.min_us, lat.max_us, p50,
                                                    lat.p90_us, lat.p99_us, lat.p999_us)), _fps(fps)]


def _fps(fps: float | None) -> str:
    if fps is None:
        return "-"
    return f"{fps:.1f}" if fps >= 10 else f"{fps:.2f}"


def _p999_caption(samples: int | None) -> str | None:
    if samples is None or samples >= 1000:
        return None
    return f"P99.9 of {samples} runs is interpolated between the largest samples (numpy 'linear')"


def bench_context(run: Run) -> Table:
    """Throughput, CPU, memory, inputs, and what it was measured on: runtime, provider, threads, machine."""
    m, lat = _bench(run), run.latency or Latency()
    grid = key_value_grid()
    model = run.model
    grid.add_row("model", Text(f"{model.name}  ({model.path})"))
    for item in m.inputs:
        tensor = next((t for t in model.inputs if t.name == item.name), None)
        described = f"{shape_dtype_text(tensor)}  " if tensor else ""
        grid.add_row("input", Text(f"{item.name} {described}{item.source}"))
    streams = m.streams or 1
    per_stream = f"; {_fps(lat.fps / streams)} per stream" if streams > 1 and lat.fps is not None else ""
    grid.add_row("throughput", f"{_fps(lat.fps)} FPS ({streams} stream{'s' if streams > 1 else ''}{per_stream})")
    busy = "-" if m.cpu_time_s is None else f"{m.cpu_time_s / m.wall_s if m.wall_s else 0:.2f}"
    grid.add_row("CPU", f"{'-' if m.cpu_util is None else f'{100 * m.cpu_util:.1f}%'} of {m.cores} cores "
                        f"({busy} cores busy, whole process)")
    rss = m.peak_rss_bytes
    grid.add_row("peak RSS", f"{bytes_text(rss)} (whole process, since start)" if rss is not None else "n/a")
    runtime = registry.spec(m.backend)
    compiled = m.performance_hint is not None  # a compiling runtime records what its compiler chose
    title = runtime.title if runtime is not None else str(m.backend)
    grid.add_row("runtime", f"{m.backend} {m.backend_version}, {m.provider}, " + (
        f"precision {m.precision}, {m.performance_hint} hint, {m.num_streams} {title} "
        "stream(s)" if compiled else f"opt level {m.opt_level}"))
    intra = m.threads or (runtime.default_threads if runtime is not None else "default")
    grid.add_row("threads", f"{streams} stream{'s' if streams > 1 else ''} x intra-op threads: {intra}")
    grid.add_row("machine", Text(machine_text(m.machine, python=True)))
    if m.async_requests:
        grid.add_row("MEASURED", f"{lat.samples} runs after {m.warmup} warm-up run(s) per request; "
                                 f"latency = start_async to completion on an AsyncInferQueue of "
                                 f"{m.async_requests} requests, inputs already in memory")
    else:
        grid.add_row("MEASURED", f"{lat.samples} runs after {m.warmup} warm-up run(s) per stream; "
                                 f"latency = one {'InferRequest.infer' if compiled else 'session.run'} call, "
                                 "inputs already in memory")
    if m.interrupted:
        planned = (f"{m.planned_runs} planned" if m.planned_runs
                   else f"{m.duration_s:g} s planned" if m.duration_s is not None else "plan unknown")
        grid.add_row("INTERRUPTED", f"after {lat.samples} runs ({planned}): the figures cover "
                                    "the runs measured")
    return grid
