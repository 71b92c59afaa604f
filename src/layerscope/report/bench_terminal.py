"""Terminal report of ``layerscope bench``: the latency table and the context lines, and a sweep's table of points
with its knee and best point (pure functions of the saved run; ``bench`` and ``report --format terminal`` print the
same). A figure the run does not hold reads ``-``."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import bytes_text, duration_text, key_value_grid, machine_text, shape_dtype_text
from layerscope.report.views.common import Run
from layerscope.runfile.models import BenchMeasurement, BenchSweep, BenchSweepPoint, Latency
from layerscope.runtimes import registry
from layerscope.stats import DRIFT_WARNING


def bench_report(run: Run, top: int | None = None) -> RenderableType:
    """The latency table and the context lines of a bench run file (a pure function of the saved run); a sweep's
    table (``top`` rows, ``None``: all, 0: no table) and its choices first when the run holds one."""
    parts: list[RenderableType] = []
    if run.bench_sweep is not None and run.bench_sweep.points:
        table = [sweep_table(run.bench_sweep, top)] if top != 0 else []
        parts += [*table, sweep_notes(run.bench_sweep), Text("")]
    return Group(*parts, latency_table(run), Text(""), bench_context(run))


def sweep_rows(sweep: BenchSweep, top: int | None) -> list[int]:
    """The points the sweep table shows, in load order: all (``top`` ``None`` or at least the points), else the
    ``top`` of highest samples/s with the knees and the best point always among them."""
    count = len(sweep.points)
    if top is None or top >= count:
        return list(range(count))
    by_throughput = sorted(range(count), key=lambda i: -(sweep.points[i].samples_per_s or 0.0))[:top]
    return sorted({*by_throughput, *sweep.knees, *([sweep.best] if sweep.best is not None else [])})


def sweep_table(sweep: BenchSweep, top: int | None = None) -> Table:
    """One row per point in order of growing load: streams, batch, threads, latency per request and per sample,
    inferences/s and samples/s, steadiness, and a mark on the knee and the best point under the budget."""
    shown = sweep_rows(sweep, top)
    caption = f"{len(shown)} of {len(sweep.points)} points shown (--top)" if len(shown) < len(sweep.points) else None
    table = Table(title=f"Latency vs throughput, {len(sweep.points)} points", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False,
                  caption=caption, caption_justify="left")
    for header in ("#", "streams", "batch", "threads"):
        table.add_column(header, justify="right", no_wrap=True)
    for header in ("P50", "P90", "P99", "P50/sample", "P99/sample", "infer/s", "samples/s", "CV", "drift"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for i in shown:
        p = sweep.points[i]
        marks = [m for m, on in (("KNEE", i in sweep.knees), ("BEST", i == sweep.best),
                                 ("UNSTEADY", p.steady is False)) if on]
        table.add_row(str(i), str(p.streams), "-" if p.batch is None else str(p.batch),
                      "default" if not p.threads else str(p.threads),
                      *(duration_text(v) for v in (p.p50_us, p.p90_us, p.p99_us, p.sample_p50_us, p.sample_p99_us)),
                      _fps(p.requests_per_s), _fps(p.samples_per_s),
                      "-" if p.cv is None else f"{100 * p.cv:.1f}%",
                      "-" if p.drift is None else f"{100 * p.drift:+.1f}%", " ".join(marks))
    return table


def sweep_notes(sweep: BenchSweep) -> Table:
    """The knee and the best point under the budget, each with its rule; what a stream is; the batch note."""
    grid = key_value_grid()
    points = sweep.points
    knees = ", ".join(f"#{i} ({_point_text(points[i])})" for i in sweep.knees)
    grid.add_row("knee", f"{knees or 'none within the points measured'}; {sweep.knee_rule or ''}")
    if sweep.latency_budget_us is not None:
        budget = duration_text(sweep.latency_budget_us)
        if sweep.best is not None:
            best = points[sweep.best]
            grid.add_row("best", f"#{sweep.best} ({_point_text(best)}): {_fps(best.samples_per_s)} samples/s at "
                                 f"P99 {duration_text(best.p99_us)} <= {budget} budget")
        else:
            lowest = min(range(len(points)), key=lambda i: points[i].p99_us or 0.0)
            grid.add_row("best", f"no point meets the {budget} P99 budget; the lowest P99 is "
                                 f"#{lowest} ({_point_text(points[lowest])}) at {duration_text(points[lowest].p99_us)}")
    per_point = (f"{sweep.runs_per_point} runs" if sweep.runs_per_point
                 else f"{sweep.duration_s_per_point:g} s" if sweep.duration_s_per_point is not None else "?")
    grid.add_row("each point", f"{sweep.warmup} warm-up run(s) per stream, then {per_point}; a stream is "
                               f"{sweep.concurrency}; per sample = per request / batch")
    if sweep.batch_note:
        grid.add_row("batch", sweep.batch_note)
    unsteady = sum(1 for p in points if p.steady is False)
    if unsteady:
        grid.add_row("UNSTEADY", f"{unsteady} of {len(points)} points had a run-to-run CV or drift above "
                                 f"{100 * DRIFT_WARNING:.0f}%: compare their figures with care")
    grid.add_row("below", "the latency table and context are the best point's, else the highest samples/s")
    return grid


def _point_text(point: BenchSweepPoint) -> str:
    batch = f" batch={point.batch}" if point.batch is not None else ""
    return f"streams={point.streams}{batch} threads={point.threads or 'default'}"


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
