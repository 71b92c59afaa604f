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
  with a baseline, is the suffix baseline: the model's outputs fed and cut to one element), and the whole
  model besides.
  A segment's noise grows with the size of the two models it is the difference of (a shared machine's
  interference is roughly proportional to a run's length); this way neither is much more than half the
  model, and a round costs about half as much as timing every prefix. The segments then add up to
  P(m) + S(m) - the baselines, not to the whole model: the difference is what cutting at m costs both sides,
  and comparing them is a check of the method;
- **how many rounds**: ``repeats``; with ``rounds_s`` and pilot samples of every cut, more when the model is
  fast: as many as fit in ``rounds_s`` seconds of timed runs by the pilot's medians (a suffix counted as the
  whole model less its prefix), at most 5 x ``repeats`` and what the budget leaves after the pilots. The pilot
  samples are cached, so a resumed bisect plans the same number. Then, with ``max_ci`` (segment
  granularity), more while a segment holding ``resolve_share`` of the time or more has a bootstrap interval wider
  than ``max_ci`` of it on either side (:meth:`_Bisect.extend`): the rounds its width asks for (a
  width shrinks as 1 / sqrt(rounds)), at least a quarter more per step, up to 5 x ``repeats`` and a budget given
  (a default budget grows by the rounds added). The rounds themselves decide, so a resumed bisect with its
  samples cached asks for the same;
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
  prefix increments still add up to whole - baseline. The correction is a constant per model: the bootstrap
  intervals do not include its own uncertainty, the stated ones do (:data:`CORRECTION_UNCERTAINTY` of it,
  :func:`with_systematic`);
- **costly cuts dropped** (``max_cut_share > 0``, with the correction): a cut whose measured cost is more than
  ``max_cut_share`` of the smaller corrected segment beside it is not reported: the two segments beside it become
  one (the worst such cut first, then the segments are taken again, until none is left). Such a correction is
  itself too uncertain for the segments it bounds (on OpenVINO, ResNet-50's cut after its first stage converts
  3.2 MB out of the blocked layout: 1.1-2.8 ms measured in different bisects against segments of 5-7 ms, and the
  two segments beside it missed the counters by up to 30% in opposite directions). The meeting cut and the
  baseline are never dropped; the dropped cuts' models and their samples stay in the result
  (:attr:`BisectResult.dropped`);
- **failures**: what the runner raises (:mod:`layerscope.measure.runners`: a failing device command exits 3,
  output it cannot read exits 2) stops the bisect; what was measured by then stays in ``store``.

Runners (the :class:`~layerscope.measure.runners.Runner` protocol): a runtime's, in this process
(:meth:`layerscope.runtimes.base.OpenRuntime.bisect_runner`), and :class:`~layerscope.measure.runners.CommandRunner`
(a shell command template per sample).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import onnx

from layerscope.errors import InputError
from layerscope.fileio import write_atomic
from layerscope.measure.cuts import BOUNDARY_SHARE, Cut, CutPlanner, Segment
from layerscope.measure.profile import Measurement, layer_series
from layerscope.measure.runners import NO_BOUNDARY_COST, BoundaryCost, Job, Runner, Side
from layerscope.run import save_record
from layerscope.runfile.models import Bisect, DifferentialMeasurement, LayerMeasured, RunFile
from layerscope.stats import PERCENTILE_METHOD
from layerscope.targets.host import cache_dir

__all__ = [
    "BisectConfig",
    "BisectResult",
    "DroppedCut",
    "GapEstimate",
    "PrefixResult",
    "SampleStore",
    "SegmentCheck",
    "SegmentResult",
    "Statistic",
    "Systematic",
    "add_bisect",
    "bootstrap_increments",
    "closure_us",
    "compare_with_profile",
    "default_cache_dir",
    "increments",
    "kernel_gaps",
    "level",
    "profile_latency_us",
    "profile_segment_us",
    "round_matrix",
    "run_bisect",
    "with_systematic",
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
    #: With pilot samples: more final rounds than ``repeats`` while their timed runs add up to less than this
    #: many seconds by the pilot's times (see the module docstring); 0: exactly ``repeats`` rounds.
    rounds_s: float = 0.0
    #: Segment granularity: more final rounds while a segment holding ``resolve_share`` of the model's time or more
    #: has a bootstrap interval wider than ``max_ci`` of it on either side (see the module docstring); 0: off.
    max_ci: float = 0.0
    resolve_share: float = 0.05
    #: With the boundary correction: drop a cut whose measured cost is more than this share of the smaller
    #: segment beside it (see the module docstring); 0: keep every cut.
    max_cut_share: float = BOUNDARY_SHARE

    def __post_init__(self) -> None:
        if self.segments < 1 or self.repeats < 1 or self.pilot < 1 or self.boundary_runs < 0 or self.rounds_s < 0:
            raise ValueError("BisectConfig: segments, repeats and pilot must be >= 1, boundary_runs and rounds_s "
                             ">= 0")
        if not self.max_cut_share >= 0:
            raise ValueError("BisectConfig: max_cut_share >= 0")
        if not 0 <= self.max_ci < 1 or not 0 < self.resolve_share < 1:
            raise ValueError("BisectConfig: 0 <= max_ci < 1 and 0 < resolve_share < 1")
        if self.statistic not in ("median", "min", "p10"):
            raise ValueError(f"BisectConfig: unknown statistic {self.statistic!r}")
        if not 0 < self.confidence < 1 or self.resamples < 1:
            raise ValueError("BisectConfig: 0 < confidence < 1 and resamples >= 1")


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
        if self.boundary is None or not self.boundary.samples_us:
            return 0.0
        return float(level(np.asarray(self.boundary.samples_us, dtype=np.float64), statistic))


@dataclass(frozen=True)
class DroppedCut:
    """A cut timed but not reported (:attr:`BisectConfig.max_cut_share`): ``model`` is the prefix ending at it (or
    the suffix starting at it), ``cost_us`` its measured cost (its boundary correction), ``segment_us`` the smaller
    corrected increment of the two segments beside it when it was dropped."""

    model: PrefixResult
    cost_us: float
    segment_us: float

    @property
    def share(self) -> float:
        """The cut's cost over the smaller segment beside it (infinite when that segment is not positive)."""
        return self.cost_us / self.segment_us if self.segment_us > 0 else math.inf


@dataclass(frozen=True)
class Systematic:
    """The part of a segment's error that more rounds do not shrink (µs, all >= 0; see :func:`with_systematic`):

    - ``gap_us``: the time between kernels the increment holds (the runtime's per-kernel overhead, which a
      kernel profile does not count): the segment's kernels x the whole model's gap per kernel;
    - ``cut_us``: what the cuts at the segment's ends change beyond the measured correction, from the bisect's own
      closure (prefixes and suffixes meeting at one cut: the sum of the segments less whole - baseline is what
      that cut costs both sides), per inner end of the segment;
    - ``correction_us``: the uncertainty of the cut-cost correction (:data:`CORRECTION_UNCERTAINTY` of it);
    - ``relative_us``: :data:`SYSTEMATIC_REL` of the increment (what a cut changes that none of the above sees:
      fusion, scheduling and cache state across it): a set value, not yet calibrated (see
      :data:`SYSTEMATIC_REL`).
    """

    gap_us: float = 0.0
    cut_us: float = 0.0
    correction_us: float = 0.0
    relative_us: float = 0.0

    @property
    def spread_us(self) -> float:
        """The two-sided systematic half-width: the independent parts added in quadrature (``gap_us`` excluded)."""
        return math.hypot(self.cut_us, self.correction_us, self.relative_us)


@dataclass(frozen=True)
class SegmentResult:
    """A segment's increment (µs) with its bootstrap interval (``ci_low_us`` / ``ci_high_us``: the random part,
    round to round); ``samples`` = the rounds it comes from; ``boundary_us``: the boundary correction's share of
    it (increment as timed = ``increment_us`` + ``boundary_us``); ``systematic``: the part rounds do not average
    out (``None``: not estimated). :attr:`low_us` / :attr:`high_us` are the interval to state: both parts."""

    segment: Segment
    increment_us: float
    ci_low_us: float
    ci_high_us: float
    samples: int
    boundary_us: float = 0.0
    systematic: Systematic | None = None

    @property
    def low_us(self) -> float:
        """The stated interval's low end: the bootstrap's distance below the increment and the systematic
        spread in quadrature, and below that the gap between kernels (the increment counts it, a kernel profile
        does not: the interval covers both readings)."""
        if self.systematic is None:
            return self.ci_low_us
        below = math.hypot(max(0.0, self.increment_us - self.ci_low_us), self.systematic.spread_us)
        return self.increment_us - below - self.systematic.gap_us

    @property
    def high_us(self) -> float:
        """The stated interval's high end: the bootstrap's distance above and the systematic spread in
        quadrature."""
        if self.systematic is None:
            return self.ci_high_us
        return self.increment_us + math.hypot(max(0.0, self.ci_high_us - self.increment_us),
                                              self.systematic.spread_us)

    @property
    def significant(self) -> bool:
        """The stated interval excludes 0."""
        return self.low_us > 0 or self.high_us < 0

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
    rounds: int
    suffixes: tuple[PrefixResult, ...] = ()
    meet: int | None = None
    #: The systematic part's inputs (:func:`with_systematic`); ``relative`` ``None``: not estimated.
    gaps: GapEstimate | None = None
    relative: float | None = None
    #: With :attr:`BisectConfig.max_ci`: the widest bootstrap half-width of a segment holding that share,
    #: relative to its increment, at the rounds measured before any were added (``resolve_from``, its width
    #: ``resolve_from_widest``) and at the end (``resolve_widest``); ``None``: not checked (no such segment).
    resolve_from: int | None = None
    resolve_from_widest: float | None = None
    resolve_widest: float | None = None
    #: Cuts timed but not reported (:attr:`BisectConfig.max_cut_share`), in the order they were dropped.
    dropped: tuple[DroppedCut, ...] = ()

    @property
    def full_us(self) -> float:
        """The whole model's time: the last prefix (the model itself) under the config's statistic."""
        return self.prefixes[-1].value_us(self.config.statistic)

    @property
    def baseline_us(self) -> float | None:
        """The runtime's fixed cost per call (the baseline model), ``None`` without a baseline."""
        return self.prefixes[0].value_us(self.config.statistic) if self.config.baseline else None

    @property
    def suffix_baseline_us(self) -> float | None:
        """The suffix side's fixed cost per call (the suffix baseline model), ``None`` without it."""
        return self.suffixes[-1].value_us(self.config.statistic) if self.suffixes and self.config.baseline else None

    @property
    def segments_only(self) -> tuple[Segment, ...]:
        """The planned segments (layers, estimate) without their measurements."""
        return tuple(s.segment for s in self.segments)

    @property
    def sum_segments_us(self) -> float:
        return sum(s.increment_us for s in self.segments)

    @property
    def timed(self) -> tuple[PrefixResult, ...]:
        """Every model this bisect timed: the prefixes, the suffixes and the models of the dropped cuts."""
        return (*self.prefixes, *self.suffixes, *(d.model for d in self.dropped))

    @property
    def runs(self) -> int:
        """Samples of this bisect, pilot and final, cached or not."""
        return sum(len(p.samples_us) + len(p.pilot_us) for p in self.timed)

    @property
    def runs_measured(self) -> int:
        """Samples measured in this session (the rest came from the cache)."""
        return sum(p.measured_now for p in self.timed)


# ---------------------------------------------------------------------------------------- cache
class SampleStore:
    """Samples per model key and phase, and the model's :class:`BoundaryCost`: a folder of JSON files written
    atomically, one per key, or memory only.

    A file holds ``{key, cut, side, label, runner, pilot_us, samples_us, boundary}`` (``samples_us``: the final
    phase, in round order; ``boundary``: ``{samples_us, kernels, tensors}`` or ``null``); one that cannot be read
    counts as empty and is overwritten by the next sample.
    """

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, _Entry] = {}
        #: Warnings about cache entries that failed validation on load (and are measured again).
        self.dropped: list[str] = []

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

    def add_many(self, key: str, phase: Phase, samples_us: Sequence[float], *, job: Job,
                 runner: Mapping[str, Any]) -> None:
        """Append ``samples_us`` and write the entry (atomically) once, before returning: for samples taken in
        milliseconds (a kernel's visits), where a write per sample would cost more than the samples."""
        self._entry(key).samples[phase].extend(round(float(v), 3) for v in samples_us)
        self._write(key, job, runner)

    def set_boundary(self, key: str, cost: BoundaryCost, *, job: Job, runner: Mapping[str, Any]) -> None:
        """Record ``key``'s boundary cost and write the entry (atomically) before returning."""
        self._entry(key).boundary = BoundaryCost(tuple(round(float(v), 3) for v in cost.samples_us), cost.kernels,
                                                 cost.tensors)
        self._write(key, job, runner)

    def _write(self, key: str, job: Job, runner: Mapping[str, Any]) -> None:
        if self.directory is None:
            return
        entry = self._entry(key)
        boundary = entry.boundary
        record = {"key": key, "cut": job.cut.layers, "side": job.side, "label": job.label, "runner": dict(runner),
                  "pilot_us": entry.samples["pilot"], "samples_us": entry.samples["final"],
                  "boundary": None if boundary is None else {"samples_us": list(boundary.samples_us),
                                                             "kernels": list(boundary.kernels),
                                                             "tensors": list(boundary.tensors)}}
        save_record(record, self._path(key))

    def _entry(self, key: str) -> _Entry:
        if key not in self._memory:
            self._memory[key] = self._read(key)
        return self._memory[key]

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / "samples" / key[:2] / f"{key}.json"

    def _read(self, key: str) -> _Entry:
        """The entry on disk, validated: a file that does not parse, is for another key, or holds a sample that
        is not a finite positive number of µs (NaN, negative, a string...) is dropped whole, with a warning in
        :attr:`dropped`, and measured again; a bad boundary alone drops only the boundary."""
        if self.directory is None:
            return _Entry()
        path = self._path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return _Entry()
        try:
            data = json.loads(text)
            if not isinstance(data, Mapping) or data.get("key", key) != key:
                raise ValueError("not an entry for this key")
            entry = _Entry({"pilot": _valid_samples(data["pilot_us"]), "final": _valid_samples(data["samples_us"])})
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            self.dropped.append(f"cache entry {path} dropped ({exc}); measured again")
            return _Entry()
        boundary = data.get("boundary")
        if isinstance(boundary, Mapping):
            try:
                samples = tuple(_valid_samples(boundary["samples_us"], zero_ok=True))
                kernels = boundary["kernels"]
                tensors = boundary.get("tensors", [])
                if not isinstance(kernels, list) or len(kernels) > MAX_CACHED_SAMPLES:
                    raise ValueError("kernels is not a list")
                if not isinstance(tensors, list) or len(tensors) not in (0, len(kernels)):
                    raise ValueError("tensors is not a list of one per kernel")
                if samples:
                    entry.boundary = BoundaryCost(samples, tuple(str(k) for k in kernels),
                                                  tuple(str(t) for t in tensors))
            except (ValueError, KeyError, TypeError) as exc:
                self.dropped.append(f"cache entry {path}: boundary dropped ({exc}); measured again")
        return entry


#: Most samples one cache entry may hold per phase (a bisect takes tens).
MAX_CACHED_SAMPLES = 100_000
#: Largest sample accepted from the cache, in µs (~11.6 days: no model run takes longer).
MAX_SAMPLE_US = 1e12


def _valid_samples(values: Any, *, zero_ok: bool = False) -> list[float]:
    """``values`` as a list of finite positive µs no larger than :data:`MAX_SAMPLE_US` (``zero_ok``: zero too,
    as a boundary cost of nothing is); ``ValueError`` naming the first bad one otherwise."""
    if not isinstance(values, list):
        raise ValueError(f"samples are {type(values).__name__}, not a list")
    if len(values) > MAX_CACHED_SAMPLES:
        raise ValueError(f"{len(values)} samples, more than {MAX_CACHED_SAMPLES}")
    out: list[float] = []
    for k, v in enumerate(values):
        number = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
        if not (0 < number <= MAX_SAMPLE_US or (zero_ok and number == 0)):
            raise ValueError(f"sample {k} is {v!r}, not a positive number of µs")
        out.append(number)
    return out


@dataclass
class _Entry:
    """One cache entry in memory (mutable: samples are appended as they come)."""

    samples: dict[Phase, list[float]] = field(default_factory=lambda: {"pilot": [], "final": []})
    boundary: BoundaryCost | None = None


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
class DevicePool(Protocol):
    """Devices that time many models at once, one model per device at a time."""

    def measure_rounds(self, rounds: Sequence[tuple[int, Sequence[Job]]],
                       on_round: Callable[[int, list[float]], None]) -> None:
        """One sample (µs) of each job of each round, all rounds in flight together; ``on_round(round_no,
        samples)`` (samples in the round's job order) is called in round order as soon as a round and every round
        before it are done. The pool spreads the jobs over its devices (rotating with the round, so a model meets
        every device over the rounds) and retries a failed job on another device; the error of the last device
        when every device failed it."""

    def close(self) -> None:
        """Release the pool."""


def run_bisect(planner: CutPlanner, runner: Runner, config: BisectConfig, store: SampleStore, *, workdir: Path,
               progress: Progress | None = None, after_round: Callable[[int], None] | None = None,
               pool: DevicePool | None = None) -> BisectResult:
    """Plan, measure and estimate (see the module docstring). Prefix models are written under ``workdir``;
    ``after_round(r)`` is called after each final round this session measures (to interleave other work). With
    ``pool`` each round's models are timed in parallel on its devices; the samples are stored in the same order as
    one device would store them, so the statistics and the cache are those of a single-device bisect."""
    return _Bisect(planner, runner, config, store, workdir=workdir, progress=progress,
                   after_round=after_round, pool=pool).run()


@dataclass(frozen=True)
class _Plan:
    """The final plan: the cuts, the ones timed as prefixes and as suffixes, and the meeting cut."""

    cuts: tuple[int, ...]
    prefix_cuts: tuple[int, ...]
    suffix_cuts: tuple[int, ...]
    meet: int | None


@dataclass(frozen=True)
class _Resolved:
    """What :meth:`_Bisect.extend` found: the rounds it started from and the widest relative half-width there,
    and the widest at the end (all ``None``: no segment to check)."""

    from_rounds: int | None
    from_widest: float | None
    widest: float | None


class _Bisect:
    """One bisect in progress: the jobs prepared so far and the samples each had before this session."""

    def __init__(self, planner: CutPlanner, runner: Runner, config: BisectConfig, store: SampleStore, *,
                 workdir: Path, progress: Progress | None, after_round: Callable[[int], None] | None,
                 pool: DevicePool | None = None) -> None:
        self.planner, self.runner, self.config, self.store = planner, runner, config, store
        self.pool = pool
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
        rounds = self.rounds(cuts, jobs, budget)
        self.measure(jobs, "final", rounds, "measure")
        plan = _Plan(cuts, prefix_cuts, suffix_cuts, meet)
        resolved = _Resolved(None, None, None)
        if config.max_ci and not layers:
            rounds, budget, resolved = self.extend(plan, jobs, rounds, budget)
        corrected = bool(config.boundary_runs) and self.measure_boundaries(jobs)
        dropped: tuple[DroppedCut, ...] = ()
        if corrected and config.max_cut_share:
            plan, dropped = self.drop_costly_cuts(plan, rounds)
        prefixes, suffixes, segments, sum_ci = self.estimates(plan, rounds, boundary=corrected)
        return BisectResult(config=config, runner=dict(self.runner.identity), prefixes=prefixes, segments=segments,
                            refinements=refinements, budget_runs=budget, pilot_runs=self.pilot_runs,
                            sum_ci_us=sum_ci, cache_dir=str(self.store.directory) if self.store.directory else None,
                            layer_count=planner.layer_count, rounds=rounds, suffixes=suffixes, meet=meet,
                            resolve_from=resolved.from_rounds, resolve_from_widest=resolved.from_widest,
                            resolve_widest=resolved.widest, dropped=dropped)

    def drop_costly_cuts(self, plan: _Plan, rounds: int) -> tuple[_Plan, tuple[DroppedCut, ...]]:
        """``plan`` without the cuts whose measured cost is more than :attr:`BisectConfig.max_cut_share` of the
        smaller corrected segment beside them, the worst first, the segments taken again after each (module
        docstring); the meeting cut and the baseline stay."""
        statistic = self.config.statistic
        dropped: list[DroppedCut] = []
        while True:
            prefixes, suffixes, segments, _ = self.estimates(plan, rounds, boundary=True)
            models = {p.cut.layers: p for p in prefixes if plan.meet is None or p.cut.layers < plan.meet}
            models.update((p.cut.layers, p) for p in suffixes if plan.meet is not None and p.cut.layers > plan.meet)
            worst: DroppedCut | None = None
            for left, right in itertools.pairwise(segments):
                model = models.get(left.segment.end)
                cost = model.boundary_us(statistic) if model is not None else 0.0
                if model is None or cost <= 0:
                    continue
                candidate = DroppedCut(model, cost, min(left.increment_us, right.increment_us))
                if candidate.share > self.config.max_cut_share and (worst is None or candidate.share > worst.share):
                    worst = candidate
            if worst is None:
                return plan, tuple(dropped)
            dropped.append(worst)
            cut = worst.model.cut.layers
            plan = _Plan(tuple(c for c in plan.cuts if c != cut), tuple(c for c in plan.prefix_cuts if c != cut),
                         tuple(c for c in plan.suffix_cuts if c != cut), plan.meet)

    def estimates(self, plan: _Plan, rounds: int, *, boundary: bool) -> tuple[
            tuple[PrefixResult, ...], tuple[PrefixResult, ...], tuple[SegmentResult, ...], tuple[float, float]]:
        """The timed models of ``plan`` (prefixes, suffixes) from the store, their first ``rounds`` final samples
        less their boundary costs when ``boundary``, and the segments and the interval of their sum."""
        prefixes = tuple(self.result(c, "prefix", boundary=boundary) for c in plan.prefix_cuts)
        suffixes = tuple(self.result(c, "suffix", boundary=boundary) for c in plan.suffix_cuts)
        # prefixes up to the meeting cut give the segments before it, suffixes from it on the segments after
        sides = [self.side(prefixes if plan.meet is None else prefixes[:-1], rounds)]
        if suffixes:
            sides.append(self.side(tuple(reversed(suffixes)), rounds))
        segments, sum_ci = _estimate(self.planner.segments(plan.cuts), sides, self.config, rounds)
        return prefixes, suffixes, segments, sum_ci

    def extend(self, plan: _Plan, jobs: Sequence[Job], rounds: int, budget: int) -> tuple[int, int, _Resolved]:
        """Final rounds beyond ``rounds`` for :attr:`BisectConfig.max_ci` (module docstring): (the rounds, the
        budget, what the checks found)."""
        config = self.config
        cap = 5 * config.repeats
        if config.budget_runs is not None:
            cap = min(cap, max(rounds, (budget - self.pilot_runs) // len(jobs)))
        start, first = rounds, None
        while True:
            widest = self.widest(plan, rounds)
            if widest is None:
                return rounds, budget, _Resolved(None, None, None)
            first = widest if first is None else first
            if widest <= config.max_ci or rounds >= cap:
                break
            rounds = min(cap, max(math.ceil(rounds * (widest / config.max_ci) ** 2), math.ceil(rounds * 1.25)))
            self.measure(jobs, "final", rounds, "measure")
        if config.budget_runs is None:
            budget = max(budget, self.pilot_runs + rounds * len(jobs))
        return rounds, budget, _Resolved(start, first, widest)

    def widest(self, plan: _Plan, rounds: int) -> float | None:
        """The widest bootstrap half-width (the larger side) relative to the increment, over the segments holding
        :attr:`BisectConfig.resolve_share` of the segments' sum or more at ``rounds``; ``None``: none does."""
        _, _, segments, _ = self.estimates(plan, rounds, boundary=False)
        total = sum(s.increment_us for s in segments)
        return max((max(s.ci_high_us - s.increment_us, s.increment_us - s.ci_low_us) / s.increment_us
                    for s in segments if total > 0 and s.increment_us >= self.config.resolve_share * total),
                   default=None)

    def rounds(self, cuts: Sequence[int], jobs: Sequence[Job], budget: int) -> int:
        """Final rounds: ``repeats``, or with :attr:`BisectConfig.rounds_s` and pilot samples of every cut, as
        many as fit in ``rounds_s`` seconds of timed runs (a prefix: its pilot median; a suffix: the whole
        model's minus its prefix's), at most 5 x ``repeats`` and what the budget leaves after the pilots."""
        repeats, n = self.config.repeats, self.planner.layer_count
        pilot = {c: self.store.samples(self.job(c).key, "pilot") for c in cuts}
        if not self.config.rounds_s or not all(pilot.values()):
            return repeats
        median = {c: float(np.median(v)) for c, v in pilot.items()}
        round_us = sum(median[j.cut.layers] if j.side == "prefix" else max(0.0, median[n] - median[j.cut.layers])
                       for j in jobs)
        wanted = math.ceil(self.config.rounds_s * 1e6 / max(round_us, 1.0))
        return max(repeats, min(wanted, 5 * repeats, (budget - self.pilot_runs) // len(jobs)))

    def models(self, cuts: Sequence[int]) -> int:
        """Models timed per final round for ``cuts``: one per cut, and with suffixes the meeting cut's suffix
        and (with a baseline) the suffix baseline besides."""
        return len(cuts) + ((2 if self.config.baseline else 1) if self.meeting_cut(cuts) is not None else 0)

    def meeting_cut(self, cuts: Sequence[int]) -> int | None:
        """With :attr:`BisectConfig.suffixes`, the inner cut nearest the middle of the estimated time (the
        larger of its prefix and suffix the smallest): prefixes up to it, suffixes from it; else ``None``."""
        inner = [c for c in cuts if 0 < c < self.planner.layer_count]
        if not self.config.suffixes or not inner:
            return None
        cum = self.planner.cum_us
        return min(inner, key=lambda c: (max(cum[c], cum[-1] - cum[c]), c))

    def side(self, rows: Sequence[PrefixResult], rounds: int) -> tuple[np.ndarray, list[float]]:
        """The round matrix of ``rows`` (ordered so that consecutive rows differ by one segment, the smaller
        model first), each sample less its row's boundary cost, and each segment's share of that correction."""
        statistic, baseline = self.config.statistic, self.config.baseline
        corrections = [r.boundary_us(statistic) for r in rows]
        matrix = round_matrix([[v - c for v in r.samples_us] for r, c in zip(rows, corrections, strict=True)],
                              rounds, baseline=baseline)
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
            label = "the baseline (the inputs, one element returned)" if cut == 0 else \
                f"prefix {cut}/{n} (after {after})"
        else:
            label = "the suffix baseline (the outputs fed, one element returned)" if cut == n else \
                f"suffix {cut}/{n} (the layers after {after})"
        folder = self.workdir / key[:16]
        feeds = folder / "feeds.onnx" if side == "suffix" and cut > 0 else None
        whole = None if side == "prefix" and cut == n else self.job(n).model_path
        self.jobs[side, cut] = Job(cut=self.planner.cut(cut), key=key, model_path=folder / "model.onnx", label=label,
                                   side=side, feeds_model=feeds, whole_model=whole)
        self.cached.setdefault(key, len(self.store.samples(key, "pilot")) + len(self.store.samples(key, "final")))
        return self.jobs[side, cut]

    def model(self, cut: int, side: Side) -> onnx.ModelProto:
        return self.planner.prefix_model(cut) if side == "prefix" else self.planner.suffix_model(cut)

    def model_file(self, job: Job) -> None:
        """Write ``job``'s model file, a suffix's feeding prefix and the whole model (atomically) unless they are
        there: only models still to be measured."""
        if not job.model_path.exists():
            write_atomic(job.model_path, self.model(job.cut.layers, job.side).SerializeToString(deterministic=True))
        if job.feeds_model is not None and not job.feeds_model.exists():
            write_atomic(job.feeds_model, self.planner.prefix_model(job.cut.layers).SerializeToString(
                deterministic=True))
        if job.whole_model is not None:
            self.model_file(self.job(self.planner.layer_count))

    def measure(self, jobs: Sequence[Job], phase: Phase, target: int, label: str) -> None:
        """Rounds over ``jobs`` in their order, alternating direction, one sample per model and round, until
        each has ``target`` samples of ``phase``: neighbouring models are timed back to back."""
        if self.pool is not None:
            self.measure_on_pool(self.pool, jobs, phase, target, label)
            return
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

    def measure_on_pool(self, pool: DevicePool, jobs: Sequence[Job], phase: Phase, target: int, label: str) -> None:
        """:meth:`measure` on a device pool: the same rounds, in flight together, stored in round order."""
        have = {j.key: len(self.store.samples(j.key, phase)) for j in jobs}
        rounds = [(r, [j for j in (jobs if r % 2 == 0 else reversed(jobs)) if have[j.key] <= r])
                  for r in range(min(have.values()), target)]
        rounds = [(r, ordered) for r, ordered in rounds if ordered]
        for j in jobs:
            self.model_file(j)
        total = sum(len(ordered) for _, ordered in rounds)
        done = 0
        by_round = dict(rounds)

        def store_round(round_no: int, samples: list[float]) -> None:
            nonlocal done
            for j, sample in zip(by_round[round_no], samples, strict=True):
                self.store.add(j.key, phase, sample, job=j, runner=self.runner.identity)
            done += len(samples)
            if self.progress is not None:
                self.progress(label, done, total)
            if phase == "final" and self.after_round is not None:
                self.after_round(round_no)

        pool.measure_rounds(rounds, store_round)

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
                self.model_file(job)  # and the whole model's
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
              config: BisectConfig, rounds: int) -> tuple[tuple[SegmentResult, ...], tuple[float, float]]:
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
                      samples=rounds, boundary_us=float(correction))
        for seg, point, (low, high), correction in zip(
            segments, np.concatenate(points), (_interval(d, config.confidence) for d in all_draws), corrections,
            strict=True))
    return results, _interval(all_draws.sum(axis=0), config.confidence)


# ------------------------------------------------------------------------------ systematic part
#: The relative systematic half-width of a segment (see :class:`Systematic`). Set, not calibrated: the bisect
#: benchmark's references could not be trusted on the loaded machine it last ran on (README, Intervals).
SYSTEMATIC_REL = 0.05
#: Share of a segment's cut-cost correction counted as the correction's own uncertainty.
CORRECTION_UNCERTAINTY = 0.5


@dataclass(frozen=True)
class GapEstimate:
    """The whole model's time between kernels: from a kernel profile, the gap's ``share`` of a run less its fixed
    cost = 1 - (fastest run's summed kernel time) / (fastest profiled run - baseline) (0 when negative; the fastest
    runs: the least disturbed by other processes), times the bisect's own whole model less its baseline (its
    clock and statistic) = ``gap_us``, spread evenly over the profile's ``kernels`` executed kernels; per segment,
    the kernels it holds (a kernel covering layers of several segments counts in each by its share of them)."""

    gap_us: float
    kernels: int
    per_segment: tuple[float, ...]
    share: float = 0.0

    @property
    def per_kernel_us(self) -> float:
        return self.gap_us / self.kernels if self.kernels else 0.0


def kernel_gaps(segments: Sequence[Segment], profile: Measurement, baseline_us: float,
                whole_us: float | None = None) -> GapEstimate:
    """:class:`GapEstimate` of ``profile`` (a profile of the whole model) for ``segments``; ``whole_us``: the
    bisect's whole model less nothing (default: the profile's fastest run), ``baseline_us`` its fixed cost."""
    executed = [k for k in profile.kernels if k.stats.median_us > 0]
    runs = min((len(k.samples.durations_us) for k in executed), default=0)
    per_run = np.sum([k.samples.durations_us[:runs] for k in executed], axis=0) if runs else np.zeros(1)
    run_us = profile.instrumented.min_us - baseline_us
    share = max(0.0, 1.0 - float(np.min(per_run)) / run_us) if run_us > 0 else 0.0
    whole = profile.instrumented.min_us if whole_us is None else whole_us
    gap = share * max(0.0, whole - baseline_us)
    where = {lid: seg.index for seg in segments for lid in seg.layer_ids}
    counts = [0.0] * len(segments)
    for kernel in executed:
        owners = [where[lid] for lid in kernel.layers if lid in where]
        for index in owners:
            counts[index] += 1.0 / len(owners)
    per_kernel = gap / len(executed) if executed else 0.0
    return GapEstimate(gap_us=gap, kernels=len(executed), per_segment=tuple(per_kernel * c for c in counts),
                       share=share)


def closure_us(result: BisectResult) -> float | None:
    """With suffixes: the segments' sum less (whole - baseline), what cutting at the meeting cut costs both sides
    beyond the correction (and their noise); ``None`` without suffixes (prefix levels add up by construction)."""
    if result.meet is None or not result.suffixes:
        return None
    return result.sum_segments_us - (result.full_us - (result.baseline_us or 0.0))


def with_systematic(result: BisectResult, gaps: GapEstimate | None, *,
                    relative: float = SYSTEMATIC_REL) -> BisectResult:
    """``result`` with every segment's :class:`Systematic` part: the gap between kernels from ``gaps`` (0
    without), the cut term (half the :func:`closure_us` per inner end of the segment, in quadrature: a segment
    ending at a cut inside the model on both sides has two), the correction's uncertainty and ``relative`` of
    the increment."""
    closure = closure_us(result)
    per_cut = abs(closure) / 2 if closure is not None else 0.0
    n = result.layer_count
    segments = []
    for seg in result.segments:
        ends = (seg.segment.start > 0) + (seg.segment.end < n)
        part = Systematic(gap_us=gaps.per_segment[seg.segment.index] if gaps is not None else 0.0,
                          cut_us=per_cut * math.sqrt(ends),
                          correction_us=CORRECTION_UNCERTAINTY * abs(seg.boundary_us),
                          relative_us=relative * abs(seg.increment_us))
        segments.append(dataclasses.replace(seg, systematic=part))
    return dataclasses.replace(result, segments=tuple(segments), gaps=gaps, relative=relative)


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
    eliminated count 0. A layout kernel no layer owns counts in the segment holding every layer it serves (an
    OpenVINO reorder between two of a segment's layers: work that segment's increment holds), else in none (the
    conversion of a model input serves none)."""
    if not profiles:
        raise ValueError("compare_with_profile: no profile")
    total = result.sum_segments_us or 1.0
    reference = profile_segment_us([seg.segment.layer_ids for seg in result.segments], profiles, weights_us,
                                   result.config.statistic)
    return tuple(SegmentCheck(segment=seg, profile_us=ref, share=seg.increment_us / total)
                 for seg, ref in zip(result.segments, reference, strict=True))


def profile_segment_us(segments: Sequence[Sequence[str]], profiles: Sequence[Measurement],
                       weights_us: Mapping[str, float], statistic: Statistic) -> list[float]:
    """Per group of layer ids: ``statistic`` over all profiled runs of the group's summed time in a run (with the
    layout kernels serving only that group's layers: :func:`compare_with_profile`)."""
    group_of = {layer_id: k for k, ids in enumerate(segments) for layer_id in ids}
    pooled: list[np.ndarray] = []
    for measurement in profiles:
        series = layer_series(measurement.kernels, weights_us)  # every series has measurement.runs values
        zero = np.zeros(measurement.runs)
        sums = np.array([sum((series.get(i, zero) for i in ids), zero) for ids in segments]).reshape(
            len(segments), measurement.runs)
        for kernel in measurement.kernels:
            groups = {group_of.get(layer_id) for layer_id in kernel.serves} if not kernel.layers else set()
            if len(groups) == 1 and None not in groups:
                sums[groups.pop()] += np.asarray(kernel.samples.durations_us, dtype=np.float64)
        pooled.append(sums)
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
def add_bisect(run: RunFile, result: BisectResult, weights_us: Mapping[str, float],
               checks: Sequence[SegmentCheck] = (), validation: Sequence[Measurement] = (), *,
               machine: Callable[[], Mapping[str, Any]], precision: str | None = None,
               cuts: Mapping[str, Any] | None = None) -> RunFile:
    """``run`` with ``layers[].measured`` (method ``"differential"``), a ``bisect`` section and a
    ``measurement`` section added, and the ``summary``'s ``meas_latency_us`` set (the input is not changed).

    A layer's ``median_us`` is its segment's increment split over the segment's layers in proportion to
    ``weights_us`` (estimated µs; equally when all are 0), ``split`` true when the segment has several
    layers; ``ci_low_us`` / ``ci_high_us`` are the segment's interval split the same way; ``segment_us``,
    ``segment_ci_low_us`` / ``segment_ci_high_us``, ``segment`` (index) and ``significant`` are the
    segment's. Negative values stay negative. Of layers sharing an id, the last one gets the time.
    ``machine``: where the runner ran (:func:`layerscope.runtimes.machine.machine_info`), called for the
    measurement's ``machine`` when the runner is a runtime in this process (a device command's is empty).
    ``precision``: the inference precision the compiler chose (the measurement's ``precision``, in place of the
    requested one); ``cuts``: how the cuts were placed (the ``bisect`` section's ``cuts``, absent when ``None``).
    """
    last = {layer.id: position for position, layer in enumerate(run.layers)}
    measured: dict[int, LayerMeasured] = {}
    for seg in result.segments:
        ids = seg.segment.layer_ids
        for layer_id, share in zip(ids, _shares(ids, weights_us), strict=True):
            if layer_id in last:
                measured[last[layer_id]] = _layer_measured(seg, share)
    layers = [layer.model_copy(update={"measured": measured[k]}) if k in measured else layer
              for k, layer in enumerate(run.layers)]
    section = _bisect_section(result, checks, validation)
    if cuts is not None:
        section["cuts"] = dict(cuts)
    measurement = _measurement_section(result, machine)
    if precision is not None:
        measurement["precision"] = precision
    return run.model_copy(update={
        "layers": layers, "bisect": Bisect.model_validate(section),
        "measurement": DifferentialMeasurement.model_validate(measurement),
        "summary": run.summary.model_copy(update={"meas_latency_us": _us(result.full_us)})})


def _shares(ids: Sequence[str], weights_us: Mapping[str, float]) -> list[float]:
    values = [max(0.0, float(weights_us.get(i, 0.0))) for i in ids]
    total = sum(values)
    return [v / total for v in values] if total > 0 else [1.0 / len(ids)] * len(ids)


def _layer_measured(seg: SegmentResult, share: float) -> LayerMeasured:
    multi = len(seg.segment.layer_ids) > 1
    return LayerMeasured.model_validate({
        "method": "differential", "status": "segment" if multi else "measured",
        "median_us": _us(seg.increment_us * share), "ci_low_us": _us(seg.low_us * share),
        "ci_high_us": _us(seg.high_us * share), "significant": seg.significant, "segment": seg.segment.index,
        "segment_us": _us(seg.increment_us), "segment_ci_low_us": _us(seg.low_us),
        "segment_ci_high_us": _us(seg.high_us), "split": multi, "samples": seg.samples,
        "kernel": None, "fused_group": None,
    })


def _bisect_section(result: BisectResult, checks: Sequence[SegmentCheck],
                    validation: Sequence[Measurement]) -> dict[str, Any]:
    config = result.config
    by_segment = {c.segment.segment.index: c for c in checks}
    section: dict[str, Any] = {
        "method": "differential", "granularity": config.granularity, "runner": dict(result.runner),
        "repeats": result.rounds, "repeats_min": config.repeats, "rounds_s": config.rounds_s,
        "max_ci": config.max_ci or None, "resolve_share": config.resolve_share if config.max_ci else None,
        "resolve_from": result.resolve_from,
        "resolve_from_widest": result.resolve_from_widest, "resolve_widest": result.resolve_widest,
        "pilot": config.pilot, "budget_runs": result.budget_runs,
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
        "intervals": _intervals_section(result),
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


def _intervals_section(result: BisectResult) -> dict[str, Any]:
    """How a segment's stated interval (``ci_low_us`` / ``ci_high_us``) is made: the bootstrap's (random part,
    ``random_ci_*``) widened by the systematic part (:class:`Systematic`), or the bootstrap's alone."""
    confidence = result.config.confidence
    if result.relative is None:
        return {"method": "bootstrap", "confidence": confidence, "systematic": False}
    closure = closure_us(result)
    gaps = result.gaps
    return {"method": "bootstrap + systematic", "confidence": confidence, "systematic": True,
            "relative": result.relative, "correction_uncertainty": CORRECTION_UNCERTAINTY,
            "closure_us": _us(closure) if closure is not None else None,
            "per_cut_us": _us(abs(closure) / 2) if closure is not None else None,
            "gap_us": _us(gaps.gap_us) if gaps is not None else None,
            "gap_share": round(gaps.share, 6) if gaps is not None else None,
            "gap_kernels": gaps.kernels if gaps is not None else None,
            "gap_per_kernel_us": _us(gaps.per_kernel_us) if gaps is not None else None}


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
    models = result.timed
    if any(p.boundary is None for p in models):
        return {"corrected": False, "why": "the runner cannot see inside a run (a device command times whole runs "
                                           "only)"}
    statistic = result.config.statistic
    costs = [p.boundary_us(statistic) for p in models]
    return {"corrected": True, "method": "runtime profiler: layout kernels producing a cut's outputs or reading "
                                        "its inputs that the whole model does not run",
            "runs": result.config.boundary_runs, "models": len(models),
            "models_with_cost": sum(1 for p in models if p.boundary and p.boundary.kernels),
            "max_us": _us(max(costs)), "total_us": _us(sum(costs)),
            "max_share": result.config.max_cut_share or None,
            "dropped": [{**_model_entry(d.model, statistic), "cost_us": _us(d.cost_us), "segment_us": _us(d.segment_us),
                         "share": round(d.share, 6) if math.isfinite(d.share) else None} for d in result.dropped]}


def _segment_entry(seg: SegmentResult, check: SegmentCheck | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": seg.segment.index, "start": seg.segment.start, "end": seg.segment.end,
        "first_layer": seg.segment.layer_ids[0], "last_layer": seg.segment.layer_ids[-1],
        "layers": list(seg.segment.layer_ids), "est_us": _us(seg.segment.est_us),
        "increment_us": _us(seg.increment_us), "ci_low_us": _us(seg.low_us), "ci_high_us": _us(seg.high_us),
        "random_ci_low_us": _us(seg.ci_low_us), "random_ci_high_us": _us(seg.ci_high_us),
        "significant": seg.significant, "negative": seg.negative, "samples": seg.samples,
        "boundary_us": _us(seg.boundary_us),
    }
    if seg.systematic is not None:
        part = seg.systematic
        entry["systematic_us"] = _us(part.spread_us)
        entry["gap_us"] = _us(part.gap_us)
        entry["systematic"] = {"gap_us": _us(part.gap_us), "cut_us": _us(part.cut_us),
                               "correction_us": _us(part.correction_us), "relative_us": _us(part.relative_us)}
    if check is not None:
        entry["profile_us"] = _us(check.profile_us)
        entry["error"] = round(check.error, 6) if check.error is not None else None
        entry["share"] = round(check.share, 6)
    return entry


def _measurement_section(result: BisectResult, machine: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
    runner = result.runner
    local = "run_cmd" not in runner  # a runtime in this process; a device command records its command
    section = {"backend": runner.get("runner") if local else "device command",
               "backend_version": runner.get("version", ""),
               "provider": runner.get("provider", "") or runner.get("device", ""),
               "threads": runner.get("threads"), "opt_level": runner.get("opt_level"), "method": "differential",
               "runs": result.runs, "machine": dict(machine()) if local else {},
               "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "source": "layerscope bisect",
               "kind": "differential"}
    if local and "device" in runner:  # a compiling runtime: the device, precision and hint it compiled for
        section.update({"device": runner.get("device"), "precision": runner.get("precision") or "default",
                        "performance_hint": runner.get("performance_hint")})
    if not local:
        section["run_cmd"] = runner.get("run_cmd")
    return section


def _ratio_error(value: float, reference: float) -> float | None:
    return round((value - reference) / reference, 6) if reference > 0 else None


def _us(value: float) -> float:
    return round(value, 3)

