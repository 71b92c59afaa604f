"""End-to-end latency of a model: warm-up, then timed ``session.run`` calls on one or more concurrent streams.

Contract of :func:`run_bench`:

- ``config.streams`` Python threads call ``session.run(None, feeds)`` on the one shared session (ONNX
  Runtime releases the GIL while it runs, so the streams really overlap). Each stream first runs
  ``config.warmup_runs`` untimed runs; then all streams start the measured phase together;
- measured phase: ``config.runs`` runs in total, handed out to whichever stream is free next (so no
  stream idles while another has work left), or, with ``config.duration_s``, every stream runs until that
  many seconds have passed since the phase began (each stream makes at least one run, however late it starts);
- one sample per run: ``time.perf_counter_ns`` immediately before and after ``session.run`` — nothing else
  is inside the timed interval, so the samples are comparable with a plain ``session.run`` loop
  (``benchmarks/bench_overhead.py`` checks that);
- aggregate throughput = measured runs / wall time from the first stream's first run to the last
  stream's last run; per stream likewise over its own runs;
- CPU use and peak RSS are the process's (every thread, ONNX Runtime's pools included): CPU time
  (``time.process_time``, see :mod:`layerscope.measure.cputime`) over the measured phase / its wall time /
  the cores this process may use; peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss``, the
  high-water mark since the process started (model loading included), ``None`` where ``resource`` is missing;
- Ctrl-C (``KeyboardInterrupt``) during the measured phase stops every stream after its current run and
  returns what was measured with ``interrupted=True``; before the first measured run it propagates;
- an error inside ``session.run`` stops every stream and is raised as ``failure`` (the runtime's translator)
  makes it, as it came when ``failure`` is ``None`` or returns ``None``: ONNX Runtime's own failures (e.g. an
  index out of range in the inputs) become :class:`~layerscope.errors.RuntimeFailure` (an ``InputError``, exit 2)
  naming the seeded inputs and how to give real ones (:func:`layerscope.runtimes.onnxruntime.session.failure_of`;
  an OpenVINO :class:`~layerscope.runtimes.openvino.compile.InferSession` raises its own).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np

from layerscope.costs import cost_graph
from layerscope.measure.cputime import CpuClock
from layerscope.measure.inputs import ModelInputs
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.run import SCHEMA_VERSION, model_section
from layerscope.runfile.commands import written_by
from layerscope.runfile.models import BenchMeasurement, Latency, RunFile, Summary, latency_samples
from layerscope.stats import LatencyStats, drift, summarize

__all__ = ["DEFAULT_RUNS", "DEFAULT_WARMUP_RUNS", "BenchConfig", "BenchResult", "FailureFn", "Phase",
           "ProcessUsage", "ProgressFn", "StreamResult", "available_cores", "peak_rss_bytes", "run_bench",
           "run_from_bench"]

DEFAULT_WARMUP_RUNS = 10
DEFAULT_RUNS = 100
#: How often the main thread wakes to report progress while the streams run.
POLL_S = 0.1

Phase = Literal["warmup", "measure"]
#: ``progress(phase, done, total)``: runs done of ``total`` runs, or seconds elapsed of ``total`` seconds
#: when the measured phase is timed by duration. Called from the main thread only.
ProgressFn = Callable[[Phase, float, float], None]
#: ``failure(error, feeds)``: the exception to raise in place of ``error``, which a stream's ``session.run`` raised
#: on ``feeds``; ``None`` to raise ``error`` itself (a runtime's translator of its own errors).
FailureFn = Callable[[BaseException, Mapping[str, np.ndarray]], BaseException | None]


@dataclass(frozen=True)
class BenchConfig:
    """How to benchmark: ``warmup_runs`` per stream, then ``runs`` in total or ``duration_s`` seconds."""

    warmup_runs: int = DEFAULT_WARMUP_RUNS
    runs: int | None = DEFAULT_RUNS
    duration_s: float | None = None
    streams: int = 1

    def __post_init__(self) -> None:
        if (self.runs is None) == (self.duration_s is None):
            raise ValueError("BenchConfig: give exactly one of runs and duration_s")
        if self.runs is not None and self.runs < 1:
            raise ValueError(f"BenchConfig: runs must be >= 1, got {self.runs}")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError(f"BenchConfig: duration_s must be > 0, got {self.duration_s}")
        if self.streams < 1 or self.warmup_runs < 0:
            raise ValueError("BenchConfig: streams must be >= 1 and warmup_runs >= 0")


@dataclass(frozen=True)
class StreamResult:
    """One stream's measured runs: ``latency`` is ``None`` when it completed none (interrupted early)."""

    stream: int
    runs: int
    wall_s: float
    latency: LatencyStats | None

    @property
    def fps(self) -> float:
        """Runs per second of this stream over its own wall time."""
        return self.runs / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class ProcessUsage:
    """CPU and memory of the whole process over the measured phase."""

    cpu_time_s: float
    wall_s: float
    cores: int
    peak_rss_bytes: int | None

    @property
    def cpu_util(self) -> float:
        """CPU time / wall time / cores: 1.0 means every core this process may use was busy throughout."""
        return self.cpu_time_s / self.wall_s / self.cores if self.wall_s > 0 and self.cores else 0.0

    @property
    def cores_busy(self) -> float:
        """CPU time / wall time: how many cores were busy on average (``top``'s 100% = 1.0)."""
        return self.cpu_time_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class BenchResult:
    """The measured phase: latency over every run of every stream, per stream, throughput, CPU and memory."""

    config: BenchConfig
    latency: LatencyStats
    streams: tuple[StreamResult, ...]
    wall_s: float
    usage: ProcessUsage
    interrupted: bool = False
    #: How far the machine moved during the measured phase: the median over the streams of each stream's
    #: :func:`~layerscope.stats.drift` (its runs in the order they were timed); ``None`` when unknown.
    drift: float | None = None
    #: The measured runs' latencies (µs), every stream's; what ``compare`` bootstraps its intervals from.
    samples_us: tuple[float, ...] = ()

    @property
    def runs(self) -> int:
        """Measured runs, all streams together."""
        return self.latency.samples

    @property
    def fps(self) -> float:
        """Aggregate throughput: measured runs / wall time of the measured phase."""
        return self.runs / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class _Budget:
    """Hands out runs: a count shared by the streams it is given to, or a deadline; ``stop`` ends both."""

    stop: threading.Event
    runs: int | None = None
    deadline_s: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, first: bool = False) -> bool:
        """Whether a stream may start one more run; ``first``: the stream has not run yet (with a deadline, a
        stream always makes its first run, however late its thread started on a busy machine)."""
        if self.stop.is_set():
            return False
        if self.deadline_s is not None:
            return first or time.perf_counter() < self.deadline_s
        with self._lock:
            if self.runs is None or self.runs <= 0:
                return False
            self.runs -= 1
            return True


@dataclass
class _Stream:
    """What one stream's thread records: run durations in ns, first start and last end (perf_counter_ns)."""

    samples_ns: list[int] = field(default_factory=list)
    first_ns: int = 0
    last_ns: int = 0
    error: BaseException | None = None


def run_bench(session: Any, feeds: Mapping[str, np.ndarray], config: BenchConfig,
              progress: ProgressFn | None = None, *, failure: FailureFn | None = None) -> BenchResult:
    """Warm up, then measure ``session.run(None, feeds)``. See the module docstring for the contract."""
    stop = threading.Event()
    feeds = dict(feeds)
    if config.warmup_runs:
        budgets = [_Budget(stop, runs=config.warmup_runs) for _ in range(config.streams)]
        total = float(config.warmup_runs * config.streams)
        warm, _ = _run_phase(session, feeds, budgets, stop, _runs_progress("warmup", total, progress))
        _raise_errors(warm, feeds, failure)
    if config.duration_s is not None:
        start_s = time.perf_counter()
        shared = _Budget(stop, deadline_s=start_s + config.duration_s)
        report = _duration_progress(start_s, config.duration_s, progress)
    else:
        shared = _Budget(stop, runs=config.runs)
        report = _runs_progress("measure", float(config.runs or 0), progress)
    clock = CpuClock()
    streams, interrupted = _run_phase(session, feeds, [shared] * config.streams, stop, report,
                                      keep_on_interrupt=True)
    span = clock.stop()
    usage = ProcessUsage(cpu_time_s=span.cpu_s, wall_s=span.wall_s, cores=available_cores(),
                         peak_rss_bytes=peak_rss_bytes())
    _raise_errors(streams, feeds, failure)
    return _result(config, streams, usage, interrupted)


def _run_phase(session: Any, feeds: dict[str, np.ndarray], budgets: list[_Budget], stop: threading.Event,
               report: Callable[[list[_Stream]], None], *,
               keep_on_interrupt: bool = False) -> tuple[list[_Stream], bool]:
    """Run one stream per budget in its own thread until all are done; (streams, interrupted)."""
    streams = [_Stream() for _ in budgets]
    done = threading.Event()
    remaining = [len(budgets)]
    lock = threading.Lock()

    def finished() -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

    threads = [threading.Thread(target=_stream_loop, args=(session, feeds, budget, stream, finished),
                                name=f"layerscope-stream-{i}", daemon=True)
               for i, (budget, stream) in enumerate(zip(budgets, streams, strict=True))]
    interrupted = False
    try:
        # inside the try: a stream may be interrupted (Ctrl-C, a signal) while the main thread still waits in
        # start() for the next thread to begin, on a busy machine
        for thread in threads:
            thread.start()
        while not done.wait(POLL_S):
            report(streams)
    except KeyboardInterrupt:
        stop.set()
        _join_started(threads)
        if not keep_on_interrupt or not any(s.samples_ns for s in streams):
            raise
        interrupted = True
    _join_started(threads)
    report(streams)
    return streams, interrupted


def _join_started(threads: list[threading.Thread]) -> None:
    """Wait for every thread of ``threads`` that was started (an interrupt may come before the last start)."""
    for thread in threads:
        if thread.ident is not None:
            thread.join()


def _stream_loop(session: Any, feeds: dict[str, np.ndarray], budget: _Budget, stream: _Stream,
                 finished: Callable[[], None]) -> None:
    """One stream: timed ``session.run`` calls while the budget lasts. Nothing else is inside the interval."""
    samples = stream.samples_ns
    clock = time.perf_counter_ns
    run = session.run
    try:
        while budget.take(first=not samples):
            start = clock()
            run(None, feeds)
            end = clock()
            samples.append(end - start)
            if not stream.first_ns:
                stream.first_ns = start
            stream.last_ns = end
    except BaseException as exc:  # handed to the main thread, which raises it
        stream.error = exc
        budget.stop.set()
    finally:
        finished()


def _runs_progress(phase: Phase, total: float, progress: ProgressFn | None) -> Callable[[list[_Stream]], None]:
    def report(streams: list[_Stream]) -> None:
        if progress is not None:
            progress(phase, float(sum(len(s.samples_ns) for s in streams)), total)
    return report


def _duration_progress(start_s: float, duration_s: float,
                       progress: ProgressFn | None) -> Callable[[list[_Stream]], None]:
    def report(streams: list[_Stream]) -> None:
        if progress is not None:
            progress("measure", min(time.perf_counter() - start_s, duration_s), duration_s)
    return report


def _raise_errors(streams: list[_Stream], feeds: Mapping[str, np.ndarray], failure: FailureFn | None) -> None:
    """The first error of any stream, as ``failure`` translates it (itself when it does not)."""
    for stream in streams:
        exc = stream.error
        if exc is None:
            continue
        translated = failure(exc, feeds) if failure is not None else None
        if translated is not None:
            raise translated from exc
        raise exc


def _result(config: BenchConfig, streams: list[_Stream], usage: ProcessUsage, interrupted: bool) -> BenchResult:
    everything = np.concatenate([np.asarray(s.samples_ns, dtype=np.float64) for s in streams]) / 1e3
    ran = [s for s in streams if s.samples_ns]
    wall_s = (max(s.last_ns for s in ran) - min(s.first_ns for s in ran)) / 1e9
    per_stream = tuple(
        StreamResult(stream=i, runs=len(s.samples_ns), wall_s=(s.last_ns - s.first_ns) / 1e9,
                     latency=summarize(np.asarray(s.samples_ns, dtype=np.float64) / 1e3) if s.samples_ns else None)
        for i, s in enumerate(streams))
    drifts = [drift(np.asarray(s.samples_ns, dtype=np.float64)) for s in streams if len(s.samples_ns) >= 4]
    return BenchResult(config=config, latency=summarize(everything), streams=per_stream, wall_s=wall_s,
                       usage=usage, interrupted=interrupted, drift=float(np.median(drifts)) if drifts else None,
                       samples_us=tuple(everything.tolist()))


def available_cores() -> int:
    """Cores this process's threads may run on: the union of every thread's CPU affinity where the OS tells
    (a runtime may pin its own threads outside the affinity the process started with: under ``taskset -c 0``
    ONNX Runtime's pool thread runs on core 1), else ``os.cpu_count()``."""
    if not hasattr(os, "sched_getaffinity"):
        return os.cpu_count() or 1
    cores = set(os.sched_getaffinity(0))
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no procfs: the calling thread's affinity
        threads = []
    for tid in threads:
        try:
            cores |= os.sched_getaffinity(tid)
        except OSError:  # the thread ended
            continue
    return len(cores)


def peak_rss_bytes() -> int | None:
    """The process's peak resident set size in bytes since it started, or ``None`` without ``resource``."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # macOS: bytes; Linux/BSD: KiB


def run_from_bench(graph: Graph, result: BenchResult, *, session_config: SessionConfig, provider: str,
                   inputs: ModelInputs, seed: int, machine: Mapping[str, Any], backend: str = "onnxruntime",
                   backend_version: str, settings: Mapping[str, Any] | None = None) -> RunFile:
    """The typed run holding ``result``: ``model``, ``measurement``, ``latency``, empty ``layers``, short ``summary``.
    ``backend``/``backend_version`` name the runtime (default ONNX Runtime) and its version;
    ``settings`` (OpenVINO: device, precision, performance hint, NUM_STREAMS) are added to ``measurement``.

    ``measurement.threads`` is the session's intra-op thread setting (0: onnxruntime's default, one per
    physical core), as in ``layerscope profile``; the concurrent streams are ``measurement.streams``.
    """
    latency = result.latency
    return RunFile(
        schema_version=SCHEMA_VERSION,
        tool=written_by("bench"),
        model=model_section(graph),
        layers=[],
        summary=Summary(layer_count=len(graph.layers), macs=sum(c.macs for c in cost_graph(graph)),
                        est_latency_us=None, latency_p50_us=round(latency.median_us, 3), fps=round(result.fps, 3)),
        measurement=BenchMeasurement.model_validate({
            **(settings or {}),
            "backend": backend,
            "backend_version": backend_version,
            "provider": provider,
            "threads": session_config.threads,
            "inter_op_threads": session_config.inter_op_threads,
            "opt_level": session_config.opt_level,
            "streams": result.config.streams,
            "runs": result.runs,
            "planned_runs": result.config.runs,
            "duration_s": result.config.duration_s,
            "warmup": result.config.warmup_runs,
            "interrupted": result.interrupted,
            "wall_s": round(result.wall_s, 6),
            "cpu_time_s": round(result.usage.cpu_time_s, 6),
            "cpu_util": round(result.usage.cpu_util, 4),
            "cores": result.usage.cores,
            "peak_rss_bytes": result.usage.peak_rss_bytes,
            "inputs": [{"name": name, "source": source, "seed": seed if source.startswith("random") else None}
                       for name, source in inputs.sources.items()],
            "stream_results": [
                {"stream": s.stream, "runs": s.runs, "wall_s": round(s.wall_s, 6), "fps": round(s.fps, 3),
                 "latency": s.latency.to_dict() if s.latency is not None else None}
                for s in result.streams],
            "machine": dict(machine),
            "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": "bench",
            "kind": "bench",
        }),
        latency=Latency(
            mean_us=round(latency.mean_us, 3),
            min_us=round(latency.min_us, 3),
            max_us=round(latency.max_us, 3),
            p50_us=round(latency.median_us, 3),
            p90_us=round(latency.p90_us, 3),
            p99_us=round(latency.p99_us, 3),
            p999_us=round(latency.p999_us, 3),
            std_us=round(latency.std_us, 3),
            cv=round(latency.cv, 6),
            fps=round(result.fps, 3),
            samples=latency.samples,
            source="bench",
            samples_us=latency_samples(result.samples_us),
        ),
    )
