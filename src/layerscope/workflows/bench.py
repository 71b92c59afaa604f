"""Bench: the end-to-end latency distribution and throughput of a model on ONNX Runtime or OpenVINO (``layerscope
bench``, ``layerscope.bench``).

In the spirit of ``hrt_model_exec perf`` and ``trtexec``: warm-up, a run count or a duration, concurrent streams;
the run holds latency mean/min/max/P50/P90/P99/P99.9, FPS, CPU utilization and peak RSS, with the runtime,
provider, threads and machine they were measured on. Interrupted (Ctrl-C) during the measured runs, the run holds
what was measured and :attr:`BenchResult.interrupted` is set.

With :attr:`BenchRequest.sweep` (``--sweep streams=1,2,4 --sweep batch=1,4 --sweep threads=2,4``) every point of
the product of the axes is measured on its own (warm-up, then ``runs`` or ``duration`` per point) and the run holds
a ``bench_sweep`` section (:func:`layerscope.measure.bench_sweep.sweep_section`: per-point percentiles and
throughput, the knee, the best point under ``latency_budget_us``); its ``measurement`` and ``latency`` are those of
the best point under the budget, else of the point of highest samples/s. A stream is a Python thread calling
``session.run`` on one shared session (ONNX Runtime), or, on a runtime that compiles its streams in (OpenVINO), one
request of an ``AsyncInferQueue`` compiled with ``NUM_STREAMS`` = streams under the ``THROUGHPUT`` hint. Batch is set
through the model's symbolic batch dim (axis 0 of its inputs); a model whose batch is static sweeps the other axes
and says so (``bench_sweep.batch_note``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from layerscope.measure.bench import DEFAULT_RUNS, DEFAULT_WARMUP_RUNS, BenchConfig, run_from_bench
from layerscope.measure.bench_sweep import SweepPoint, sweep_section
from layerscope.measure.inputs import resolve_inputs
from layerscope.measure.stress import StressSpec, add_stress, paired_rounds
from layerscope.model.types import Graph
from layerscope.runfile.models import RunFile
from layerscope.runtimes.machine import machine_info
from layerscope.workflows.common import (
    QUIET,
    Hooks,
    OptionError,
    PathLike,
    UsageConflict,
    load_graph,
    model_or_sample,
    open_runtime,
    stress_phases,
)

#: Progress labels of the bench's phases.
PHASES = {"warmup": "warm-up", "measure": "measuring"}
#: The axes ``--sweep`` takes, in the order the points are measured (outermost first).
SWEEP_AXES = ("threads", "batch", "streams")
#: Seconds per point when a sweep is given neither ``runs`` nor ``duration``.
DEFAULT_SWEEP_DURATION_S = 2.0


@dataclass(frozen=True)
class Sweep:
    """``bench --sweep`` axes: the values of each (an empty axis is not swept: ``streams`` and ``threads`` then
    take the request's single value, ``batch`` the model as loaded)."""

    streams: tuple[int, ...] = ()
    batch: tuple[int, ...] = ()
    threads: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in SWEEP_AXES:
            values = getattr(self, name)
            if any(v < (0 if name == "threads" else 1) for v in values):
                raise OptionError("--sweep", f"{name}: {list(values)}: expected counts >= "
                                             f"{0 if name == 'threads' else 1}, e.g. {name}=1,2,4")


@dataclass(frozen=True)
class BenchRequest:
    """``layerscope bench``'s options (``model`` ``None``: the bundled sample). ``runs`` ``None``: the default
    count unless ``duration`` (seconds) is given; ``streams``: concurrent inference streams on one session;
    ``threads``: ONNX Runtime's intra-op threads (0: its default); ``device``, ``precision`` and
    ``performance_hint`` are a compiling runtime's (OpenVINO's); ``backend``: a name from
    :func:`layerscope.runtimes.registry.choices`; ``fallback``: OpenVINO runs the layers it cannot convert on ONNX
    Runtime, chained per inference in one stream (announced by a warning), instead of failing."""

    model: PathLike | None = None
    warmup: int = DEFAULT_WARMUP_RUNS
    runs: int | None = None
    duration: float | None = None
    streams: int = 1
    threads: int = 0
    provider: str = "cpu"
    backend: str = "onnxruntime"
    device: str = "CPU"
    precision: str = ""
    performance_hint: str = "LATENCY"
    opt_level: str = "all"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    seed: int = 0
    stress: StressSpec | None = None
    sweep: Sweep | None = None
    latency_budget_us: float | None = None
    fallback: bool = True


@dataclass(frozen=True)
class BenchResult:
    """The run (``measurement``, ``latency``; ``stress`` with paired rounds); ``interrupted``: the measured runs
    or the stress rounds were cut short (the run holds what was measured, marked so)."""

    run: RunFile
    interrupted: bool = False


def bench(request: BenchRequest, hooks: Hooks = QUIET) -> BenchResult:
    """Measure the end-to-end latency of ``request.model``. ``UsageConflict`` for both ``runs`` and ``duration``;
    ``BackendUnavailable`` (exit 3) before any work when the runtime, provider or device is missing. With
    ``request.sweep``: :func:`bench_sweep`."""
    r = request
    if r.runs is not None and r.duration is not None:
        raise UsageConflict("give --runs or --duration, not both")
    if r.sweep is not None:
        return bench_sweep(r, hooks)
    if r.latency_budget_us is not None:
        raise UsageConflict("--latency-budget chooses among the points of a sweep: give --sweep too, "
                            "e.g. --sweep streams=1,2,4")
    config = BenchConfig(warmup_runs=r.warmup, runs=None if r.duration is not None else r.runs or DEFAULT_RUNS,
                         duration_s=r.duration, streams=r.streams)
    backend = open_runtime(r.backend, r.provider, device=r.device, precision=r.precision,
                           performance_hint=r.performance_hint, fallback=r.fallback)  # exit 3 before any work
    hooks.ready()
    session_config = backend.session_config(r.threads, r.opt_level)
    graph = load_graph(model_or_sample(r.model), r.shapes, r.dims, r.inputs, seed=r.seed, hooks=hooks)
    inputs = resolve_inputs(graph, r.inputs, r.seed)
    backend_version = backend.version()
    session = backend.bench_session(graph, session_config, r.streams)
    for line in session.warnings:
        hooks.warning(line)
    units = {"measure": "s" if config.duration_s is not None else "runs"}
    with hooks.phases(PHASES, units) as progress:
        result = session.measure(inputs.arrays, config, progress)
    settings = session.settings  # what a compiling runtime chose (device, precision, hint, streams, threads)
    run = run_from_bench(graph, result, session_config=session_config, provider=session.provider, inputs=inputs,
                         seed=r.seed, machine=machine_info(), backend=backend.spec.name,
                         backend_version=backend_version,
                         settings=settings or None)
    interrupted = result.interrupted
    if r.stress is not None and not interrupted:
        with stress_phases(hooks, PHASES, r.stress.rounds, units) as progress_for:
            experiment = paired_rounds(lambda stressed, i: session.measure_latency(
                inputs.arrays, config, progress_for(stressed, i)), r.stress,
                interrupted=lambda b: b.interrupted)
        run = add_stress(run, experiment, lambda b: b.latency, model_threads=r.threads * r.streams)
        interrupted = experiment.cut_short(r.stress, lambda b: b.interrupted)
    return BenchResult(run, interrupted)


def bench_sweep(request: BenchRequest, hooks: Hooks = QUIET) -> BenchResult:
    """Measure every point of ``request.sweep`` (see the module docstring). ``UsageConflict`` for ``--stress``
    with a sweep; a batch axis on a model without a named batch dim sweeps the other axes, the section saying why.
    Ctrl-C keeps the points measured (``interrupted``); before the first point it propagates."""
    r = request
    sweep = r.sweep if r.sweep is not None else Sweep()
    if r.stress is not None:
        raise UsageConflict("--stress measures one configuration: give --stress or --sweep, not both")
    runs = r.runs
    duration = r.duration if r.duration is not None or r.runs is not None else DEFAULT_SWEEP_DURATION_S
    model = model_or_sample(r.model)
    compiled_streams = "streams" in open_runtime(r.backend, r.provider, device=r.device).spec.options  # exit 3
    hooks.ready()
    batch_dim, batch_note = batch_dimension(model) if sweep.batch else (None, None)
    batches: Sequence[int | None] = sweep.batch if batch_dim is not None else (None,)
    graphs = {b: load_graph(model, r.shapes, {**r.dims, **({batch_dim: b} if batch_dim and b else {})}, r.inputs,
                            seed=r.seed, hooks=hooks) for b in batches}
    measured: dict[tuple[int, int | None, int], tuple[SweepPoint, RunFile]] = {}
    interrupted = False
    configs = list(itertools.product(sweep.threads or (r.threads,), batches, sweep.streams or (r.streams,)))
    for i, (threads, batch, streams) in enumerate(configs):
        hooks.note(f"point {i + 1}/{len(configs)}: streams={streams}{f' batch={batch}' if batch else ''} "
                   f"threads={threads}")
        try:
            point, run = _measure_point(r, graphs[batch], _Key(streams, batch, threads), runs=runs,
                                        duration=duration, compiled_streams=compiled_streams, hooks=hooks)
        except KeyboardInterrupt:
            if not measured:
                raise
            interrupted = True
            break
        measured[(streams, batch, threads)] = (point, run)
        if point.result.interrupted:
            interrupted = True
            break
    concurrency = ("an infer request of an AsyncInferQueue compiled with NUM_STREAMS = streams (THROUGHPUT hint)"
                   if compiled_streams else "a thread calling session.run on one shared session")
    section = sweep_section([p for p, _ in measured.values()],
                            axes={"streams": sweep.streams, "batch": sweep.batch if batch_dim else (),
                                  "threads": sweep.threads},
                            batch_dim=batch_dim, batch_note=batch_note, warmup=r.warmup, runs=runs,
                            duration_s=duration, latency_budget_us=r.latency_budget_us, concurrency=concurrency)
    chosen = section.best if section.best is not None else max(
        range(len(section.points)), key=lambda j: section.points[j].samples_per_s or 0.0)
    best = section.points[chosen]
    _, run = measured[(best.streams, best.batch, best.threads or 0)]
    return BenchResult(run.model_copy(update={"bench_sweep": section}), interrupted)


class _Key(NamedTuple):
    """A sweep point's configuration."""

    streams: int
    batch: int | None
    threads: int


def _measure_point(r: BenchRequest, graph: Graph, key: _Key, *, runs: int | None, duration: float | None,
                   compiled_streams: bool, hooks: Hooks) -> tuple[SweepPoint, RunFile]:
    """One point and its run: a session of ``key.threads`` intra-op threads (compiled with NUM_STREAMS =
    ``key.streams`` under the THROUGHPUT hint where the runtime compiles its streams in), warmed up, measured."""
    hint = "THROUGHPUT" if compiled_streams else r.performance_hint
    backend = open_runtime(r.backend, r.provider, device=r.device, precision=r.precision, performance_hint=hint,
                           streams=key.streams if compiled_streams else 0, fallback=r.fallback)
    config = BenchConfig(warmup_runs=r.warmup, runs=runs, duration_s=duration, streams=key.streams)
    session_config = backend.session_config(key.threads, r.opt_level)
    inputs = resolve_inputs(graph, r.inputs, r.seed)
    session = backend.bench_session(graph, session_config, key.streams)
    units = {"measure": "s" if duration is not None else "runs"}
    with hooks.phases(PHASES, units) as progress:
        result = session.measure(inputs.arrays, config, progress)
    settings = dict(session.settings or {})
    run = run_from_bench(graph, result, session_config=session_config, provider=session.provider, inputs=inputs,
                         seed=r.seed, machine=machine_info(), backend=backend.spec.name,
                         backend_version=backend.version(), settings=settings or None)
    return SweepPoint(key.streams, key.batch, key.threads, result, settings), run


def batch_dimension(model: Path) -> tuple[str | None, str | None]:
    """The model's batch dim: the one symbolic name on axis 0 of its inputs, ``(name, None)``; else ``(None, why
    batch is not swept)`` (a static batch, an unnamed dim, or inputs that disagree)."""
    import onnx

    from layerscope.model.shapes import declared_dims

    proto = onnx.load(str(model), load_external_data=False)
    weights = {t.name for t in proto.graph.initializer}
    firsts = {vi.name: (declared_dims(vi) or [None])[0] for vi in proto.graph.input if vi.name not in weights}
    names = {d for d in firsts.values() if isinstance(d, str)}
    if len(names) == 1 and all(d is not None for d in firsts.values()):
        return names.pop(), None
    shown = ", ".join(f"{name} axis 0 = {d if d is not None else 'unnamed'}" for name, d in firsts.items())
    why = ("the model's batch is static" if not names and all(isinstance(d, int) for d in firsts.values())
           else "the model has no single named batch dim")
    return None, f"batch not swept: {why} ({shown}); streams and threads only"
