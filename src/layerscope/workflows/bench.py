"""Bench: the end-to-end latency distribution and throughput of a model on ONNX Runtime or OpenVINO (``layerscope
bench``, ``layerscope.bench``).

In the spirit of ``hrt_model_exec perf`` and ``trtexec``: warm-up, a run count or a duration, concurrent streams;
the run holds latency mean/min/max/P50/P90/P99/P99.9, FPS, CPU utilization and peak RSS, with the runtime,
provider, threads and machine they were measured on. Interrupted (Ctrl-C) during the measured runs, the run holds
what was measured and :attr:`BenchResult.interrupted` is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from layerscope.measure.bench import DEFAULT_RUNS, DEFAULT_WARMUP_RUNS, BenchConfig, run_from_bench
from layerscope.measure.inputs import resolve_inputs
from layerscope.measure.session import machine_info
from layerscope.measure.stress import StressSpec, add_stress, paired_rounds
from layerscope.runfile.models import RunFile
from layerscope.workflows.common import (
    QUIET,
    Hooks,
    PathLike,
    UsageConflict,
    load_graph,
    model_or_sample,
    open_runtime,
    stress_phases,
)

#: Progress labels of the bench's phases.
PHASES = {"warmup": "warm-up", "measure": "measuring"}


@dataclass(frozen=True)
class BenchRequest:
    """``layerscope bench``'s options (``model`` ``None``: the bundled sample). ``runs`` ``None``: the default
    count unless ``duration`` (seconds) is given; ``streams``: concurrent inference streams on one session;
    ``threads``: ONNX Runtime's intra-op threads (0: its default); ``device``, ``precision`` and
    ``performance_hint`` are a compiling runtime's (OpenVINO's); ``backend``: a name from
    :func:`layerscope.runtimes.registry.choices`."""

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


@dataclass(frozen=True)
class BenchResult:
    """The run (``measurement``, ``latency``; ``stress`` with paired rounds); ``interrupted``: the measured runs
    or the stress rounds were cut short (the run holds what was measured, marked so)."""

    run: RunFile
    interrupted: bool = False


def bench(request: BenchRequest, hooks: Hooks = QUIET) -> BenchResult:
    """Measure the end-to-end latency of ``request.model``. ``UsageConflict`` for both ``runs`` and ``duration``;
    ``BackendUnavailable`` (exit 3) before any work when the runtime, provider or device is missing."""
    r = request
    if r.runs is not None and r.duration is not None:
        raise UsageConflict("give --runs or --duration, not both")
    config = BenchConfig(warmup_runs=r.warmup, runs=None if r.duration is not None else r.runs or DEFAULT_RUNS,
                         duration_s=r.duration, streams=r.streams)
    backend = open_runtime(r.backend, r.provider, device=r.device, precision=r.precision,
                           performance_hint=r.performance_hint)  # exit 3 before any work
    hooks.ready()
    session_config = backend.session_config(r.threads, r.opt_level)
    graph = load_graph(model_or_sample(r.model), r.shapes, r.dims, r.inputs, seed=r.seed, hooks=hooks)
    inputs = resolve_inputs(graph, r.inputs, r.seed)
    backend_version = backend.version()
    session = backend.bench_session(graph, session_config, r.streams)
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
