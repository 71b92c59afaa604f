"""Bisect: per-segment times on a device that only times whole models (``layerscope bisect``,
``layerscope.bisect``).

The model is cut after layer k for a set of k, each prefix (past the middle, each suffix: the layers after the
cut) is timed (ONNX Runtime or OpenVINO here, or any device through ``run_cmd``), and each segment's time is the
difference of the models around it, with a bootstrap confidence interval (:mod:`layerscope.measure.differential`).
Measurements are cached by model and runner, so an interrupted bisect resumes when the same request is made
again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layerscope.estimator import estimate_graph
from layerscope.measure.cuts import BOUNDARY_SHARE, CutPlanner
from layerscope.measure.differential import (
    BisectConfig,
    BisectResult,
    DevicePool,
    SampleStore,
    SegmentCheck,
    Statistic,
    add_bisect,
    compare_with_profile,
    default_cache_dir,
    kernel_gaps,
    run_bisect,
    with_systematic,
)
from layerscope.measure.groups import group_cuts
from layerscope.measure.inputs import make_inputs
from layerscope.measure.profile import Measurement
from layerscope.measure.runners import CommandRunner, Runner, WarmWith
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.run import estimate_run
from layerscope.runfile.models import RunFile
from layerscope.runtimes import registry
from layerscope.runtimes.base import BisectTiming, OpenRuntime
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime import SPEC as onnxruntime_spec
from layerscope.runtimes.openvino import SPEC as openvino_spec
from layerscope.runtimes.spec import RuntimeSpec
from layerscope.sweep.devices import RayDevicePool, parse_devices
from layerscope.targets import load_profile
from layerscope.tempdirs import scratch
from layerscope.workflows.common import (
    QUIET,
    Hooks,
    PathLike,
    UsageConflict,
    command_runner,
    load_graph,
    model_or_sample,
    open_runtime,
)

#: The validation's profile is taken in this many parts between the bisect's rounds.
VALIDATION_PROFILES = 5
#: Profiled runs per prefix that time its cut's own cost on ONNX Runtime, unless ``boundary_runs`` says.
BOUNDARY_RUNS = 10
#: On OpenVINO without ``recompile_every``: each timed model compiled afresh every this many visits.
OPENVINO_RECOMPILE_EVERY = openvino_spec.recompile_every
#: On ONNX Runtime without ``repeats``: more than 60 rounds while their timed runs fit in this many seconds.
AUTO_ROUNDS_S = 15.0


@dataclass(frozen=True)
class BisectRequest:
    """``layerscope bisect``'s options (``model`` ``None``: the bundled sample; ``None`` elsewhere: the default the
    command's help states, which depends on the runtime). ``run_cmd`` ... ``timeout_s`` time each prefix with a
    device command (:func:`layerscope.workflows.common.command_runner`); ``backend``, ``provider``, ``threads``,
    ``opt_level`` and OpenVINO's ``device``, ``precision``, ``performance_hint`` time it in this process."""

    model: PathLike | None = None
    target: str = "host"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    seed: int = 0
    run_cmd: str | None = None
    compile_cmd: str | None = None
    latency_regex: str | None = None
    latency_json: str | None = None
    latency_unit: str = "ms"
    timeout_s: float | None = None
    granularity: str = "segment"
    segments: int = 12
    repeats: int | None = None
    max_ci: float | None = None
    pilot: int = 3
    budget_runs: int | None = None
    suffixes: bool | None = None
    baseline: bool = True
    statistic: str = "auto"
    confidence: float = 0.95
    resamples: int = 2000
    backend: str = "onnxruntime"
    device: str = "CPU"
    precision: str = ""
    performance_hint: str = "LATENCY"
    cut_rule: str = "auto"
    provider: str = "cpu"
    threads: int = 0
    opt_level: str = "all"
    clock: str = "wall"
    visit_warmup: int | None = None
    warm_with: str = "auto"
    runs_per_visit: int = 1
    recompile_every: int | None = None
    cache_dir: PathLike | None = None
    no_cache: bool = False
    boundary_runs: int | None = None
    max_cut_share: float = BOUNDARY_SHARE
    validate: bool = False
    validate_runs: int = 50
    gap_runs: int = 20
    devices: str | None = None
    ray_address: str | None = None


def bisect(request: BisectRequest, hooks: Hooks = QUIET) -> RunFile:
    """Time every segment of ``request.model`` by differential timing of its prefixes and suffixes; return the run
    (estimate, per-layer differential times, the ``bisect`` and ``measurement`` sections). Options that
    do not go together are a :class:`UsageConflict`; a missing runtime or provider ``BackendUnavailable`` before
    any work; Ctrl-C a ``KeyboardInterrupt`` saying where the samples measured so far are cached."""
    r = request
    device = command_runner(r.run_cmd, r.compile_cmd, latency_regex=r.latency_regex, latency_json=r.latency_json,
                            latency_unit=r.latency_unit or "ms", timeout_s=r.timeout_s)
    _check_together(r, device)
    device_names = parse_devices(r.devices) if r.devices is not None else ()
    backend: OpenRuntime | None = None
    if device is None:  # exit 3 before any work when the runtime, provider or device is missing
        backend = open_runtime(r.backend, r.provider, device=r.device, precision=r.precision,
                               performance_hint=r.performance_hint)
    spec = backend.spec if backend is not None else _spec("command")
    config = BisectConfig(granularity="layer" if r.granularity == "layer" else "segment", segments=r.segments,
                          repeats=r.repeats or (10 if device is not None else 60),
                          rounds_s=AUTO_ROUNDS_S if r.repeats is None and device is None else 0.0, pilot=r.pilot,
                          max_ci=r.max_ci or 0.0,
                          budget_runs=r.budget_runs, baseline=r.baseline,
                          statistic=_statistic(r.statistic, device=device is not None), confidence=r.confidence,
                          resamples=r.resamples, seed=r.seed,
                          boundary_runs=BOUNDARY_RUNS if r.boundary_runs is None else r.boundary_runs,
                          max_cut_share=r.max_cut_share,
                          suffixes=device is None if r.suffixes is None else r.suffixes)
    graph = load_graph(model_or_sample(r.model), r.shapes, r.dims, r.inputs, seed=r.seed, hooks=hooks)
    profile = load_profile(r.target)
    estimate = estimate_graph(graph, profile)
    weights = {e.layer_id: e.latency_us for e in estimate.layers}
    session_config = backend.session_config(r.threads, r.opt_level) if backend is not None \
        else SessionConfig(provider=r.provider, threads=r.threads, opt_level=r.opt_level)
    feeds = make_inputs(graph, r.inputs, r.seed)
    runner: Runner
    if backend is None:
        assert device is not None
        runner = device
    else:
        runner = backend.bisect_runner(session_config, feeds, BisectTiming(
            runs_per_visit=r.runs_per_visit, visit_warmup=r.visit_warmup, warm_with=warm_with(r.warm_with),
            clock="cpu" if r.clock == "cpu" else "wall", recompile_every=r.recompile_every))
    # absolute: a device command runs in a folder of its own, where a relative cache path would name nothing
    cache_dir = Path(r.cache_dir).resolve() if r.cache_dir is not None else None
    store = SampleStore(None if r.no_cache else (cache_dir or default_cache_dir()))
    planner = CutPlanner.for_model(graph, [e.latency_us for e in estimate.layers],
                                   bandwidth_bytes_per_s=profile.ddr_bandwidth_bytes_per_s)
    groups = backend.fused_groups(graph, session_config) if backend is not None and r.cut_rule != "heuristic" \
        else None
    if groups is not None:
        planner = planner.with_fused_groups(group_cuts(planner.graph, groups))
    validation = _Validation(backend, graph, feeds, session_config, weights, runs=r.validate_runs,
                             rounds=config.repeats) if r.validate and backend is not None else None
    pool = RayDevicePool(device, device_names, address=r.ray_address) \
        if device is not None and device_names else None
    try:
        result = _measure(planner, runner, config, store, validation.after_round if validation else None,
                          hooks=hooks, pool=pool, keep_models=spec.can("model-files"))
    finally:
        if pool is not None:
            pool.close()
    for warning in store.dropped:
        hooks.warning(warning)
    gaps = None
    if backend is not None and r.gap_runs:
        gap_profile = backend.profile(graph, feeds, session_config, runs=r.gap_runs, warmup=min(3, r.gap_runs),
                                      weights=weights)
        gaps = kernel_gaps(result.segments_only, gap_profile, result.baseline_us or 0.0, result.full_us)
    result = with_systematic(result, gaps)
    checks: tuple[SegmentCheck, ...] = ()
    profiles: list[Measurement] = []
    if validation is not None:
        profiles = validation.finish()
        checks = compare_with_profile(result, profiles, weights)
    if planner.locked:
        cuts: dict[str, Any] | None = {"rule": "exec-graph", "locked": len(planner.locked)}
    elif spec.can("exec-graph-cuts") or r.cut_rule == "heuristic":
        cuts = {"rule": "heuristic", "locked": 0}
    else:
        cuts = None
    # the precision the compiler chose, not the hint
    precision = backend.chosen_precision(runner) if backend is not None else None
    return add_bisect(estimate_run(graph, estimate, profile, "bisect"), result, weights, checks, profiles,
                      machine=machine_info, precision=precision, cuts=cuts)


def _check_together(r: BisectRequest, device: CommandRunner | None) -> None:
    """Options that do not go together (:class:`UsageConflict`), in the order the command checks them."""
    if r.validate and device is not None:
        raise UsageConflict("--validate compares with the runtime's profiler: it cannot check --run-cmd")
    if r.backend != registry.DEFAULT and device is not None:
        raise UsageConflict(f"--backend {r.backend} times in this process: not with --run-cmd")
    if r.cut_rule == "exec-graph" and not _spec(r.backend).can("exec-graph-cuts"):
        cutters = registry.with_capability("exec-graph-cuts")
        titles = " or ".join(registry_title(name) for name in cutters)
        raise UsageConflict(f"--cuts exec-graph reads {titles}'s execution graph: give "
                            f"{' or '.join(f'--backend {name}' for name in cutters)}")
    if r.recompile_every is not None and device is not None:
        raise UsageConflict("--recompile-every compiles in this process: a --run-cmd device compiles each model "
                            "once with --compile-cmd")
    if r.boundary_runs and device is not None:
        raise UsageConflict("--boundary-runs times kernels with ONNX Runtime's profiler: a --run-cmd device "
                            "times whole runs only")
    if r.devices is not None and device is None:
        raise UsageConflict("--devices times on devices through --run-cmd (which names {device})")
    if r.ray_address is not None and r.devices is None:
        raise UsageConflict("--ray schedules the --devices pool: give --devices")
    if device is not None and "device" in _fields(device) and r.devices is None:
        raise UsageConflict("the command names {device}: give the pool with --devices")


def _spec(name: str) -> RuntimeSpec:
    """The registered runtime ``name``'s description; ``InputError`` (exit 2) naming the known ones."""
    spec = registry.spec(name)
    if spec is None:
        registry.get_runtime(name)  # raises, naming the known runtimes
        raise AssertionError(name)
    return spec


def registry_title(name: str) -> str:
    """How a sentence names the registered runtime ``name``."""
    return _spec(name).title


def _statistic(choice: str, *, device: bool) -> Statistic:
    """``--statistic``: ``auto`` is the median of paired differences for a device command (its tool prints an
    average over many frames) and the difference of 10th percentiles on ONNX Runtime (this CPU is shared:
    another process only ever adds time to a run, so the fastest rounds are the least disturbed; the 10th
    percentile rests on several of them where the minimum rests on one)."""
    if choice == "auto":
        return "median" if device else "p10"
    return "min" if choice == "min" else "p10" if choice == "p10" else "median"


def warm_with(choice: str) -> WarmWith:
    """``--warm-with``: ``auto`` is ``loop`` on both runtimes: a model warmed by itself, a suffix then by the layers
    before its cut, as the whole model's loop leaves the machine. Warmed by the whole model instead (a separately
    compiled copy on OpenVINO, a second session on ONNX Runtime), the halves are timed in another state than the
    loop's: SqueezeNet's prefixes and suffixes then met at their cut 9-12% over the last prefix in the same rounds
    on ONNX Runtime (-1.5 to +0.5% with ``loop``) and its segments' sum read 12-17% over the whole model (1-6% with
    ``loop``); on OpenVINO its segments 10-20% over the performance counters. Warmed by itself alone, a suffix's
    weights stay cached as they never are in the loop (ResNet-50 on OpenVINO: its last suffixes' segments 20-30%
    under the counters). README: the measurements."""
    if choice == "auto":
        return "loop"
    return "self" if choice == "self" else "loop" if choice == "loop" else "whole"


def visit_warmup(runs: int | None, *, openvino: bool) -> int:
    """``--visit-warmup``: ``runs``, else the runtime's default (:attr:`~layerscope.runtimes.spec.RuntimeSpec.
    visit_warmup`: 4 on OpenVINO, 1 on ONNX Runtime)."""
    if runs is not None:
        return runs
    return (openvino_spec if openvino else onnxruntime_spec).visit_warmup


@contextmanager
def _workdir(store: SampleStore, *, keep: bool) -> Iterator[Path]:
    """Where prefix models are written: beside the cache for device commands (to rerun one by hand), else a
    temporary folder."""
    if keep and store.directory is not None:
        yield store.directory / "models"
        return
    with scratch("bisect") as tmp:
        yield Path(tmp)


def _fields(runner: CommandRunner) -> frozenset[str]:
    return runner.run.fields | (runner.compile.fields if runner.compile else frozenset())


def _measure(planner: CutPlanner, runner: Runner, config: BisectConfig, store: SampleStore,
             after_round: Callable[[int], None] | None, *, hooks: Hooks,
             pool: DevicePool | None = None, keep_models: bool = False) -> BisectResult:
    """The bisect with a progress bar; on Ctrl-C, where the samples measured so far are, then re-raised."""
    labels = {"measure": "measuring (final rounds)", "boundary": "cut costs (profiled prefixes)"}
    labels.update({f"pilot-{i}": "coarse segments (pilot)" if i == 0 else f"refinement {i} (pilot)"
                   for i in range(64)})
    try:
        with _workdir(store, keep=keep_models) as workdir, hooks.phases(labels, None) as progress:
            return run_bisect(planner, runner, config, store, workdir=workdir, progress=progress,
                              after_round=after_round, pool=pool)
    except KeyboardInterrupt:
        where = f"cached in {store.directory}" if store.directory else "not cached (--no-cache)"
        raise KeyboardInterrupt(f"the samples measured so far are {where}; run the same command again to "
                                "resume") from None
    finally:
        runner.close()


class _Validation:
    """`layerscope profile` taken in :data:`VALIDATION_PROFILES` parts between the bisect's final rounds, so
    that the reference sees the same machine as the bisect (a shared machine drifts between two phases run one
    after the other); parts the rounds did not take (rounds from the cache) are taken at the end."""

    def __init__(self, backend: OpenRuntime, graph: Graph, feeds: Mapping[str, Any], config: SessionConfig,
                 weights: Mapping[str, float], *, runs: int, rounds: int) -> None:
        self.graph, self.feeds, self.config, self.weights = graph, feeds, config, weights
        self.backend = backend
        self.parts = min(VALIDATION_PROFILES, rounds)
        self.runs = -(-runs // self.parts)
        self.every = max(1, rounds // self.parts)
        self.profiles: list[Measurement] = []

    def after_round(self, round_no: int) -> None:
        if (round_no + 1) % self.every == 0 and len(self.profiles) < self.parts:
            self._take()

    def finish(self) -> list[Measurement]:
        while len(self.profiles) < self.parts:
            self._take()
        return self.profiles

    def _take(self) -> None:
        self.profiles.append(self.backend.profile(self.graph, self.feeds, self.config, runs=self.runs,
                                                  warmup=min(3, self.runs), weights=self.weights))
