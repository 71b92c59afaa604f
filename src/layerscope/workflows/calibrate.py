"""Calibrate: a hardware profile fitted to measured runs or to whole-model board latencies, or the kernel-level
latency predictor fitted to kernels timed here (``layerscope calibrate``, ``layerscope.calibrate``).

- From runs (``layerscope profile``'s): each unit's efficiency per layer kind, a compute factor per op type where
  the runs hold enough evidence (``[op_efficiency]``; ``per_unit_only`` leaves it out), the per-layer overhead and
  the DDR bandwidth, with the leave-one-model-out error and the error on held-out ``checks``
  (:mod:`layerscope.analysis.calibrate`).
- From a board table (``board``): every model of the table estimated on ``base`` and the profile fitted to their
  board latencies, with the leave-one-family-out error and k's spread before and after
  (:mod:`layerscope.analysis.board`).
- ``kernels``: every distinct kernel of the calibration models (the runtime's optimized graph, through the fusion
  map), then generated single-kernel models of every family (:mod:`layerscope.measure.kernels`), interleaved so
  that any budget covers every family, for half the budget; the rest goes to the families, and the regions of
  their configuration space, where the 3-fold cross-validated error of what was timed so far is highest (off with
  ``adaptive=False``: round-robin to the end). Timed in the bisect cache (``cache``; the same request resumes)
  until ``budget`` is spent (cached kernels are free); a model's call costs are timed as ``profile`` times a model
  (:func:`~layerscope.measure.kernels.call_costs`: the empty model's P50, each further input, output and node);
  then each calibration model is timed whole (its P50) and the in-model context (what a kernel costs inside a
  model beyond its time alone) is fitted to them.

The product is a file: the profile (``output``, a ``.toml`` file ``--target`` accepts) or the predictor (a
``.json`` file ``estimate --predictor`` reads); the use case writes it there (atomically) and returns its path with
the fit.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.analysis.calibrate import (
    Calibration,
    calibrated_profile,
    out_of_bounds,
    profile_toml,
    run_data,
    write_profile,
)
from layerscope.analysis.calibrate import calibrate as fit_runs
from layerscope.analysis.fusion_rules import FusionRules, learn_rules
from layerscope.analysis.predictor import (
    Context,
    KernelSample,
    Predictor,
    family_errors,
    fit_context,
    fit_predictor,
    predict_path,
    samples_from_timings,
)
from layerscope.errors import InputError
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import (
    FAMILIES,
    NO_CALLS,
    AdaptiveRound,
    FamilyErrors,
    KernelModel,
    KernelRunner,
    KernelTiming,
    TimingConfig,
    adaptive_sample,
    call_costs,
    model_kernels,
    time_kernels,
    time_models,
)
from layerscope.measure.runners import CommandRunner
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.run import load_run
from layerscope.runtimes import registry
from layerscope.runtimes.base import RuntimeOptions
from layerscope.runtimes.command import kernel_runner as device_kernel_runner
from layerscope.targets import Profile, load_profile
from layerscope.targets.host import cache_dir
from layerscope.targets.schema import load_profile_file
from layerscope.workflows.common import QUIET, Hooks, OptionError, PathLike, UsageConflict, command_runner

if TYPE_CHECKING:
    from layerscope.analysis.board import KAnalysis


@dataclass(frozen=True)
class CalibrateRequest:
    """``layerscope calibrate``'s options. ``runs``: measured runs (with ``kernels``: calibration models, optional);
    ``output``: where the profile (``.toml``) or with ``kernels`` the predictor (``.json``) is written; ``name``:
    the profile's name (default: ``output``'s stem); ``base``: the profile the runs were estimated on (default: the
    runs' target; needed with ``board``); ``checks``: held-out runs predicted with the fit; ``board``: a CSV of
    whole-model board latencies to fit instead of runs; ``per_unit_only``: no per-op-type factors; ``force``: write
    a profile whose fit is outside physical bounds (:func:`layerscope.analysis.calibrate.out_of_bounds`). With
    ``kernels``: ``budget`` (``90s``, ``10m``), ``families`` (``a,b``; default all), ``kernel_threads``,
    ``visits`` (samples per kernel), ``adaptive``, ``cache`` (the sample cache), ``shapes`` of the models, and what
    times the kernels: ``backend`` (OpenVINO with ``device``, ``precision``, ``performance_hint``) or a device
    command (``run_cmd`` ... ``timeout_s``, as :func:`layerscope.workflows.common.command_runner` reads them)."""

    output: PathLike
    runs: tuple[PathLike, ...] = ()
    kernels: bool = False
    budget: str = "10m"
    families: str | None = None
    kernel_threads: int = 1
    visits: int = 11
    adaptive: bool = True
    cache: PathLike | None = None
    backend: str = registry.DEFAULT
    device: str = "CPU"
    precision: str = ""
    performance_hint: str = "LATENCY"
    run_cmd: str | None = None
    compile_cmd: str | None = None
    latency_regex: str | None = None
    latency_json: str | None = None
    latency_unit: str = "ms"
    timeout_s: float | None = None
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    name: str | None = None
    base: str | None = None
    checks: tuple[PathLike, ...] = ()
    board: PathLike | None = None
    per_unit_only: bool = False
    force: bool = False


@dataclass(frozen=True)
class BoardFit:
    """What ``board`` adds to the fit: k = board / estimate per family on the base profile and on the calibrated
    one."""

    before: KAnalysis
    after: KAnalysis


@dataclass(frozen=True)
class KernelFit:
    """The predictor fitted by ``kernels`` and how it was made: the kernels timed (``cached`` of them from the
    cache; ``model_kernels`` of the calibration models), the runner's per-call overhead, the adaptive passes after
    the first (each: kernels timed per family, the worst cross-validated errors it planned from) and the fusion
    rules learnt from the calibration models (``None``: none, or a device command)."""

    predictor: Predictor
    timed: int
    cached: int
    model_kernels: int
    overhead_us: float
    passes: tuple[AdaptiveRound, ...]
    rules: FusionRules | None


@dataclass(frozen=True)
class CalibrateResult:
    """The file written (``output``) and the fit: ``calibration`` for a profile (with ``board`` its k analyses),
    ``kernels`` for the predictor."""

    written: Path
    calibration: Calibration | None = None
    board: BoardFit | None = None
    kernels: KernelFit | None = None


def calibrate(request: CalibrateRequest, hooks: Hooks = QUIET) -> CalibrateResult:
    """Fit and write what ``request`` asks for (see the module docstring). ``UsageConflict`` for options that do not
    go together; ``InputError`` for a bad output suffix, budget, family or no run; ``BackendUnavailable`` (exit 3)
    when the kernels' runtime is missing."""
    r = request
    command = command_runner(r.run_cmd, r.compile_cmd, latency_regex=r.latency_regex, latency_json=r.latency_json,
                             latency_unit=r.latency_unit or "ms", timeout_s=r.timeout_s)
    if r.dims:
        raise OptionError("--dim", "calibrate loads the models with --shape alone; give each input's dims there")
    output = Path(r.output)
    if r.kernels:
        return _kernels(r, output, _kernel_runner(r, command), hooks)
    if r.backend != registry.DEFAULT or command is not None:
        raise UsageConflict("--backend and --run-cmd apply with --kernels only")
    if output.suffix != ".toml":
        raise InputError(f"{output}: the calibrated profile must be a .toml file")
    if r.board is not None:
        if r.runs or r.checks:
            raise UsageConflict("--board calibrates from the table alone: give no RUN or --check")
        return _board(Path(r.board), base=r.base, output=output, name=r.name, hooks=hooks, force=r.force)
    if not r.runs:
        raise InputError("calibrate needs at least one RUN (or --kernels, or --board)")
    data = [run_data(load_run(path), str(path)) for path in r.runs]
    held_out = [run_data(load_run(path), str(path)) for path in r.checks]
    targets = sorted({d.target for d in data if d.target})
    if r.base is None and len(targets) != 1:
        raise InputError(f"the runs were estimated on {', '.join(targets) or 'no profile'}; pass --base")
    profile = load_profile(r.base or targets[0])
    cal = fit_runs(data, profile, held_out, per_op=not r.per_unit_only)
    _check_bounds(cal, profile, output, force=r.force, hooks=hooks)
    header = (f"Calibrated by `layerscope calibrate` from {len(data)} run(s) on base profile '{profile.name}'.\n"
              "Efficiencies, op-type multipliers, overheads and bandwidth are fitted to those measurements "
              "(see [sources]).")
    return CalibrateResult(_write_profile(cal, profile, output, r.name, header), cal)


def _check_bounds(cal: Calibration, profile: Profile, output: Path, *, force: bool, hooks: Hooks) -> None:
    """A fit outside physical bounds: unless ``force``, ``InputError`` (exit 2, the one line of a refusal) naming
    the first value out of bounds and how many there are, before ``output`` is written; with ``force``, one warning
    line naming every one, and the profile is written."""
    bad = out_of_bounds(profile, cal.params)
    if not bad:
        return
    if not force:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise InputError(f"{output}: not written: the fit has {bad[0]}{more}; the runs do not fit base profile "
                         f"{profile.name!r} (check --base and that the runs measured that device), or give --force "
                         "to write it anyway")
    hooks.warning(f"the fit is outside physical bounds: {'; '.join(bad)}")


def _write_profile(cal: Calibration, profile: Profile, output: Path, name: str | None, header: str) -> Path:
    """The calibrated profile written to ``output`` (and loaded back: it must load as any profile does)."""
    mapping = calibrated_profile(profile, cal.params, name=name or output.stem, models=cal.models)
    written = write_profile(output, profile_toml(mapping, header))
    load_profile_file(written)  # a failure here is a bug of ours
    return written


def _board(table_path: Path, *, base: str | None, output: Path, name: str | None, hooks: Hooks,
           force: bool = False) -> CalibrateResult:
    """``board``: estimate every model of the table on the base profile, fit it to their board latencies, write the
    profile; ``hooks.note`` is told how many rows of other boards were left out."""
    from layerscope.analysis.board import board_runs, calibrate_board, k_analysis, read_board_table

    if base is None:
        raise UsageConflict("--board needs --base: the profile of the board the latencies were measured on")
    profile = load_profile(base)
    table = read_board_table(table_path, board=profile.name)
    if table.other_boards:
        hooks.note(f"{table.other_boards} row(s) of other boards than {profile.name} left out")
    runs = board_runs(table.entries, profile)
    cal = calibrate_board(runs, profile)
    _check_bounds(cal, profile, output, force=force, hooks=hooks)
    header = (f"Calibrated by `layerscope calibrate --board` from {len(cal.models)} whole-model board latencies on "
              f"base profile '{profile.name}' ({table_path.name}).\nEfficiencies, overheads and bandwidth are fitted "
              "to those measurements (see [sources]).")
    written = _write_profile(cal, profile, output, name, header)
    return CalibrateResult(written, cal, BoardFit(k_analysis(runs), k_analysis(runs, cal.params)))


# --- the kernel-level predictor -----------------------------------------------------------------------------------

def parse_budget(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m`` or ``1h``; ``InputError`` otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise InputError(f"--budget {text!r}: give a positive duration such as 90s, 10m or 1h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def parse_families(text: str | None) -> tuple[str, ...]:
    """The families of ``--families a,b`` (default: all); ``InputError`` for one that does not exist."""
    if not text:
        return FAMILIES
    chosen = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown or not chosen:
        raise InputError(f"--families: unknown {', '.join(unknown) or 'empty list'}; choose from {', '.join(FAMILIES)}")
    return chosen


def _kernel_runner(request: CalibrateRequest, command: CommandRunner | None) -> KernelRunner:
    """What times the kernels: ``command`` (the runner ``bisect`` uses), else ``request.backend`` opened with its
    device and options (``BackendUnavailable`` when it is not here; ``InputError`` for a runtime that cannot time
    kernels)."""
    if command is not None:
        if request.backend != registry.DEFAULT:
            raise UsageConflict("--run-cmd times on a device: leave --backend out")
        return device_kernel_runner(command)
    runtime = registry.get_runtime(request.backend)
    if not runtime.spec.can("kernel-timing"):
        timers = [name for name in registry.choices() if name in registry.with_capability("kernel-timing")]
        raise InputError(f"--backend {request.backend} cannot time kernels; choose from {', '.join(timers)}")
    return runtime.open(RuntimeOptions(device=request.device, precision=request.precision,
                                       performance_hint=request.performance_hint)).kernel_runner()


def _kernels(request: CalibrateRequest, output: Path, runner: KernelRunner, hooks: Hooks) -> CalibrateResult:
    """Sample, time, fit and write the predictor; ``hooks.note`` is told each calibration model's kernels as they
    are found."""
    if output.suffix != ".json":
        raise InputError(f"{output}: the predictor file must be a .json file")
    budget_s = parse_budget(request.budget)
    chosen = parse_families(request.families)
    shapes = dict(request.shapes)
    models = [Path(path) for path in request.runs]
    config = SessionConfig(threads=request.kernel_threads)
    kernels: list[KernelModel] = []
    groupings: list[tuple[Graph, list[tuple[str, tuple[str, ...]]]]] = []
    for path in models:
        _, found, notes = model_kernels(path, shapes, config, runner, groupings=groupings)
        kernels += found
        hooks.note(f"{path}: {len(found)} distinct kernel(s)" + (f", {len(notes)} left out" if notes else ""))
    store = SampleStore((Path(request.cache) if request.cache is not None else cache_dir() / "bisect") / "kernels")
    timing = TimingConfig(visits=request.visits, threads=request.kernel_threads)
    profile = load_profile("host")
    features = _SampleCache(profile)
    runner_info: dict[str, Any] = {}

    with hooks.phases({"kernels": "timing kernels"}, {"kernels": "kernels"}) as update:
        def timer(batch: Sequence[KernelModel], left_s: float | None) -> list[KernelTiming]:
            timed, runner_info["overhead_us"], runner_info["identity"] = time_kernels(
                batch, store, timing, budget_s=left_s, progress=lambda done, total: update("kernels", done, total),
                runner=runner)
            return timed

        timings, rounds = adaptive_sample(kernels, chosen, timer, features.family_errors, budget_s=budget_s,
                                          first_share=0.5 if request.adaptive else 1.0,
                                          max_rounds=4 if request.adaptive else 0)
    overhead_us, identity = runner_info["overhead_us"], runner_info["identity"]
    # a model's call costs as profile times a model (back-to-back runs): a device command's calls are its own
    calls = call_costs(runner, request.kernel_threads) if runner.own_grouping else NO_CALLS
    predictor = fit_predictor(features.samples(timings), identity, profile.name, overhead_us, calls=calls)
    wholes = time_models(models, shapes, store, timing, runner=runner)
    rules = learn_rules(groupings, runner.name) if groupings and runner.own_grouping else None
    predictor = dataclasses.replace(predictor, context=model_context(predictor, wholes, shapes, profile),
                                    fusion_rules=rules)
    written = predictor.save(output)
    fit = KernelFit(predictor, len(timings), sum(1 for t in timings if t.cached), len(kernels), overhead_us,
                    tuple(rounds[1:]), rules)
    return CalibrateResult(written, kernels=fit)


class _SampleCache:
    """Each timed kernel's features and roofline (:func:`samples_from_timings`), computed once per kernel, and
    the family errors the adaptive sampler plans from."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._done: dict[tuple[str, float], KernelSample] = {}

    def samples(self, timings: Sequence[KernelTiming]) -> list[KernelSample]:
        todo = [t for t in timings if (t.kernel.digest, t.latency_us) not in self._done]
        for timing, sample in zip(todo, samples_from_timings(todo, self.profile), strict=True):
            self._done[(timing.kernel.digest, timing.latency_us)] = sample
        return [self._done[(t.kernel.digest, t.latency_us)] for t in timings]

    def family_errors(self, timings: Sequence[KernelTiming]) -> dict[str, FamilyErrors]:
        """Per family with at least 4 timed kernels: its held-out error (the calibration models' kernels left
        out model by model, :func:`~layerscope.analysis.predictor.family_errors`) and each generated kernel's
        own, by configuration."""
        return family_errors(self.samples(timings))


def model_context(predictor: Predictor, wholes: Sequence[tuple[Path, float]],
                  shapes: Mapping[str, tuple[int, ...]], profile: Profile) -> Context:
    """The in-model :class:`Context` fitted to the calibration models' whole P50 (``wholes``) against the sum of
    their kernels' predictions alone (``predictor`` without context)."""
    rows, medians = [], []
    for path, measured_us in wholes:
        graph = load_model(path, dict(shapes) or None)
        pred = predict_path(predictor, graph, estimate_graph(graph, profile, "fp32"))
        rows.append((measured_us, sum(k.latency_us for k in pred.kernels), len(pred.kernels)))
        medians.append(statistics.median(k.isolated_us for k in pred.kernels) if pred.kernels else 0.0)
    calls = predictor.calls
    return fit_context(rows, calls.empty_us if calls.empty_us > 0 else predictor.overhead_us, medians_us=medians)
