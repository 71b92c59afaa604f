"""Differential profiling: per-segment times on a device that only times whole models.

The model is cut after layer k for a set of cuts (:mod:`layerscope.measure.cuts`); each prefix model is
timed by a *runner*, and a segment's time is the difference between the times of the prefixes around it.
With suffixes, the cuts past the middle are timed from the other side: a segment there is the difference of
the suffixes (the layers after a cut, fed the tensors crossing it) around it.

Contract of :func:`run_bisect`:

- **plan**: ``granularity="layer"`` times every cut; ``"segment"`` starts with ``segments`` coarse segments
  of roughly equal estimated time and, while the budget allows, takes ``pilot`` samples of every prefix and
  splits the segments holding the most pilot time (the larger half of the splittable ones per step). The
  budget counts every planned run: pilot runs plus ``repeats`` final runs per model (default: twice the
  coarse plan's final runs). Pilot samples (prefixes only) only choose where to cut; the estimates use the
  final ones;
- **suffixes** (``suffixes=True``): the *meeting cut* m is the inner cut whose larger side (prefix or suffix,
  by estimated time) is smallest. Cuts up to m are timed as prefixes, cuts from m on as suffixes (suffix N,
  with a baseline, is the suffix baseline: Identity on the model's outputs), and the whole model besides.
  A segment's noise grows with the size of the two models it is the difference of (a shared machine's
  interference is roughly proportional to a run's length); this way neither is much more than half the
  model, and a round costs about half as much as timing every prefix. The segments then add up to
  P(m) + S(m) - the baselines, not to the whole model: the difference is what cutting at m costs both sides,
  and comparing them is a check of the method;
- **rounds**: every phase visits its models in order (prefixes by cut, the whole model, suffixes by cut), one
  sample per model and round, each round in the opposite direction of the one before, so neighbouring models
  are always timed back to back and drift of the machine (other processes, clocks, heat) hits both alike;
- **cache**: each sample is appended to ``store`` under the key sha256(serialized model + runner
  identity) as soon as it is measured, atomically; stored samples are reused, never re-measured, so an
  interrupted bisect resumes where it stopped (the same cache gives the same pilot samples, hence the
  same plan);
- **estimates**: with ``statistic="median"`` (devices: their tools print an average, noise is roughly
  symmetric), per round r and segment k the paired difference d[k, r] = t[k, r] - t[k-1, r] of the
  prefixes around it (on the suffix side, the suffix before the segment minus the one after), and the
  increment is the median of d[k, :] over the ``repeats`` rounds; with
  ``"p10"`` (a CPU shared with other work, where interference only ever adds time) the increment is
  P10(t[k, :]) - P10(t[k-1, :]), the difference of the prefixes' 10th percentiles over the rounds (linear
  interpolation): the least disturbed level, less at the mercy of one lucky run than ``"min"``
  (min(t[k, :]) - min(t[k-1, :])). Differences of levels add up exactly to the last prefix minus the first;
  medians of differences do not. Without a baseline the first segment is measured from 0 (fixed runtime
  cost included). Confidence intervals are percentile bootstraps over rounds (``resamples`` resamples,
  seeded by ``seed``, rounds kept paired); an increment is *significant* when its interval excludes 0.
  Negative increments are reported as measured, never clipped. The sum of the increments is not forced to
  equal the whole model's time: comparing them (with the baseline) is a check of the method;
- **boundary correction** (``boundary_runs > 0``, runners that can see inside a run): a cut makes the crossing
  tensors outputs of the prefix and inputs of the suffix, and a runtime may spend time on that which the
  whole model never does (ONNX Runtime converts a prefix's output back from its blocked NCHWc layout with a
  ReorderOutput kernel, 20-150 µs per cut on SqueezeNet, and a suffix's input into it with ReorderInput).
  After the final rounds the runner times exactly those kernels in each model (:class:`BoundaryCost`,
  ``boundary_runs`` profiled runs) and their level under ``statistic`` is subtracted from every sample of
  the model before the increments are taken. The baselines and the whole model get no correction, so
  prefix increments still add up to whole - baseline. The correction is a constant per model: the intervals
  do not include its own uncertainty;
- **failures**: a device command that exits non-zero, times out or cannot start raises
  :class:`DeviceCommandError` (exit 3) with its exit code and the tail of its output; output the latency
  regex / JSON field cannot read, and templates or options that cannot work, raise ``InputError`` (exit 2).

Runners: :class:`OrtRunner` (ONNX Runtime in this process: one sample = one timed ``session.run`` call, or
the fastest of ``runs_per_visit``; a suffix is fed what its prefix computes from the model's inputs) and
:class:`CommandRunner` (a shell command template per sample, e.g. ``'hb_compile ... {model} && ssh board
hrt_model_exec perf --model_file {compiled}'``, the latency read from its output by a regex or a JSON field).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shlex
import signal
import string
import subprocess
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import onnx

from layerscope.errors import BackendUnavailable, InputError
from layerscope.fileio import write_atomic
from layerscope.measure.cuts import Cut, CutPlanner, Segment
from layerscope.measure.fusion import LAYOUT_OPS
from layerscope.measure.ort_profile import load_events, parse_profile
from layerscope.measure.profile import Measurement, layer_series
from layerscope.measure.session import SessionConfig, machine_info, make_session
from layerscope.measure.stats import PERCENTILE_METHOD
from layerscope.run import save_run
from layerscope.targets.host import cache_dir

__all__ = [
    "PLACEHOLDERS",
    "UNITS",
    "BisectConfig",
    "BisectResult",
    "BoundaryCost",
    "Clock",
    "CommandRunner",
    "CommandTemplate",
    "DeviceCommandError",
    "Job",
    "LatencyReader",
    "OrtRunner",
    "PrefixResult",
    "Runner",
    "SampleStore",
    "SegmentCheck",
    "SegmentResult",
    "Side",
    "Statistic",
    "add_bisect",
    "bootstrap_increments",
    "compare_with_profile",
    "default_cache_dir",
    "increments",
    "level",
    "profile_latency_us",
    "profile_segment_us",
    "round_matrix",
    "run_bisect",
]

#: progress(phase, done, total): phases ``"pilot-0"``, ``"pilot-1"``, ... and ``"measure"``.
Progress = Callable[[str, float, float], None]
Granularity = Literal["segment", "layer"]
#: ``"pilot"`` samples choose where to refine; ``"final"`` samples give the estimates.
Phase = Literal["pilot", "final"]
#: How rounds become an increment: ``"median"`` of the paired differences, or the difference of the
#: prefixes' 10th percentile (``"p10"``) or minimum (``"min"``) over the rounds (for CPUs shared with other
#: work: interference only adds time).
Statistic = Literal["median", "min", "p10"]
#: A cut's ``"prefix"`` (the layers before it) or ``"suffix"`` (the layers after it, fed what crosses it).
Side = Literal["prefix", "suffix"]
#: What :class:`OrtRunner` times: elapsed time, or the calling thread's CPU time.
Clock = Literal["wall", "cpu"]

#: Placeholders of a command template: the prefix model, a path for the compiled artifact, a file the
#: command may write its report to (read instead of the output when the template names it), its folder.
PLACEHOLDERS = ("model", "compiled", "out", "dir")
#: Latency units a regex group or ``--latency-unit`` may name -> microseconds per unit.
UNITS: Mapping[str, float] = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


class DeviceCommandError(BackendUnavailable):
    """The device command failed: non-zero exit, timeout, or it could not start (exit 3)."""


def default_cache_dir() -> Path:
    """``$LAYERSCOPE_CACHE_DIR/bisect`` (else the user cache folder's ``layerscope/bisect``)."""
    return cache_dir() / "bisect"


# ----------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class BisectConfig:
    """How to bisect. ``budget_runs`` ``None``: twice the coarse plan (segments), every cut (layers)."""

    granularity: Granularity = "segment"
    segments: int = 12
    repeats: int = 10
    pilot: int = 3
    budget_runs: int | None = None
    baseline: bool = True
    statistic: Statistic = "median"
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    #: Profiled runs per prefix that time its boundary cost (:class:`BoundaryCost`); 0: no correction.
    boundary_runs: int = 0
    #: Time the cuts past the middle as suffixes (see the module docstring).
    suffixes: bool = False

    def __post_init__(self) -> None:
        if self.segments < 1 or self.repeats < 1 or self.pilot < 1 or self.boundary_runs < 0:
            raise ValueError("BisectConfig: segments, repeats and pilot must be >= 1, boundary_runs >= 0")
        if self.statistic not in ("median", "min", "p10"):
            raise ValueError(f"BisectConfig: unknown statistic {self.statistic!r}")
        if not 0 < self.confidence < 1 or self.resamples < 1:
            raise ValueError("BisectConfig: 0 < confidence < 1 and resamples >= 1")


@dataclass(frozen=True)
class Job:
    """One model to time: its cut and side, cache key, model file (written before its first sample) and a
    label; a suffix's ``feeds_model`` is the prefix model whose outputs are the suffix's inputs."""

    cut: Cut
    key: str
    model_path: Path
    label: str
    side: Side = "prefix"
    feeds_model: Path | None = None


@dataclass(frozen=True)
class BoundaryCost:
    """What a runtime spends in one prefix to hand the tensors crossing its cut out as outputs, work the
    whole model does not do: per profiled run, the summed time (µs) of ``kernels`` (the runtime's names of
    the kernels doing it; none: the cut costs nothing measurable of that kind, ``samples_us`` is ``(0.0,)``)."""

    samples_us: tuple[float, ...]
    kernels: tuple[str, ...]

    def level_us(self, statistic: Statistic) -> float:
        """:func:`level` of the per-run sums: what is subtracted from each of the prefix's samples."""
        return float(level(np.asarray(self.samples_us, dtype=np.float64), statistic)) if self.samples_us else 0.0


NO_BOUNDARY_COST = BoundaryCost(samples_us=(0.0,), kernels=())


@dataclass(frozen=True)
class PrefixResult:
    """One timed model, a prefix or (``side``) a suffix: its final samples (µs, round order), its pilot
    samples, how many of both were measured in this session (the rest came from the cache), and its boundary
    cost (``None``: not measured)."""

    cut: Cut
    key: str
    label: str
    samples_us: tuple[float, ...]
    pilot_us: tuple[float, ...]
    measured_now: int
    boundary: BoundaryCost | None = None
    side: Side = "prefix"

    def value_us(self, statistic: Statistic) -> float:
        """The prefix's time as timed: :func:`level` of its final samples."""
        return float(level(np.asarray(self.samples_us, dtype=np.float64), statistic))

    def boundary_us(self, statistic: Statistic) -> float:
        """What the boundary correction subtracts from each sample (0 when not measured)."""
        return self.boundary.level_us(statistic) if self.boundary is not None else 0.0


@dataclass(frozen=True)
class SegmentResult:
    """A segment's increment (µs) with its bootstrap interval; ``samples`` = the rounds it comes from;
    ``boundary_us``: the boundary correction's share of it (increment as timed = ``increment_us`` +
    ``boundary_us``)."""

    segment: Segment
    increment_us: float
    ci_low_us: float
    ci_high_us: float
    samples: int
    boundary_us: float = 0.0

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        return self.ci_low_us > 0 or self.ci_high_us < 0

    @property
    def negative(self) -> bool:
        return self.increment_us < 0


@dataclass(frozen=True)
class BisectResult:
    """A finished bisect: the prefixes in cut order (the whole model last), the suffixes in cut order (from
    ``meet``, the cut where the two sides meet; none without suffixes), the segments, the plan's settings."""

    config: BisectConfig
    runner: Mapping[str, Any]
    prefixes: tuple[PrefixResult, ...]
    segments: tuple[SegmentResult, ...]
    refinements: int
    budget_runs: int
    pilot_runs: int
    sum_ci_us: tuple[float, float]
    cache_dir: str | None
    layer_count: int
    suffixes: tuple[PrefixResult, ...] = ()
    meet: int | None = None

    @property
    def full_us(self) -> float:
        """The whole model's time: the last prefix (the model itself) under the config's statistic."""
        return self.prefixes[-1].value_us(self.config.statistic)

    @property
    def baseline_us(self) -> float | None:
        """The runtime's fixed cost per call (the Identity model), ``None`` without a baseline."""
        return self.prefixes[0].value_us(self.config.statistic) if self.config.baseline else None

    @property
    def suffix_baseline_us(self) -> float | None:
        """The suffix side's fixed cost per call (Identity on the outputs), ``None`` without it."""
        return self.suffixes[-1].value_us(self.config.statistic) if self.suffixes and self.config.baseline else None

    @property
    def sum_segments_us(self) -> float:
        return sum(s.increment_us for s in self.segments)

    @property
    def runs(self) -> int:
        """Samples of this bisect, pilot and final, cached or not."""
        return sum(len(p.samples_us) + len(p.pilot_us) for p in (*self.prefixes, *self.suffixes))

    @property
    def runs_measured(self) -> int:
        """Samples measured in this session (the rest came from the cache)."""
        return sum(p.measured_now for p in (*self.prefixes, *self.suffixes))


# ---------------------------------------------------------------------------------------- cache
class SampleStore:
    """Samples per prefix key and phase, and the prefix's :class:`BoundaryCost`: a folder of JSON files written
    atomically, one per key, or memory only.

    A file holds ``{key, cut, label, runner, pilot_us, samples_us, boundary}`` (``samples_us``: the final
    phase, in round order; ``boundary``: ``{samples_us, kernels}`` or ``null``); one that cannot be read
    counts as empty and is overwritten by the next sample.
    """

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, _Entry] = {}

    def samples(self, key: str, phase: Phase = "final") -> list[float]:
        """The samples of ``key`` in ``phase``, oldest first."""
        return list(self._entry(key).samples[phase])

    def boundary(self, key: str) -> BoundaryCost | None:
        """The boundary cost measured for ``key``, ``None`` when there is none yet."""
        return self._entry(key).boundary

    def add(self, key: str, phase: Phase, sample_us: float, *, job: Job, runner: Mapping[str, Any]) -> None:
        """Append one sample and write the entry (atomically) before returning."""
        self._entry(key).samples[phase].append(round(float(sample_us), 3))
        self._write(key, job, runner)

    def set_boundary(self, key: str, cost: BoundaryCost, *, job: Job, runner: Mapping[str, Any]) -> None:
        """Record ``key``'s boundary cost and write the entry (atomically) before returning."""
        self._entry(key).boundary = BoundaryCost(tuple(round(float(v), 3) for v in cost.samples_us), cost.kernels)
        self._write(key, job, runner)

    def _write(self, key: str, job: Job, runner: Mapping[str, Any]) -> None:
        if self.directory is None:
            return
        entry = self._entry(key)
        boundary = entry.boundary
        record = {"key": key, "cut": job.cut.layers, "side": job.side, "label": job.label, "runner": dict(runner),
                  "pilot_us": entry.samples["pilot"], "samples_us": entry.samples["final"],
                  "boundary": None if boundary is None else {"samples_us": list(boundary.samples_us),
                                                             "kernels": list(boundary.kernels)}}
        save_run(record, self._path(key))  # the run file's atomic JSON writer

    def _entry(self, key: str) -> _Entry:
        if key not in self._memory:
            self._memory[key] = self._read(key)
        return self._memory[key]

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / "samples" / key[:2] / f"{key}.json"

    def _read(self, key: str) -> _Entry:
        if self.directory is None:
            return _Entry()
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            entry = _Entry({"pilot": [float(v) for v in data["pilot_us"]],
                            "final": [float(v) for v in data["samples_us"]]})
        except (OSError, ValueError, KeyError, TypeError):
            return _Entry()
        try:
            boundary = data.get("boundary")
            if isinstance(boundary, Mapping):
                samples = tuple(float(v) for v in boundary["samples_us"])
                if samples:
                    entry.boundary = BoundaryCost(samples, tuple(str(k) for k in boundary["kernels"]))
        except (ValueError, KeyError, TypeError):
            pass  # an unreadable boundary is measured again; the samples stay
        return entry


@dataclass
class _Entry:
    """One cache entry in memory (mutable: samples are appended as they come)."""

    samples: dict[Phase, list[float]] = field(default_factory=lambda: {"pilot": [], "final": []})
    boundary: BoundaryCost | None = None


# -------------------------------------------------------------------------------------- runners
class Runner(Protocol):
    """Times one prefix model per call to :meth:`measure` (one sample, µs)."""

    @property
    def identity(self) -> Mapping[str, Any]:
        """What the samples depend on besides the model (part of the cache key)."""

    def measure(self, job: Job) -> float:
        """One sample of ``job``'s model, in microseconds."""

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost | None:
        """What ``job``'s prefix spends handing its crossing tensors out that ``whole`` (the whole model) does
        not, over ``runs`` profiled runs; ``None`` when the runner cannot see inside a run."""

    def close(self) -> None:
        """Release sessions, files or connections."""


class OrtRunner:
    """ONNX Runtime in this process. One sample = the fastest of ``runs_per_visit`` timed runs (as
    ``timeit`` advises: slower runs are interference), after ``visit_warmup`` untimed runs (``warmup`` when
    the session is new); at most ``max_sessions`` sessions stay open (least recently used closed first).

    The defaults (one timed run per visit, no untimed one) keep neighbouring prefixes as close in time as
    possible, which is what cancels a shared machine's interference; the run before a visit is the
    neighbouring prefix, which shares all its layers but one segment, so the caches are warm.

    ``clock="wall"`` times ``session.run`` with ``perf_counter``; ``"cpu"`` with the calling thread's CPU time,
    which does not count the time other processes hold the core. ``"cpu"`` needs ``threads == 1`` (ONNX
    Runtime then runs every kernel on the calling thread; pool threads' time would be missed): ``InputError``
    otherwise. Runs are timed on the calling thread for that reason (not through ``measure.bench``).
    """

    def __init__(self, config: SessionConfig, feeds: Mapping[str, np.ndarray], *, runs_per_visit: int = 1,
                 visit_warmup: int = 0, warmup: int = 2, clock: Clock = "wall", max_sessions: int = 32) -> None:
        import onnxruntime as ort

        if clock == "cpu" and config.threads != 1:
            raise InputError(f"--clock cpu needs --threads 1 (got {config.threads}): with more threads the work "
                             "runs on pool threads whose CPU time the calling thread does not see")
        if runs_per_visit < 1 or visit_warmup < 0 or warmup < 0:
            raise ValueError("OrtRunner: runs_per_visit >= 1, visit_warmup >= 0, warmup >= 0")
        self.config = config
        self.feeds = dict(feeds)
        self.runs_per_visit = runs_per_visit
        self.visit_warmup = visit_warmup
        self.warmup = warmup
        self.max_sessions = max_sessions
        self._clock_ns = time.thread_time_ns if clock == "cpu" else time.perf_counter_ns
        self._sessions: OrderedDict[str, Any] = OrderedDict()
        self._converted: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._suffix_feeds: dict[str, dict[str, np.ndarray]] = {}
        machine = machine_info()
        digest = hashlib.sha256()
        for name, array in sorted(self.feeds.items()):
            digest.update(name.encode() + b"\0" + str(array.dtype).encode() + str(array.shape).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        self._identity = {
            "runner": "onnxruntime", "version": ort.__version__, "provider": config.provider,
            "threads": config.threads, "inter_op_threads": config.inter_op_threads, "opt_level": config.opt_level,
            "runs_per_visit": runs_per_visit, "visit_statistic": "min", "visit_warmup": visit_warmup,
            "warmup": warmup, "clock": clock, "inputs_sha256": digest.hexdigest(),
            "hostname": machine["hostname"], "cpu": machine["cpu"],
        }

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def measure(self, job: Job) -> float:
        session, new = self._session(job)
        feeds = self.feeds_for(job)
        for _ in range(self.warmup if new else self.visit_warmup):
            self._run(session, feeds)
        return min(self._run(session, feeds) for _ in range(self.runs_per_visit)) / 1e3

    def feeds_for(self, job: Job) -> Mapping[str, np.ndarray]:
        """The model's feeds for a prefix; for a suffix, the values its feeding prefix computes from them
        (computed once per suffix) and the model inputs it reads."""
        if job.feeds_model is None:
            return self.feeds
        if job.key not in self._suffix_feeds:
            session = self._session(job)[0]
            prefix = make_session(job.feeds_model, self.config)
            values = dict(zip([o.name for o in prefix.get_outputs()], prefix.run(None, self.feeds), strict=True))
            values.update(self.feeds)
            self._suffix_feeds[job.key] = {i.name: values[i.name] for i in session.get_inputs()}
        return self._suffix_feeds[job.key]

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost:
        """The layout kernels (:data:`~layerscope.measure.fusion.LAYOUT_OPS`: ReorderOutput from the blocked
        NCHWc layout, ReorderInput into it) of the model's optimized graph that produce one of its outputs or
        read one of its inputs, unless the whole model's optimized graph has a layout kernel producing /
        reading that tensor too; their summed time per run from ONNX Runtime's profiler over ``runs`` runs
        (after :attr:`warmup` runs). A model without such kernels is not run: :data:`NO_BOUNDARY_COST`."""
        if whole.key not in self._converted:
            nodes = [n for n in self._optimized(whole.model_path).node if n.op_type in LAYOUT_OPS]
            self._converted[whole.key] = (frozenset(o for n in nodes for o in n.output),
                                          frozenset(i for n in nodes for i in n.input))
        produced, read = self._converted[whole.key]
        with tempfile.TemporaryDirectory(prefix="layerscope-boundary-") as tmp:
            optimized_path = Path(tmp) / "optimized.onnx"
            session = make_session(job.model_path, self.config, profile_prefix=str(Path(tmp) / "ort"),
                                   optimized_model_path=str(optimized_path))
            try:
                graph = onnx.load(str(optimized_path), load_external_data=False).graph
                outputs = {o.name for o in graph.output} - produced
                inputs = {i.name for i in graph.input} - read
                kernels = tuple(node.name for node in graph.node if node.op_type in LAYOUT_OPS
                                and (set(node.output) & outputs or set(node.input) & inputs))
                if kernels:
                    feeds = self.feeds_for(job)
                    for _ in range(self.warmup + runs):
                        self._run(session, feeds)
            finally:
                profile_file = session.end_profiling()
            if not kernels:
                return NO_BOUNDARY_COST
            data = parse_profile(load_events(profile_file), skip_runs=self.warmup)
        sums = np.zeros(len(data.run_durations_us))
        for kernel in data.kernels:
            if kernel.name in kernels:
                sums += np.asarray(kernel.durations_us, dtype=np.float64)
        return BoundaryCost(samples_us=tuple(float(v) for v in sums), kernels=kernels)

    def _optimized(self, model_path: Path) -> onnx.GraphProto:
        """The graph ONNX Runtime runs for ``model_path`` under this runner's session settings."""
        with tempfile.TemporaryDirectory(prefix="layerscope-boundary-") as tmp:
            optimized_path = Path(tmp) / "optimized.onnx"
            make_session(model_path, self.config, optimized_model_path=str(optimized_path))
            return onnx.load(str(optimized_path), load_external_data=False).graph

    def _run(self, session: Any, feeds: Mapping[str, np.ndarray]) -> int:
        """One ``session.run`` timed in ns; ONNX Runtime's own failures are ``InputError`` (exit 2)."""
        clock = self._clock_ns
        try:
            start = clock()
            session.run(None, feeds)
            return clock() - start
        except Exception as exc:
            if not type(exc).__module__.startswith("onnxruntime"):
                raise
            text = str(exc).strip()
            raise InputError(f"ONNX Runtime failed running a prefix: {text.splitlines()[0] if text else exc!r}",
                             hint="check the inputs; rerun with --debug for details") from exc

    def _session(self, job: Job) -> tuple[Any, bool]:
        if job.key in self._sessions:
            self._sessions.move_to_end(job.key)
            return self._sessions[job.key], False
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session = make_session(job.model_path, self.config)
        self._sessions[job.key] = session
        return session, True

    def close(self) -> None:
        self._sessions.clear()
        self._suffix_feeds.clear()


@dataclass(frozen=True)
class CommandTemplate:
    """A shell command line with ``{model}``-style placeholders (:data:`PLACEHOLDERS`; ``{{``/``}}`` for
    literal braces). Values are shell-quoted when rendered."""

    text: str
    option: str
    fields: frozenset[str]

    @classmethod
    def parse(cls, text: str, option: str) -> CommandTemplate:
        """Check ``text``: known placeholders only, balanced braces; ``InputError`` (exit 2) otherwise."""
        try:
            names = {name for _, name, spec, conv in string.Formatter().parse(text) if name is not None}
        except ValueError as exc:
            raise InputError(f"{option} {text!r}: {exc}", hint="write literal braces as {{ and }}") from None
        unknown = sorted(n for n in names if n not in PLACEHOLDERS)
        if unknown:
            raise InputError(f"{option} {text!r}: unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)}",
                             hint=f"use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        if not text.strip():
            raise InputError(f"{option}: empty command")
        return cls(text=text, option=option, fields=frozenset(names))

    def render(self, values: Mapping[str, str]) -> str:
        return self.text.format(**{k: shlex.quote(v) for k, v in values.items()})


@dataclass(frozen=True)
class LatencyReader:
    """Reads one latency from a command's output: the *last* match of ``pattern`` (its group ``latency``,
    else its first group; a group ``unit`` overrides ``unit``), or the number at ``json_field`` (dotted
    path, list indexes as numbers) of the output's JSON document (else of its last line that is JSON)."""

    pattern: re.Pattern[str] | None
    json_field: tuple[str, ...] | None
    unit: str

    @classmethod
    def create(cls, regex: str | None, json_field: str | None, unit: str = "ms") -> LatencyReader:
        """Check the options; ``InputError`` (exit 2) when they cannot work."""
        if (regex is None) == (json_field is None):
            raise InputError("give exactly one of --latency-regex and --latency-json with --run-cmd")
        if unit not in UNITS:
            raise InputError(f"--latency-unit {unit!r}: choose from {', '.join(UNITS)}")
        if json_field is not None:
            path = tuple(json_field.split("."))
            if not all(path):
                raise InputError(f"--latency-json {json_field!r}: expected a dotted path such as perf.latency_ms")
            return cls(pattern=None, json_field=path, unit=unit)
        assert regex is not None
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise InputError(f"--latency-regex {regex!r}: not a valid regular expression ({exc})") from None
        if pattern.groups < 1:
            raise InputError(f"--latency-regex {regex!r}: needs a group around the number, "
                             r"e.g. 'latency: ([0-9.]+) ms'")
        return cls(pattern=pattern, json_field=None, unit=unit)

    @property
    def describe(self) -> str:
        if self.pattern is not None:
            return f"regex {self.pattern.pattern!r} ({self.unit})"
        return f"json {'.'.join(self.json_field or ())} ({self.unit})"

    def read(self, text: str, where: str) -> float:
        """The latency in µs; ``InputError`` naming ``where`` and the output's tail when it is not there."""
        value, unit = self._regex(text) if self.pattern is not None else self._json(text)
        if value is None:
            raise InputError(f"{where}: {self.describe} found no latency in the output; last output: "
                             f"{_tail(text)}", hint="check --latency-regex / --latency-json against it")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{where}: {self.describe} read {value!r}, which is not a number") from None
        unit = (unit or self.unit).strip()
        if unit not in UNITS or not math.isfinite(number) or number < 0:
            raise InputError(f"{where}: {self.describe} read {value!r} {unit}: not a latency "
                             f"(units: {', '.join(UNITS)})")
        return number * UNITS[unit]

    def _regex(self, text: str) -> tuple[Any, str | None]:
        assert self.pattern is not None
        matches = list(self.pattern.finditer(text))
        if not matches:
            return None, None
        last = matches[-1]
        groups = last.groupdict()
        return (groups["latency"] if "latency" in groups else last.group(1)), groups.get("unit")

    def _json(self, text: str) -> tuple[Any, str | None]:
        document = _json_document(text)
        for part in self.json_field or ():
            if isinstance(document, Mapping) and part in document:
                document = document[part]
            elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
                document = document[int(part)]
            else:
                return None, None
        return (document if isinstance(document, int | float | str) and not isinstance(document, bool)
                else None), None


class CommandRunner:
    """Runs ``run`` (and ``compile`` once per prefix in this session, when given) as shell commands in the
    prefix's own folder; one sample = the latency ``reader`` finds in the run command's output."""

    def __init__(self, run: CommandTemplate, reader: LatencyReader, *, compile: CommandTemplate | None = None,
                 timeout_s: float | None = None) -> None:
        if "model" not in run.fields | (compile.fields if compile else frozenset()):
            raise InputError(f"{run.option} {run.text!r}: the command never names {{model}}, so every prefix "
                             "would run the same thing", hint="pass the prefix model as {model}")
        self.run = run
        self.compile = compile
        self.reader = reader
        self.timeout_s = timeout_s
        self._compiled: set[str] = set()
        self._identity = {"runner": "command", "run_cmd": run.text, "compile_cmd": compile.text if compile else None,
                          "latency": reader.describe}

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def measure(self, job: Job) -> float:
        folder = job.model_path.parent
        values = {"model": str(job.model_path), "compiled": str(folder / "compiled"), "out": str(folder / "out.txt"),
                  "dir": str(folder)}
        if self.compile is not None and job.key not in self._compiled:
            self._shell(self.compile, values, job)
            self._compiled.add(job.key)
        out_file = folder / "out.txt"
        if "out" in self.run.fields:
            out_file.unlink(missing_ok=True)
        stdout, stderr = self._shell(self.run, values, job)
        where = f"{self.run.option} on {job.label}"
        if "out" in self.run.fields:
            try:
                text = out_file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                raise InputError(f"{where}: the command did not write {{out}} ({out_file})") from None
        else:
            text = stdout if self.reader.json_field is not None else f"{stdout}\n{stderr}"
        return self.reader.read(text, where)

    def _shell(self, template: CommandTemplate, values: Mapping[str, str], job: Job) -> tuple[str, str]:
        command = template.render(values)
        code, stdout, stderr = _run_shell(command, self.timeout_s, job.model_path.parent)
        if code is None:
            raise DeviceCommandError(f"{template.option} timed out after {self.timeout_s:g} s on {job.label}: "
                                     f"{command}; last output: {_tail(stdout + stderr)}")
        if code != 0:
            hint = ("the baseline is an Identity-only model; if the toolchain cannot compile it, use --no-baseline"
                    if job.cut.layers == 0 else None)
            raise DeviceCommandError(f"{template.option} exited with code {code} on {job.label}: {command}; "
                                     f"last output: {_tail(stdout + stderr)}", hint=hint)
        return stdout, stderr

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        """``None``: a device command times whole runs only."""
        return None

    def close(self) -> None:
        self._compiled.clear()


def _run_shell(command: str, timeout_s: float | None, cwd: Path) -> tuple[int | None, str, str]:
    """(exit code or ``None`` on timeout, stdout, stderr); the whole process group is killed on timeout or
    Ctrl-C."""
    try:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        raise DeviceCommandError(f"cannot start the device command {command!r}: {exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        return None, stdout, stderr
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise
    return proc.returncode, stdout, stderr


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - Windows
        proc.kill()


def _tail(text: str, lines: int = 6, chars: int = 500) -> str:
    """The last lines of ``text`` on one line, joined by `` | ``."""
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    joined = " | ".join(kept)
    return repr(joined[-chars:]) if joined else "(no output)"


def _json_document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


# ------------------------------------------------------------------------------------- bootstrap
def round_matrix(series: Sequence[Sequence[float]], rounds: int, *, baseline: bool = True) -> np.ndarray:
    """``(prefixes, rounds)``: the first ``rounds`` samples of each prefix, in round order; without
    ``baseline`` a row of zeros first (the first segment is then measured from nothing)."""
    matrix = np.array([list(values[:rounds]) for values in series], dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != rounds:
        raise ValueError(f"round_matrix: every prefix needs {rounds} samples")
    return matrix if baseline else np.vstack([np.zeros((1, rounds)), matrix])


def level(values: np.ndarray, statistic: Statistic) -> np.ndarray:
    """``statistic`` over the last axis: median, minimum, or 10th percentile (numpy's linear method)."""
    if statistic == "min":
        return np.asarray(values.min(axis=-1))
    if statistic == "p10":
        return np.asarray(np.quantile(values, 0.1, axis=-1, method=PERCENTILE_METHOD))
    return np.asarray(np.median(values, axis=-1))


def increments(matrix: np.ndarray, statistic: Statistic) -> np.ndarray:
    """Per segment (consecutive rows of a :func:`round_matrix`): the median over rounds of the paired
    differences, or (``"min"``, ``"p10"``) the difference of the rows' :func:`level`. Axis 0 is the prefix;
    the rounds are the last axis."""
    if statistic == "median":
        return np.asarray(np.median(np.diff(matrix, axis=0), axis=-1))
    return np.asarray(np.diff(level(matrix, statistic), axis=0))


def bootstrap_increments(matrix: np.ndarray, statistic: Statistic, resamples: int, seed: int) -> np.ndarray:
    """``(segments, resamples)``: :func:`increments` under ``resamples`` bootstrap resamples of the rounds
    (one resample of round indices for every prefix: the rounds stay paired), seeded by ``seed``."""
    rounds = matrix.shape[1]
    indices = np.random.default_rng(seed).integers(0, rounds, (resamples, rounds))
    chunks = [increments(matrix[:, block], statistic) for block in np.array_split(indices, max(1, resamples // 256))]
    return np.concatenate(chunks, axis=1)


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return float(low), float(high)


# ------------------------------------------------------------------------------------ the bisect
def run_bisect(planner: CutPlanner, runner: Runner, config: BisectConfig, store: SampleStore, *, workdir: Path,
               progress: Progress | None = None, after_round: Callable[[int], None] | None = None) -> BisectResult:
    """Plan, measure and estimate (see the module docstring). Prefix models are written under ``workdir``;
    ``after_round(r)`` is called after each final round this session measures (to interleave other work)."""
    return _Bisect(planner, runner, config, store, workdir=workdir, progress=progress,
                   after_round=after_round).run()


class _Bisect:
    """One bisect in progress: the jobs prepared so far and the samples each had before this session."""

    def __init__(self, planner: CutPlanner, runner: Runner, config: BisectConfig, store: SampleStore, *,
                 workdir: Path, progress: Progress | None, after_round: Callable[[int], None] | None) -> None:
        self.planner, self.runner, self.config, self.store = planner, runner, config, store
        self.workdir, self.progress, self.after_round = workdir, progress, after_round
        self.jobs: dict[tuple[Side, int], Job] = {}
        self.cached: dict[str, int] = {}
        self.pilot_runs = 0

    def run(self) -> BisectResult:
        config, planner = self.config, self.planner
        layers = config.granularity == "layer"
        cuts = planner.layer_cuts(config.baseline) if layers else planner.coarse_cuts(config.segments, config.baseline)
        budget = config.budget_runs if config.budget_runs is not None else \
            self.models(cuts) * config.repeats * (1 if layers else 2)
        if self.models(cuts) * config.repeats > budget:
            raise InputError(f"--budget {budget} runs is too small: {self.models(cuts)} models x {config.repeats} "
                             f"repeats need {self.models(cuts) * config.repeats}",
                             hint="raise --budget, or lower --segments or --repeats")
        cuts, refinements = (cuts, 0) if layers else self.refine(cuts, budget)
        meet = self.meeting_cut(cuts)
        n = planner.layer_count
        prefix_cuts = cuts if meet is None else (*(c for c in cuts if c <= meet), n)
        suffix_cuts = () if meet is None else (*(c for c in cuts if meet <= c < n), *((n,) if config.baseline else ()))
        jobs = [*(self.job(c) for c in prefix_cuts), *(self.job(c, "suffix") for c in suffix_cuts)]
        self.measure(jobs, "final", config.repeats, "measure")
        corrected = bool(config.boundary_runs) and self.measure_boundaries(jobs)
        prefixes = tuple(self.result(c, "prefix", boundary=corrected) for c in prefix_cuts)
        suffixes = tuple(self.result(c, "suffix", boundary=corrected) for c in suffix_cuts)
        # prefixes up to the meeting cut give the segments before it, suffixes from it on the segments after
        sides = [self.side(prefixes if meet is None else prefixes[:-1])]
        if suffixes:
            sides.append(self.side(tuple(reversed(suffixes))))
        segments, sum_ci = _estimate(planner.segments(cuts), sides, config)
        return BisectResult(config=config, runner=dict(self.runner.identity), prefixes=prefixes, segments=segments,
                            refinements=refinements, budget_runs=budget, pilot_runs=self.pilot_runs,
                            sum_ci_us=sum_ci, cache_dir=str(self.store.directory) if self.store.directory else None,
                            layer_count=planner.layer_count, suffixes=suffixes, meet=meet)

    def models(self, cuts: Sequence[int]) -> int:
        """Models timed per final round for ``cuts``: one per cut, and with suffixes the whole model and the
        meeting cut's suffix besides."""
        return len(cuts) + (2 if self.meeting_cut(cuts) is not None else 0)

    def meeting_cut(self, cuts: Sequence[int]) -> int | None:
        """With :attr:`BisectConfig.suffixes`, the inner cut nearest the middle of the estimated time (the
        larger of its prefix and suffix the smallest): prefixes up to it, suffixes from it; else ``None``."""
        inner = [c for c in cuts if 0 < c < self.planner.layer_count]
        if not self.config.suffixes or not inner:
            return None
        cum = self.planner.cum_us
        return min(inner, key=lambda c: (max(cum[c], cum[-1] - cum[c]), c))

    def side(self, rows: Sequence[PrefixResult]) -> tuple[np.ndarray, list[float]]:
        """The round matrix of ``rows`` (ordered so that consecutive rows differ by one segment, the smaller
        model first), each sample less its row's boundary cost, and each segment's share of that correction."""
        statistic, baseline = self.config.statistic, self.config.baseline
        corrections = [r.boundary_us(statistic) for r in rows]
        matrix = round_matrix([[v - c for v in r.samples_us] for r, c in zip(rows, corrections, strict=True)],
                              self.config.repeats, baseline=baseline)
        return matrix, [float(v) for v in np.diff(corrections if baseline else [0.0, *corrections])]

    def refine(self, cuts: tuple[int, ...], budget: int) -> tuple[tuple[int, ...], int]:
        """Split the segments holding most pilot time while the planned runs (pilot runs, ``repeats`` per
        final model, a pilot for each new prefix) fit ``budget``; (cuts, refinement steps). Pilots time
        prefixes only: they choose where to cut."""
        pilot_n, repeats = self.config.pilot, self.config.repeats
        piloted: set[int] = set()
        step = 0
        while True:
            pilot_needed = pilot_n * len(set(cuts) - piloted)
            room = (budget - self.pilot_runs - pilot_needed - repeats * self.models(cuts)) // (pilot_n + repeats)
            if room <= 0:
                return cuts, step
            self.measure([self.job(c) for c in cuts], "pilot", pilot_n, f"pilot-{step}")
            self.pilot_runs += pilot_needed
            piloted.update(cuts)
            matrix = round_matrix([self.store.samples(self.job(c).key, "pilot") for c in cuts], pilot_n,
                                  baseline=self.config.baseline)
            ranked = []
            for seg, value in zip(self.planner.segments(cuts), increments(matrix, self.config.statistic), strict=True):
                inner = self.planner.split_cut(seg.start, seg.end, measured_us=float(value))
                if inner is not None:
                    ranked.append((float(value), seg.start, inner))
            if not ranked:
                return cuts, step
            ranked.sort(key=lambda item: (-item[0], item[1]))
            chosen = [inner for _, _, inner in ranked[:min(room, (len(ranked) + 1) // 2)]]
            cuts = tuple(sorted({*cuts, *chosen}))
            step += 1

    def job(self, cut: int, side: Side = "prefix") -> Job:
        """The job of ``cut`` on ``side``: its cache key (sha256 of the serialized model and the runner
        identity); a suffix's job also names the prefix model whose outputs feed it."""
        if (side, cut) in self.jobs:
            return self.jobs[side, cut]
        data = self.model(cut, side).SerializeToString(deterministic=True)
        identity = json.dumps(dict(self.runner.identity), sort_keys=True).encode()
        key = hashlib.sha256(data + b"\0" + identity).hexdigest()
        n = self.planner.layer_count
        after = f"layer {self.planner.graph.layers[cut - 1].id!r}" if cut else ""
        if side == "prefix":
            label = "the baseline (Identity model)" if cut == 0 else f"prefix {cut}/{n} (after {after})"
        else:
            label = "the suffix baseline (Identity on the outputs)" if cut == n else \
                f"suffix {cut}/{n} (the layers after {after})"
        folder = self.workdir / key[:16]
        feeds = folder / "feeds.onnx" if side == "suffix" and cut > 0 else None
        self.jobs[side, cut] = Job(cut=self.planner.cut(cut), key=key, model_path=folder / "model.onnx", label=label,
                                   side=side, feeds_model=feeds)
        self.cached.setdefault(key, len(self.store.samples(key, "pilot")) + len(self.store.samples(key, "final")))
        return self.jobs[side, cut]

    def model(self, cut: int, side: Side) -> onnx.ModelProto:
        return self.planner.prefix_model(cut) if side == "prefix" else self.planner.suffix_model(cut)

    def model_file(self, job: Job) -> None:
        """Write ``job``'s model file, and a suffix's feeding prefix, (atomically) unless they are there: only
        models still to be measured."""
        if not job.model_path.exists():
            write_atomic(job.model_path, self.model(job.cut.layers, job.side).SerializeToString(deterministic=True))
        if job.feeds_model is not None and not job.feeds_model.exists():
            write_atomic(job.feeds_model, self.planner.prefix_model(job.cut.layers).SerializeToString(
                deterministic=True))

    def measure(self, jobs: Sequence[Job], phase: Phase, target: int, label: str) -> None:
        """Rounds over ``jobs`` in their order, alternating direction, one sample per model and round, until
        each has ``target`` samples of ``phase``: neighbouring models are timed back to back."""
        have = {j.key: len(self.store.samples(j.key, phase)) for j in jobs}
        total = sum(max(0, target - n) for n in have.values())
        done = 0
        for round_no in range(min(have.values()), target):
            for j in jobs if round_no % 2 == 0 else reversed(jobs):
                if have[j.key] > round_no:
                    continue
                self.model_file(j)
                self.store.add(j.key, phase, self.runner.measure(j), job=j, runner=self.runner.identity)
                have[j.key] += 1
                done += 1
                if self.progress is not None:
                    self.progress(label, done, total)
            if phase == "final" and self.after_round is not None:
                self.after_round(round_no)

    def measure_boundaries(self, jobs: Sequence[Job]) -> bool:
        """Store the :class:`BoundaryCost` of every job that has none yet (the baselines and the whole model
        are the reference: no cost by definition); ``False`` when the runner cannot measure it."""
        n = self.planner.layer_count
        whole = self.job(n)

        def reference(job: Job) -> bool:
            return job.cut.layers == (0 if job.side == "prefix" else n) or job.key == whole.key

        todo = [j for j in jobs if self.store.boundary(j.key) is None]
        todo.sort(key=reference)  # ask the runner first
        for done, job in enumerate(todo, start=1):
            cost: BoundaryCost | None = NO_BOUNDARY_COST
            if not reference(job):
                self.model_file(job)
                self.model_file(whole)
                cost = self.runner.boundary(job, whole, self.config.boundary_runs)
            if cost is None:
                return False
            self.store.set_boundary(job.key, cost, job=job, runner=self.runner.identity)
            if self.progress is not None:
                self.progress("boundary", done, len(todo))
        return True

    def result(self, cut: int, side: Side, *, boundary: bool) -> PrefixResult:
        """The model at ``cut`` on ``side`` from the store, with its boundary cost when ``boundary``."""
        job = self.job(cut, side)
        pilot, final = self.store.samples(job.key, "pilot"), self.store.samples(job.key, "final")
        return PrefixResult(cut=job.cut, key=job.key, label=job.label, samples_us=tuple(final),
                            pilot_us=tuple(pilot), measured_now=len(pilot) + len(final) - self.cached[job.key],
                            boundary=self.store.boundary(job.key) if boundary else None, side=side)


def _estimate(segments: Sequence[Segment], sides: Sequence[tuple[np.ndarray, Sequence[float]]],
              config: BisectConfig) -> tuple[tuple[SegmentResult, ...], tuple[float, float]]:
    """Segment increments with bootstrap intervals, and the interval of their sum. ``sides``: the prefix
    side's (round matrix, boundary correction per segment), then the suffix side's, whose rows run from the
    end of the model back (its segments come out last first). Both sides' bootstraps draw the same rounds."""
    points, draws, corrections = [], [], []
    for number, (matrix, boundary_us) in enumerate(sides):
        order = slice(None, None, -1 if number else 1)
        points.append(increments(matrix, config.statistic)[order])
        draws.append(bootstrap_increments(matrix, config.statistic, config.resamples, config.seed)[order])
        corrections.extend(list(boundary_us)[order])
    all_draws = np.concatenate(draws, axis=0)
    results = tuple(
        SegmentResult(segment=seg, increment_us=float(point), ci_low_us=low, ci_high_us=high,
                      samples=config.repeats, boundary_us=float(correction))
        for seg, point, (low, high), correction in zip(
            segments, np.concatenate(points), (_interval(d, config.confidence) for d in all_draws), corrections,
            strict=True))
    return results, _interval(all_draws.sum(axis=0), config.confidence)


# ------------------------------------------------------------------------------------ validation
@dataclass(frozen=True)
class SegmentCheck:
    """A segment's increment beside the kernel-profile time of its layers, and its share of the increments."""

    segment: SegmentResult
    profile_us: float
    share: float

    @property
    def error(self) -> float | None:
        """(bisect - profile) / profile; ``None`` when the profile has no time for the segment."""
        return (self.segment.increment_us - self.profile_us) / self.profile_us if self.profile_us > 0 else None


def compare_with_profile(result: BisectResult, profiles: Sequence[Measurement],
                         weights_us: Mapping[str, float]) -> tuple[SegmentCheck, ...]:
    """Each segment against ``profile``'s kernel times of its layers. ``profiles`` are one or more profiles
    (e.g. taken between the bisect's rounds, so both see the same machine) of the whole model; their runs are
    pooled. Per profiled run, a segment's time is the sum of its layers' times in that run (kernels split
    over the layers they cover by ``weights_us``, as ``profile`` does); the reference is the bisect's
    statistic over these per-run sums (:func:`level`: median, minimum or 10th percentile) -- the same
    statistic of the same kind of quantity (a whole run's work) as the bisect's prefixes. Layers the runtime
    eliminated count 0; layout kernels no layer owns are in no segment."""
    if not profiles:
        raise ValueError("compare_with_profile: no profile")
    total = result.sum_segments_us or 1.0
    reference = profile_segment_us([seg.segment.layer_ids for seg in result.segments], profiles, weights_us,
                                   result.config.statistic)
    return tuple(SegmentCheck(segment=seg, profile_us=ref, share=seg.increment_us / total)
                 for seg, ref in zip(result.segments, reference, strict=True))


def profile_segment_us(segments: Sequence[Sequence[str]], profiles: Sequence[Measurement],
                       weights_us: Mapping[str, float], statistic: Statistic) -> list[float]:
    """Per group of layer ids: ``statistic`` over all profiled runs of the group's summed time in a run."""
    pooled: list[np.ndarray] = []
    for measurement in profiles:
        series = layer_series(measurement.kernels, weights_us)  # every series has measurement.runs values
        zero = np.zeros(measurement.runs)
        pooled.append(np.array([sum((series.get(i, zero) for i in ids), zero) for ids in segments]).reshape(
            len(segments), measurement.runs))
    sums = np.concatenate(pooled, axis=1)
    if sums.shape[1] == 0:
        return [0.0] * len(segments)
    return [float(v) for v in level(sums, statistic)]


def profile_latency_us(profiles: Sequence[Measurement], statistic: Statistic) -> float:
    """The whole model's uninstrumented latency over the ``profiles``: the median of their medians for
    ``"median"``, else :func:`level` of their pooled uninstrumented runs."""
    if statistic == "median":
        return float(np.median([m.latency.median_us for m in profiles]))
    pooled = np.asarray([x for m in profiles for x in m.latency_samples_us], dtype=np.float64)
    if pooled.size == 0:
        raise ValueError("profile_latency_us: the profiles kept no uninstrumented runs")
    return float(level(pooled, statistic))


# -------------------------------------------------------------------------------------- run file
def add_bisect(run: dict[str, Any], result: BisectResult, weights_us: Mapping[str, float],
               checks: Sequence[SegmentCheck] = (), validation: Sequence[Measurement] = ()) -> dict[str, Any]:
    """``run`` with ``layers[].measured`` (method ``"differential"``), a ``bisect`` section and a
    ``measurement`` section added.

    A layer's ``median_us`` is its segment's increment split over the segment's layers in proportion to
    ``weights_us`` (estimated µs; equally when all are 0), ``split`` true when the segment has several
    layers; ``ci_low_us`` / ``ci_high_us`` are the segment's interval split the same way; ``segment_us``,
    ``segment_ci_low_us`` / ``segment_ci_high_us``, ``segment`` (index) and ``significant`` are the
    segment's. Negative values stay negative.
    """
    layers = {layer["id"]: layer for layer in run["layers"]}
    for seg in result.segments:
        ids = seg.segment.layer_ids
        shares = _shares(ids, weights_us)
        for layer_id, share in zip(ids, shares, strict=True):
            if layer_id in layers:
                layers[layer_id]["measured"] = _layer_measured(seg, share)
    run["bisect"] = _bisect_section(result, checks, validation)
    run["measurement"] = _measurement_section(result)
    run["summary"]["meas_latency_us"] = _us(result.full_us)
    return run


def _shares(ids: Sequence[str], weights_us: Mapping[str, float]) -> list[float]:
    values = [max(0.0, float(weights_us.get(i, 0.0))) for i in ids]
    total = sum(values)
    return [v / total for v in values] if total > 0 else [1.0 / len(ids)] * len(ids)


def _layer_measured(seg: SegmentResult, share: float) -> dict[str, Any]:
    multi = len(seg.segment.layer_ids) > 1
    return {
        "method": "differential", "status": "segment" if multi else "measured",
        "median_us": _us(seg.increment_us * share), "ci_low_us": _us(seg.ci_low_us * share),
        "ci_high_us": _us(seg.ci_high_us * share), "significant": seg.significant, "segment": seg.segment.index,
        "segment_us": _us(seg.increment_us), "segment_ci_low_us": _us(seg.ci_low_us),
        "segment_ci_high_us": _us(seg.ci_high_us), "split": multi, "samples": seg.samples,
        "kernel": None, "fused_group": None,
    }


def _bisect_section(result: BisectResult, checks: Sequence[SegmentCheck],
                    validation: Sequence[Measurement]) -> dict[str, Any]:
    config = result.config
    by_segment = {c.segment.segment.index: c for c in checks}
    section: dict[str, Any] = {
        "method": "differential", "granularity": config.granularity, "runner": dict(result.runner),
        "repeats": config.repeats, "pilot": config.pilot, "budget_runs": result.budget_runs,
        "refinements": result.refinements, "baseline": config.baseline, "statistic": config.statistic,
        "bootstrap": {"resamples": config.resamples, "confidence": config.confidence, "seed": config.seed,
                      "method": "percentile"},
        "pilot_runs": result.pilot_runs,
        "runs": result.runs, "runs_measured": result.runs_measured, "runs_cached": result.runs - result.runs_measured,
        "cache": {"dir": result.cache_dir, "hits": result.runs - result.runs_measured,
                  "misses": result.runs_measured},
        "full_us": _us(result.full_us),
        "baseline_us": _us(result.baseline_us) if result.baseline_us is not None else None,
        "sum_segments_us": _us(result.sum_segments_us),
        "sum_ci_low_us": _us(result.sum_ci_us[0]), "sum_ci_high_us": _us(result.sum_ci_us[1]),
        "prefixes": [_model_entry(p, config.statistic) for p in result.prefixes],
        "suffixes": [_model_entry(p, config.statistic) for p in result.suffixes],
        "meet": result.meet,
        "suffix_baseline_us": _us(result.suffix_baseline_us) if result.suffix_baseline_us is not None else None,
        "boundary": _boundary_section(result),
        "segments": [_segment_entry(s, by_segment.get(s.segment.index)) for s in result.segments],
    }
    if validation:
        # the segments plus the fixed cost per call against the whole model timed apart, same statistic
        latency = profile_latency_us(validation, config.statistic)
        section["validation"] = {
            "method": "kernel-profile", "runs": sum(m.runs for m in validation), "profiles": len(validation),
            "statistic": config.statistic, "profile_latency_us": _us(latency),
            "profile_latency_p50_us": _us(profile_latency_us(validation, "median")),
            "sum_vs_profile_latency": _ratio_error(result.sum_segments_us + (result.baseline_us or 0.0), latency),
        }
    return section


def _model_entry(p: PrefixResult, statistic: Statistic) -> dict[str, Any]:
    return {"layers": p.cut.layers, "side": p.side, "label": p.label, "key": p.key, "outputs": list(p.cut.outputs),
            "crossing_bytes": p.cut.crossing_bytes, "breaks_fusion": p.cut.breaks_fusion,
            "value_us": _us(p.value_us(statistic)), "samples_us": list(p.samples_us), "pilot_us": list(p.pilot_us),
            "measured_now": p.measured_now,
            "boundary_us": _us(p.boundary_us(statistic)) if p.boundary is not None else None,
            "boundary_kernels": list(p.boundary.kernels) if p.boundary is not None else [],
            "boundary_samples_us": list(p.boundary.samples_us) if p.boundary is not None else []}


def _boundary_section(result: BisectResult) -> dict[str, Any]:
    """How the cuts' own cost was handled: ``corrected`` (measured and subtracted) or not, and how much."""
    if not result.config.boundary_runs:
        return {"corrected": False, "why": "turned off (--boundary-runs 0)"}
    models = (*result.prefixes, *result.suffixes)
    if any(p.boundary is None for p in models):
        return {"corrected": False, "why": "the runner cannot see inside a run (a device command times whole runs "
                                           "only)"}
    costs = [p.boundary_us(result.config.statistic) for p in models]
    return {"corrected": True, "method": "runtime profiler: layout kernels producing a cut's outputs or reading "
                                        "its inputs that the whole model does not run",
            "runs": result.config.boundary_runs, "cuts": len(models),
            "cuts_with_cost": sum(1 for p in models if p.boundary and p.boundary.kernels),
            "max_us": _us(max(costs)), "total_us": _us(sum(costs))}


def _segment_entry(seg: SegmentResult, check: SegmentCheck | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": seg.segment.index, "start": seg.segment.start, "end": seg.segment.end,
        "first_layer": seg.segment.layer_ids[0], "last_layer": seg.segment.layer_ids[-1],
        "layers": list(seg.segment.layer_ids), "est_us": _us(seg.segment.est_us),
        "increment_us": _us(seg.increment_us), "ci_low_us": _us(seg.ci_low_us), "ci_high_us": _us(seg.ci_high_us),
        "significant": seg.significant, "negative": seg.negative, "samples": seg.samples,
        "boundary_us": _us(seg.boundary_us),
    }
    if check is not None:
        entry["profile_us"] = _us(check.profile_us)
        entry["error"] = round(check.error, 6) if check.error is not None else None
        entry["share"] = round(check.share, 6)
    return entry


def _measurement_section(result: BisectResult) -> dict[str, Any]:
    runner = result.runner
    section = {"backend": "onnxruntime" if runner.get("runner") == "onnxruntime" else "device command",
               "backend_version": runner.get("version", ""), "provider": runner.get("provider", ""),
               "threads": runner.get("threads"), "opt_level": runner.get("opt_level"), "method": "differential",
               "runs": result.runs, "machine": machine_info() if runner.get("runner") == "onnxruntime" else {},
               "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "source": "layerscope bisect"}
    if runner.get("runner") != "onnxruntime":
        section["run_cmd"] = runner.get("run_cmd")
    return section


def _ratio_error(value: float, reference: float) -> float | None:
    return round((value - reference) / reference, 6) if reference > 0 else None


def _us(value: float) -> float:
    return round(value, 3)

