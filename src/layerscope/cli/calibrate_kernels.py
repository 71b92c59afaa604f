"""``layerscope calibrate --kernels [MODEL...] -o P.json``: sample kernels, time them on ONNX Runtime, fit the
kernel-level latency predictor (issue #18) that ``layerscope estimate MODEL --predictor P.json`` uses.

The kernels: every distinct kernel of the calibration MODELs (ONNX Runtime's optimized graph, through the
fusion map), then generated single-kernel models of every family (:mod:`layerscope.measure.kernels`),
interleaved so that any budget covers every family, for half the budget; the rest goes to the families, and the
regions of their configuration space, where the 3-fold cross-validated error of what was timed so far is highest
(:func:`~layerscope.measure.kernels.adaptive_sample`; ``--no-adaptive``: round-robin to the end). Timed with
``--threads`` intra-op threads (default 1) in the bisect cache (``--cache``; rerun the same command to resume),
until ``--budget`` is spent (cached kernels are free). Then each calibration MODEL is timed whole (its P50, same
runner and cache) and the in-model context (what a kernel costs inside a model beyond its time alone) is fitted
to them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich import box
from rich.table import Table
from rich.text import Text

from layerscope.analysis.fusion_rules import learn_rules
from layerscope.analysis.predictor import (
    Context,
    FamilyFit,
    KernelSample,
    Predictor,
    cross_validated,
    fit_context,
    fit_predictor,
    predict_path,
    samples_from_timings,
)
from layerscope.cli.console import SafeConsole
from layerscope.cli.options import selected_backend
from layerscope.cli.progress import phase_progress
from layerscope.errors import InputError
from layerscope.estimate import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import (
    FAMILIES,
    FamilyErrors,
    KernelModel,
    KernelRunner,
    KernelTiming,
    TimingConfig,
    adaptive_sample,
    model_kernels,
    time_kernels,
    time_models,
)
from layerscope.measure.openvino_backend import OpenVinoBackend
from layerscope.measure.runners import CommandRunner
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.targets import load_profile
from layerscope.targets.host import cache_dir
from layerscope.targets.profile import Profile


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


def kernel_runner(backend_name: str, command: CommandRunner | None) -> KernelRunner:
    """What times the kernels: ``command`` (``--run-cmd``, the runner ``bisect`` uses), else ``--backend``
    (OpenVINO with ``--device`` and its options; exit 3 when it is not here)."""
    if command is not None:
        if backend_name != "onnxruntime":
            raise click.UsageError("--run-cmd times on a device: leave --backend out")
        return KernelRunner("command", command=command)
    if backend_name == "openvino":
        backend, device = selected_backend(backend_name, "cpu")
        assert isinstance(backend, OpenVinoBackend)
        return KernelRunner("openvino", device, backend.options)
    return KernelRunner()


def run_kernels(*, models: Sequence[Path], output: Path, budget: str, families: str | None, threads: int,
                visits: int, cache: Path | None, shapes: dict[str, tuple[int, ...]], adaptive: bool = True,
                runner: KernelRunner | None = None) -> None:
    """Sample, time, fit and write the predictor; print the fit per family."""
    if output.suffix != ".json":
        raise InputError(f"{output}: the predictor file must be a .json file")
    budget_s = parse_budget(budget)
    chosen = parse_families(families)
    console = SafeConsole()
    config = SessionConfig(threads=threads)
    kernels: list[KernelModel] = []
    runner = runner or KernelRunner()
    groupings: list[tuple[Graph, list[tuple[str, tuple[str, ...]]]]] = []
    for path in models:
        _, found, notes = model_kernels(path, shapes, config, runner, groupings=groupings)
        kernels += found
        console.print(f"{path}: {len(found)} distinct kernel(s)" + (f", {len(notes)} left out" if notes else ""),
                      markup=False, highlight=False)
    store = SampleStore((cache or cache_dir() / "bisect") / "kernels")
    timing = TimingConfig(visits=visits, threads=threads)
    profile = load_profile("host")
    features = _SampleCache(profile)
    runner_info: dict[str, Any] = {}

    with phase_progress({"kernels": "timing kernels"}, {"kernels": "kernels"}) as update:
        def timer(batch: Sequence[KernelModel], left_s: float | None) -> list[KernelTiming]:
            timed, runner_info["overhead_us"], runner_info["identity"] = time_kernels(
                batch, store, timing, budget_s=left_s, progress=lambda done, total: update("kernels", done, total),
                runner=runner)
            return timed

        timings, rounds = adaptive_sample(kernels, chosen, timer, features.family_errors, budget_s=budget_s,
                                          first_share=0.5 if adaptive else 1.0, max_rounds=4 if adaptive else 0)
    overhead_us, identity = runner_info["overhead_us"], runner_info["identity"]
    predictor = fit_predictor(features.samples(timings), identity, profile.name, overhead_us)
    wholes = time_models(models, shapes, store, timing, runner=runner)
    rules = learn_rules(groupings, runner.backend) if groupings and runner.backend != "command" else None
    predictor = dataclasses.replace(predictor, context=model_context(predictor, wholes, shapes, profile),
                                    fusion_rules=rules)
    written = predictor.save(output)
    cached = sum(1 for t in timings if t.cached)
    console.print(f"timed {len(timings)} kernel(s) ({cached} from the cache; {len(kernels)} of the calibration "
                  f"models); per-call overhead {overhead_us:.1f} us")
    for index, round_ in enumerate(rounds[1:], start=1):
        worst = sorted(round_.planned_from.items(), key=lambda kv: -kv[1])[:3]
        console.print(f"adaptive pass {index}: " + ", ".join(f"{f} {n}" for f, n in sorted(round_.timed.items()))
                      + " (worst cross-validated: " + ", ".join(f"{f} {100 * e:.0f}%" for f, e in worst) + ")",
                      markup=False, highlight=False)
    console.print(_fit_table(predictor.families))
    ctx = predictor.context
    if ctx.models:
        console.print(f"in-model context from {ctx.models} calibration model(s)' P50: each kernel x{ctx.factor:.3f} "
                      f"+ {ctx.per_kernel_us:.2f} us; their error under it: median "
                      f"{100 * statistics.median(ctx.errors):.1f}%, max {100 * max(ctx.errors):.1f}%")
    else:
        console.print("in-model context: none (no calibration MODEL was timed whole); kernels are summed as timed")
    if rules is not None:
        fused = sorted(((k, v) for k, v in rules.pairs.items() if rules.fuses("", *k)), key=lambda kv: -kv[1][1])
        console.print(f"fusion rules from {rules.models} model(s): " + ", ".join(
            f"{a}+{b} ({n}/{m})" for (a, b), (n, m) in fused[:8]) + (" ..." if len(fused) > 8 else ""),
            markup=False, highlight=False)
    console.print(f"predictor: {written}")


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
        """Per family with at least 4 timed kernels: its 3-fold cross-validated median |error| and each
        generated kernel's own, by configuration."""
        samples = self.samples(timings)
        out: dict[str, FamilyErrors] = {}
        for family in FAMILIES:
            chosen = [(t, s) for t, s in zip(timings, samples, strict=True) if s.family == family]
            if len(chosen) < 4:
                continue
            _, errors, _ = cross_validated(family, [s for _, s in chosen], folds=3)
            out[family] = (float(np.median(errors)),
                           [(t.kernel.config, float(e)) for (t, _), e in zip(chosen, errors, strict=True)
                            if t.kernel.config])
        return out


def model_context(predictor: Predictor, wholes: Sequence[tuple[Path, float]],
                  shapes: Mapping[str, tuple[int, ...]], profile: Profile) -> Context:
    """The in-model :class:`Context` fitted to the calibration models' whole P50 (``wholes``) against the sum of
    their kernels' predictions alone (``predictor`` without context)."""
    rows = []
    for path, measured_us in wholes:
        graph = load_model(path, dict(shapes) or None)
        pred = predict_path(predictor, graph, estimate_graph(graph, profile, "fp32"))
        rows.append((measured_us, sum(k.isolated_us for k in pred.kernels), len(pred.kernels)))
    return fit_context(rows, predictor.overhead_us)


def _fit_table(fits: Mapping[str, FamilyFit]) -> Table:
    """Per family: kernels, folds, cross-validated median error and share within ±10%, the interval factors."""
    table = Table(title="Kernel predictor: cross-validated error per family", box=box.SIMPLE_HEAD,
                  title_justify="left", pad_edge=False)
    for header in ("family", "kernels", "folds", "median |err|", "within ±10%", "interval"):
        table.add_column(header, justify="left" if header == "family" else "right", no_wrap=True)
    for name, fit in sorted(fits.items()):
        table.add_row(Text(name), str(fit.samples), str(fit.cv_folds), f"{100 * fit.cv_median_abs_error:.1f}%",
                      f"{100 * fit.cv_within_10:.0f}%",
                      f"x{math.exp(fit.residual_low):.2f}..x{math.exp(fit.residual_high):.2f}")
    return table
