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
from typing import Any

from layerscope.measure.bench import DEFAULT_RUNS, DEFAULT_WARMUP_RUNS, BenchConfig, run_bench, run_from_bench
from layerscope.measure.inputs import resolve_inputs
from layerscope.measure.session import SessionConfig, machine_info, make_session, ort_provider
from layerscope.measure.stress import StressSpec, add_stress, paired_rounds
from layerscope.runfile.models import RunFile
from layerscope.workflows.common import (
    QUIET,
    Hooks,
    PathLike,
    UsageConflict,
    load_graph,
    model_or_sample,
    open_backend,
    stress_phases,
)

#: Progress labels of the bench's phases.
PHASES = {"warmup": "warm-up", "measure": "measuring"}


@dataclass(frozen=True)
class BenchRequest:
    """``layerscope bench``'s options (``model`` ``None``: the bundled sample). ``runs`` ``None``: the default
    count unless ``duration`` (seconds) is given; ``streams``: concurrent inference streams on one session;
    ``threads``: ONNX Runtime's intra-op threads (0: its default); ``device``, ``precision`` and
    ``performance_hint`` are OpenVINO's (``backend="openvino"``)."""

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
    backend, provider = open_backend(r.backend, r.provider, device=r.device, precision=r.precision,
                                     performance_hint=r.performance_hint)  # exit 3 before any work
    hooks.ready()
    session_config = SessionConfig(provider=provider, threads=r.threads,
                                   opt_level=r.opt_level if r.backend == "onnxruntime" else "compiler")
    model_path = model_or_sample(r.model)
    graph = load_graph(model_path, r.shapes, r.dims, r.inputs, seed=r.seed, hooks=hooks)
    inputs = resolve_inputs(graph, r.inputs, r.seed)
    backend_version = backend.info().version
    settings: dict[str, Any] = {}  # OpenVINO: what its compiler chose (device, precision, hint, streams, threads)
    throughput = False
    if r.backend == "openvino":
        from layerscope.measure.openvino_backend import InferSession, OpenVinoBackend, compile_for, compiled_settings

        assert isinstance(backend, OpenVinoBackend)
        compiled = compile_for(graph, session_config, backend.options, profiling=False)
        session: Any = InferSession(compiled, r.streams)
        settings = {"device": provider, **compiled_settings(compiled)}
        throughput = str(compiled.get_property("PERFORMANCE_HINT")) != "LATENCY"
        full_provider = provider
    else:
        full_provider = ort_provider(provider)
        session = make_session(model_path, session_config)
    units = {"measure": "s" if config.duration_s is not None else "runs"}
    with hooks.phases(PHASES, units) as progress:
        if throughput:  # OpenVINO's throughput mode: an AsyncInferQueue, --streams requests (1: its optimum)
            from layerscope.measure.openvino_backend import async_bench

            jobs = r.streams if r.streams > 1 else int(
                session.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            result = async_bench(session.compiled, inputs.arrays, config, jobs, progress)
            settings.update(mode="throughput: AsyncInferQueue", async_requests=jobs)
        else:
            result = run_bench(session, inputs.arrays, config, progress)
    run = run_from_bench(graph, result, session_config=session_config, provider=full_provider, inputs=inputs,
                         seed=r.seed, machine=machine_info(), backend=r.backend, backend_version=backend_version,
                         settings=settings or None)
    interrupted = result.interrupted
    if r.stress is not None and not interrupted:
        with stress_phases(hooks, PHASES, r.stress.rounds, units) as progress_for:
            experiment = paired_rounds(lambda stressed, i: run_bench(  # (latency mode)
                session, inputs.arrays, config, progress_for(stressed, i)), r.stress,
                interrupted=lambda b: b.interrupted)
        run = add_stress(run, experiment, lambda b: b.latency, model_threads=r.threads * r.streams)
        interrupted = experiment.cut_short(r.stress, lambda b: b.interrupted)
    return BenchResult(run, interrupted)
