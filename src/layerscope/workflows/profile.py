"""Profile: every layer measured on ONNX Runtime or OpenVINO beside its estimate, in one run (``layerscope
profile``, ``layerscope.profile``).

Each runtime kernel is mapped back to the source layers it covers (:mod:`layerscope.measure.fusion`); a fused
kernel's time is split over its layers in proportion to their estimated cost and flagged as split. Interrupted
before the profiled runs, the end-to-end runs are kept in a run marked partial (:class:`PartialProfileRun`);
interrupted during stress rounds, the run holds the rounds done and :attr:`ProfileResult.interrupted` is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from layerscope.estimator import estimate_graph, simulate_timeline
from layerscope.measure.inputs import make_inputs
from layerscope.measure.profile import PartialProfile
from layerscope.measure.stress import StressSpec, add_stress, layer_medians, paired_rounds
from layerscope.run import add_measurement, add_partial_latency, add_timeline, estimate_run
from layerscope.runfile.models import RunFile
from layerscope.runtimes.machine import machine_info
from layerscope.targets import load_profile
from layerscope.workflows.common import (
    QUIET,
    Hooks,
    Interrupted,
    PathLike,
    load_graph,
    model_or_sample,
    open_runtime,
    stress_phases,
)

#: Progress labels of the profile's phases.
PHASES = {"warmup": "warm-up", "latency": "end-to-end runs", "warmup-profiled": "warm-up (profiler on)",
          "profiled": "profiled runs"}


@dataclass(frozen=True)
class ProfileRequest:
    """``layerscope profile``'s options (``model`` ``None``: the bundled sample). ``threads`` 0 is the runtime's
    default; ``provider`` is ONNX Runtime's (``cpu``, ``cuda``, ... or a full name); ``device``, ``precision``,
    ``performance_hint`` and ``streams`` are a compiling runtime's (OpenVINO's); ``backend``: a name from
    :func:`layerscope.runtimes.registry.choices`; ``stress``: then paired rounds
    without and with memory streamers; ``fallback``: OpenVINO runs the layers it cannot convert on ONNX Runtime
    (announced by a warning; the run's layers say which runtime ran each) instead of failing."""

    model: PathLike | None = None
    target: str = "host"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    runs: int = 50
    warmup: int = 10
    seed: int = 0
    threads: int = 0
    opt_level: str = "all"
    provider: str = "cpu"
    backend: str = "onnxruntime"
    device: str = "CPU"
    precision: str = ""
    performance_hint: str = "LATENCY"
    streams: int = 0
    timeline: bool = False
    stress: StressSpec | None = None
    fallback: bool = True


@dataclass(frozen=True)
class ProfileResult:
    """The measured run; ``interrupted``: stress rounds were cut short (the run holds those done, marked so)."""

    run: RunFile
    interrupted: bool = False


class PartialProfileRun(Interrupted):
    """Interrupted before the profiled runs: ``run`` holds the estimate and the ``latency`` of the end-to-end runs
    done (no per-layer times), ``planned_runs`` how many were planned."""

    def __init__(self, run: RunFile, planned_runs: int) -> None:
        super().__init__(run, "partial")
        self.planned_runs = planned_runs


def profile(request: ProfileRequest, hooks: Hooks = QUIET) -> ProfileResult:
    """Measure every layer of ``request.model`` beside its estimate on ``request.target``: ``runs``
    uninstrumented runs for the latency, then as many profiled runs for the layers. ``BackendUnavailable`` (exit
    3) before any work when the runtime, provider or device is missing; :class:`PartialProfileRun` when
    interrupted before the profiled runs."""
    backend = open_runtime(request.backend, request.provider, device=request.device, precision=request.precision,
                           performance_hint=request.performance_hint, streams=request.streams,
                           fallback=request.fallback)
    graph = load_graph(model_or_sample(request.model), request.shapes, request.dims, request.inputs,
                       seed=request.seed, hooks=hooks)
    feeds = make_inputs(graph, request.inputs, request.seed)
    hardware = load_profile(request.target)
    estimate = estimate_graph(graph, hardware)
    weights = {e.layer_id: e.latency_us for e in estimate.layers}
    config = backend.session_config(request.threads, request.opt_level)
    try:
        with hooks.phases(PHASES, None) as progress:
            measurement = backend.profile(graph, feeds, config, runs=request.runs, warmup=request.warmup,
                                          weights=weights, progress=progress)
    except PartialProfile as partial:
        kept = add_partial_latency(estimate_run(graph, estimate, hardware, "profile"), partial,
                                   backend_version=backend.version(), machine=machine_info(), backend=backend.spec.name)
        raise PartialProfileRun(kept, partial.planned_runs) from None
    for line in measurement.warnings:
        hooks.warning(line)
    run = add_measurement(estimate_run(graph, estimate, hardware, "profile"), measurement)
    if request.timeline:
        run = add_timeline(run, simulate_timeline(graph, hardware, None, costs=estimate.costs),
                           hardware.ddr_nominal_bytes_per_s)
    interrupted = measurement.interrupted
    stress = request.stress
    if stress is not None and not interrupted:
        with stress_phases(hooks, PHASES, stress.rounds) as progress_for:
            experiment = paired_rounds(lambda stressed, i: backend.profile(
                graph, feeds, config, runs=request.runs, warmup=request.warmup, weights=weights,
                progress=progress_for(stressed, i)), stress, interrupted=lambda m: m.interrupted)
        run = add_stress(run, experiment, lambda m: m.latency, model_threads=request.threads,
                         layer_times=layer_medians)
        interrupted = experiment.cut_short(stress, lambda m: m.interrupted)
    return ProfileResult(run, interrupted)
