"""``layerscope bisect [MODEL]``: per-segment times on a device that only times whole models.

The model is cut after layer k for a set of k, each prefix (past the middle, each suffix: the layers after the
cut) is timed (ONNX Runtime or OpenVINO here, or any device through ``--run-cmd``), and each segment's time is the
difference of the models around it, with a bootstrap confidence interval (:mod:`layerscope.measure.differential`).
Measurements are cached by model and runner, so an interrupted bisect resumes when the same command is run
again.

Exit codes: 0; 2 bad input (model, shape, input file, template, regex, budget, or command output that the
latency regex / JSON field cannot read); 3 provider not available here, or the device command failed
(non-zero exit, timeout: its exit code and the tail of its output are printed); 130 Ctrl-C (what was
measured by then stays cached: run the same command again to resume).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    backend_option,
    cli_dims,
    device_command,
    device_command_options,
    input_option,
    intra_threads_option,
    openvino_bench_options,
    opt_level_option,
    parse_shapes,
    print_shape_notes,
    provider_option,
    selected_backend,
    shape_option,
    target_option,
)
from layerscope.cli.outputs import OutputPath
from layerscope.cli.progress import phase_progress
from layerscope.estimate import estimate_graph
from layerscope.measure.backend import Backend, get_backend
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
from layerscope.measure.inputs import feeder, make_inputs
from layerscope.measure.openvino_backend import OpenVinoBackend
from layerscope.measure.openvino_runner import OpenVinoRunner, fused_groups, group_cuts
from layerscope.measure.profile import Measurement
from layerscope.measure.runners import CommandRunner, OrtRunner, Runner, WarmWith
from layerscope.measure.session import SessionConfig, ort_provider
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.report.command_terminal import command_report
from layerscope.run import run_from_estimate, save_run
from layerscope.samples import DEFAULT_SAMPLE, sample_path
from layerscope.sweep.devices import RayDevicePool, parse_devices
from layerscope.targets import load_profile

#: The validation's profile is taken in this many parts between the bisect's rounds.
VALIDATION_PROFILES = 5
#: Profiled runs per prefix that time its cut's own cost on ONNX Runtime, unless --boundary-runs says.
BOUNDARY_RUNS = 10
#: On OpenVINO without --recompile-every: each timed model compiled afresh every this many visits.
OPENVINO_RECOMPILE_EVERY = 20
#: On ONNX Runtime without --repeats: more than 60 rounds while their timed runs fit in this many seconds.
AUTO_ROUNDS_S = 15.0


@click.command("bisect")
@click.argument("model", type=click.Path(path_type=Path), required=False)
@target_option
@shape_option
@input_option
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs and the bootstrap.")
@device_command_options(what="prefix")
@click.option("--granularity", type=click.Choice(["segment", "layer"]), default="segment", show_default=True,
              help="segment: coarse segments refined where the time is; layer: one segment per layer.")
@click.option("--segments", default=12, show_default=True, type=click.IntRange(2, 256),
              help="Coarse segments, of roughly equal estimated time on --target.")
@click.option("--repeats", default=None, type=click.IntRange(min=2),
              help="Rounds: final samples per model [default: 10 with --run-cmd; in process 60, or more (up to "
                   "300, within --budget) while the rounds' timed runs fit in about 15 s].")
@click.option("--max-ci", type=click.FloatRange(0, 1, max_open=True), default=None, metavar="FRACTION",
              help="After the rounds, keep adding rounds (up to 5x --repeats, within --budget) while a segment holding "
                   "5% of the time or more has a 95% bootstrap interval wider than FRACTION of it either side (e.g. "
                   "0.15); 0: off [default: off].")
@click.option("--pilot", default=3, show_default=True, type=click.IntRange(min=1),
              help="Samples per prefix that decide where to refine.")
@click.option("--budget", "budget_runs", type=click.IntRange(min=1), default=None, metavar="RUNS",
              help="Most runs (samples) to plan, pilot runs included [default: 2x the coarse plan; layer: all].")
@click.option("--suffixes/--no-suffixes", default=None,
              help="Time the cuts past the middle as suffixes (the layers after the cut, fed the tensors crossing "
                   "it), so that every segment is the difference of two models of at most about half the model "
                   "[default: on with ONNX Runtime; off with --run-cmd, whose tool must then feed the suffix's "
                   "inputs].")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="Also time a model that returns one element of each input, the runtime's fixed cost per call "
                   "(the first segment holds that cost without it).")
@click.option("--statistic", type=click.Choice(["auto", "median", "p10", "min"]), default="auto", show_default=True,
              help="median: median over rounds of the paired differences of neighbouring prefixes (for device "
                   "tools that print an average); p10 / min: difference of the prefixes' 10th-percentile / fastest "
                   "rounds (for a CPU shared with other work, where interference only adds time); auto: p10 on "
                   "ONNX Runtime, median with --run-cmd.")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0.5, 0.999),
              help="Confidence level of the bootstrap intervals.")
@click.option("--resamples", default=2000, show_default=True, type=click.IntRange(min=100),
              help="Bootstrap resamples.")
@backend_option
@openvino_bench_options
@click.option("--cuts", "cut_rule", type=click.Choice(["auto", "exec-graph", "heuristic"]), default="auto",
              show_default=True,
              help="Where cuts may fall: exec-graph: only between the nodes the runtime's compiled whole model runs "
                   "(never inside a group it fused; OpenVINO); heuristic: op types runtimes usually fuse are kept "
                   "together where possible; auto: exec-graph with --backend openvino, else heuristic.")
@provider_option
@intra_threads_option()
@opt_level_option
@click.option("--clock", type=click.Choice(["wall", "cpu"]), default="wall", show_default=True,
              help="ONNX Runtime, OpenVINO: wall time, or the inference thread's CPU time (needs --threads 1; ignores "
                   "the time other processes hold the core).")
@click.option("--visit-warmup", default=None, show_default="1 on ONNX Runtime, 4 on OpenVINO",
              type=click.IntRange(min=0),
              help="ONNX Runtime, OpenVINO: untimed runs at each visit of a model before the timed one (see "
                   "--warm-with); 0 times every model with its caches as the previous model left them.")
@click.option("--warm-with", type=click.Choice(["auto", "whole", "self", "loop"]), default="auto",
              show_default=True,
              help="ONNX Runtime, OpenVINO: what the untimed runs run: the whole model, so that each model is "
                   "timed in the state the whole model leaves the machine in; the model itself (cheaper, but a "
                   "model's data is then cached as it never is in the whole model's loop); or loop: the model "
                   "itself, then for a suffix one run of the layers before its cut, as the whole model's loop runs "
                   "them. auto: loop (README: what each gave on both runtimes).")
@click.option("--runs-per-visit", default=1, show_default=True, type=click.IntRange(min=1),
              help="ONNX Runtime, OpenVINO: timed runs per visit of a model; the fastest is the sample.")
@click.option("--recompile-every", default=None, type=click.IntRange(min=0), metavar="VISITS",
              show_default=f"{OPENVINO_RECOMPILE_EVERY} on OpenVINO, 0 on ONNX Runtime",
              help="ONNX Runtime, OpenVINO: compile each timed model afresh (a new session) every VISITS visits, so "
                   "that its samples span several compilations, each of which runs at its own speed; 0: never.")
@click.option("--cache", "cache_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Cache of measurements [default: $LAYERSCOPE_CACHE_DIR/bisect or ~/.cache/layerscope/bisect].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--boundary-runs", type=click.IntRange(min=0), default=None, metavar="N",
              help="ONNX Runtime, OpenVINO: profiled runs per model that time what its cut alone costs (converting "
                   "the crossing tensors out of or into the runtime's blocked layout), subtracted from its "
                   "samples; 0: no correction [default: 10; not with --run-cmd].")
@click.option("--max-cut-share", type=click.FloatRange(min=0), default=BOUNDARY_SHARE, show_default=True,
              metavar="FRACTION",
              help="With the cut-cost correction: do not report a cut whose measured cost is more than FRACTION of "
                   "the smaller segment beside it (the two segments become one; such a correction is too uncertain "
                   "for them); 0: keep every cut.")
@click.option("--validate", is_flag=True,
              help="Compare each segment with `layerscope profile`'s kernel times (OpenVINO: its performance "
                   "counters; not with --run-cmd).")
@click.option("--validate-runs", default=50, show_default=True, type=click.IntRange(min=1),
              help="Profiled runs of the validation, taken in 5 parts between the bisect's rounds.")
@click.option("--gap-runs", default=20, show_default=True, type=click.IntRange(min=0),
              help="Profiled runs of the whole model that estimate the time between kernels (part of each "
                   "segment's systematic error; 0: not estimated; not with --run-cmd).")
@click.option("--devices", "devices", default=None, metavar="NAME[,NAME]",
              help="With --run-cmd: a pool of devices that time a round's models in parallel, one model per device "
                   "at a time, each a Ray resource layerscope_device_NAME; the command names its device as "
                   "{device}. A job whose device fails is retried on another.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="With --devices: an existing Ray cluster whose nodes declare the device resources "
                   "(default: a local Ray runtime).")
@click.option("-o", "--output", "--json", "json_out", type=OutputPath(), default=None, metavar="RUN.json",
              help="Write the run file (estimate, per-layer differential times, the bisect section).")
def command(*, model: Path | None, target: str, shapes: tuple[str, ...], input_specs: tuple[str, ...], seed: int,
            granularity: str, segments: int, repeats: int | None, max_ci: float | None,
            pilot: int, budget_runs: int | None, suffixes: bool | None, baseline: bool, statistic: str,
            confidence: float, resamples: int, backend_name: str, cut_rule: str, provider: str,
            threads: int, opt_level: str, clock: str,
            visit_warmup: int | None, warm_with: str, runs_per_visit: int, recompile_every: int | None,
            cache_dir: Path | None, no_cache: bool,
            boundary_runs: int | None, max_cut_share: float, validate: bool, validate_runs: int, gap_runs: int,
            devices: str | None,
            ray_address: str | None, json_out: Path | None) -> None:
    """Time every segment of MODEL (default: the bundled sample) by differential profiling of its prefixes and
    suffixes."""
    command_runner = device_command()
    if validate and command_runner is not None:
        raise click.UsageError("--validate compares with the runtime's profiler: it cannot check --run-cmd")
    if backend_name != "onnxruntime" and command_runner is not None:
        raise click.UsageError("--backend openvino times in this process: not with --run-cmd")
    if cut_rule == "exec-graph" and backend_name != "openvino":
        raise click.UsageError("--cuts exec-graph reads OpenVINO's execution graph: give --backend openvino")
    if recompile_every is not None and command_runner is not None:
        raise click.UsageError("--recompile-every compiles in this process: a --run-cmd device compiles each model "
                               "once with --compile-cmd")
    if boundary_runs and command_runner is not None:
        raise click.UsageError("--boundary-runs times kernels with ONNX Runtime's profiler: a --run-cmd device "
                               "times whole runs only")
    if devices is not None and command_runner is None:
        raise click.UsageError("--devices times on devices through --run-cmd (which names {device})")
    if ray_address is not None and devices is None:
        raise click.UsageError("--ray schedules the --devices pool: give --devices")
    if command_runner is not None and "device" in _fields(command_runner) and devices is None:
        raise click.UsageError("the command names {device}: give the pool with --devices")
    device_names = parse_devices(devices) if devices is not None else ()
    backend: Backend | None = None
    if command_runner is not None:
        pass
    elif backend_name == "openvino":  # exit 3 before any work when the device is missing
        backend, provider = selected_backend(backend_name, provider)
    else:
        ort_provider(provider)  # exit 3 before any work when the provider is missing
        backend = get_backend("onnxruntime")
    config = BisectConfig(granularity="layer" if granularity == "layer" else "segment", segments=segments,
                          repeats=repeats or (10 if command_runner is not None else 60),
                          rounds_s=AUTO_ROUNDS_S if repeats is None and command_runner is None else 0.0, pilot=pilot,
                          max_ci=max_ci or 0.0,
                          budget_runs=budget_runs, baseline=baseline,
                          statistic=_statistic(statistic, device=command_runner is not None), confidence=confidence,
                          resamples=resamples, seed=seed,
                          boundary_runs=BOUNDARY_RUNS if boundary_runs is None else boundary_runs,
                          max_cut_share=max_cut_share,
                          suffixes=command_runner is None if suffixes is None else suffixes)
    graph = load_model(model if model is not None else sample_path(DEFAULT_SAMPLE), parse_shapes(shapes),
                       cli_dims(), feeds=feeder(input_specs, seed))
    print_shape_notes(graph)
    profile = load_profile(target)
    estimate = estimate_graph(graph, profile)
    weights = {e.layer_id: e.latency_us for e in estimate.layers}
    openvino = isinstance(backend, OpenVinoBackend)
    session_config = SessionConfig(provider=provider, threads=threads,
                                   opt_level="compiler" if openvino else opt_level)
    feeds = make_inputs(graph, input_specs, seed)
    runner: Runner
    if command_runner is not None:
        runner = command_runner
    elif isinstance(backend, OpenVinoBackend):
        runner = OpenVinoRunner(session_config, backend.options, feeds, runs_per_visit=runs_per_visit,
                                visit_warmup=_visit_warmup(visit_warmup, openvino=True),
                                warm_with=_warm_with(warm_with),
                                clock="cpu" if clock == "cpu" else "wall",
                                recompile_every=_recompile_every(recompile_every, openvino=True))
    else:
        runner = OrtRunner(session_config, feeds, runs_per_visit=runs_per_visit,
                           visit_warmup=_visit_warmup(visit_warmup, openvino=False),
                           warm_with=_warm_with(warm_with),
                           clock="cpu" if clock == "cpu" else "wall",
                           recompile_every=_recompile_every(recompile_every, openvino=False))
    store = SampleStore(None if no_cache else (cache_dir or default_cache_dir()))
    planner = CutPlanner.for_model(graph, [e.latency_us for e in estimate.layers],
                                   bandwidth_bytes_per_s=profile.ddr_bandwidth_bytes_per_s)
    if isinstance(backend, OpenVinoBackend) and cut_rule != "heuristic":
        planner = planner.with_fused_groups(group_cuts(planner.graph, fused_groups(graph, session_config,
                                                                                   backend.options)))
    validation = _Validation(backend, graph, feeds, session_config, weights, runs=validate_runs,
                             rounds=config.repeats) if validate and backend is not None else None
    pool = RayDevicePool(command_runner, device_names, address=ray_address) \
        if command_runner is not None and device_names else None
    try:
        result = _measure(planner, runner, config, store, validation.after_round if validation else None, pool=pool)
    finally:
        if pool is not None:
            pool.close()
    for warning in store.dropped:
        click.echo(f"layerscope: warning: {warning}", err=True)
    gaps = None
    if backend is not None and gap_runs:
        gap_profile = backend.profile(graph, feeds, session_config, runs=gap_runs, warmup=min(3, gap_runs),
                                      weights=weights)
        gaps = kernel_gaps(result.segments_only, gap_profile, result.baseline_us or 0.0, result.full_us)
    result = with_systematic(result, gaps)
    checks: tuple[SegmentCheck, ...] = ()
    profiles: list[Measurement] = []
    if validation is not None:
        profiles = validation.finish()
        checks = compare_with_profile(result, profiles, weights)
    run = add_bisect(run_from_estimate(graph, estimate, profile), result, weights, checks, profiles)
    if isinstance(runner, OpenVinoRunner) and runner.settings:  # what the compiler chose, not the hint
        run["measurement"]["precision"] = runner.settings["precision"]
    if planner.locked:
        run["bisect"]["cuts"] = {"rule": "exec-graph", "locked": len(planner.locked)}
    elif isinstance(backend, OpenVinoBackend) or cut_rule == "heuristic":
        run["bisect"]["cuts"] = {"rule": "heuristic", "locked": 0}
    _print(run, json_out)


def _statistic(choice: str, *, device: bool) -> Statistic:
    """``--statistic``: ``auto`` is the median of paired differences for a device command (its tool prints an
    average over many frames) and the difference of 10th percentiles on ONNX Runtime (this CPU is shared:
    another process only ever adds time to a run, so the fastest rounds are the least disturbed; the 10th
    percentile rests on several of them where the minimum rests on one)."""
    if choice == "auto":
        return "median" if device else "p10"
    return "min" if choice == "min" else "p10" if choice == "p10" else "median"


def _warm_with(choice: str) -> WarmWith:
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


def _recompile_every(visits: int | None, *, openvino: bool) -> int:
    """``--recompile-every``: by default every :data:`OPENVINO_RECOMPILE_EVERY` visits on OpenVINO, never on ONNX
    Runtime. On OpenVINO one compilation of ResNet-50 ran 2 % slower than three others of the same model, steadily
    (:class:`~layerscope.measure.runners.Recompile`), and such an offset of a prefix is up to a third of a segment
    of 5 % of the time; ONNX Runtime's bisect met its accuracy goals with one session per model."""
    if visits is not None:
        return visits
    return OPENVINO_RECOMPILE_EVERY if openvino else 0


def _visit_warmup(runs: int | None, *, openvino: bool) -> int:
    """``--visit-warmup``: by default 4 on OpenVINO, 1 on ONNX Runtime. On OpenVINO a model warmed by one run of its
    own still timed 5-8% over its back-to-back time on SqueezeNet (the other models of the round in between);
    warmed by four, SqueezeNet's bisect met both accuracy goals in 6 runs of 6 and YOLOv5s-320's in 4 of 6
    (README)."""
    if runs is not None:
        return runs
    return 4 if openvino else 1


def _print(run: Mapping[str, Any], json_out: Path | None) -> None:
    console = SafeConsole()
    console.print(command_report(run, kind="bisect"))
    if json_out is not None:
        console.print(f"run file: {save_run(run, json_out)}")


@contextmanager
def _workdir(store: SampleStore, *, keep: bool) -> Iterator[Path]:
    """Where prefix models are written: beside the cache for device commands (to rerun one by hand), else a
    temporary folder."""
    if keep and store.directory is not None:
        yield store.directory / "models"
        return
    with tempfile.TemporaryDirectory(prefix="layerscope-bisect-") as tmp:
        yield Path(tmp)


def _fields(runner: CommandRunner) -> frozenset[str]:
    return runner.run.fields | (runner.compile.fields if runner.compile else frozenset())


def _measure(planner: CutPlanner, runner: Runner, config: BisectConfig, store: SampleStore,
             after_round: Callable[[int], None] | None, *, pool: DevicePool | None = None) -> BisectResult:
    """The bisect with a progress bar; on Ctrl-C, where the samples measured so far are, then re-raised."""
    labels = {"measure": "measuring (final rounds)", "boundary": "cut costs (profiled prefixes)"}
    labels.update({f"pilot-{i}": "coarse segments (pilot)" if i == 0 else f"refinement {i} (pilot)"
                   for i in range(64)})
    try:
        with _workdir(store, keep=not isinstance(runner, OrtRunner)) as workdir, phase_progress(labels) as progress:
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

    def __init__(self, backend: Backend, graph: Graph, feeds: Mapping[str, Any], config: SessionConfig,
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
