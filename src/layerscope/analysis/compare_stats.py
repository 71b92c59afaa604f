"""Is a difference between two runs real? Intervals and verdicts for ``layerscope compare``.

Contract (pure; the numbers are the runs' own):

- a *time* (:class:`TimeSample`) is one side's median (µs) with what the run keeps of its spread: the raw
  per-run samples when the producer stored them (``samples_us``), else the P90, the standard deviation and the
  run count;
- the *random* part of the interval on ``after - before`` (µs, at :data:`CONFIDENCE`):
  - both sides with raw samples: a percentile bootstrap of the difference of medians (:data:`RESAMPLES`
    resamples of each side, seeded: the same runs give the same interval), method ``bootstrap``;
  - else a normal approximation from the summary: the standard error of a median is sqrt(pi / 2) * sigma /
    sqrt(n), sigma taken as (P90 - P50) / z(0.9) (the upper half's spread: a few slow outliers do not inflate it;
    the standard deviation where P90 is not above the median), method ``normal approximation``;
  - a side without a run count or any spread has no random part: the time is not judged (:data:`UNJUDGED`);
- the *systematic* part: two runs measured in two processes also differ by what the machine did between them,
  which neither run's samples see. A run counts as steady when it moved less than
  :data:`layerscope.stats.DRIFT_WARNING` within itself, so the interval is widened on both sides by ``noise`` x
  before, ``noise`` the larger of that floor and each run's own movement (its UNSTEADY figure,
  :func:`layerscope.runfile.derived.unsteady`, of its steadiness record; a run without one, ``bench``'s, is judged
  by the same rule on its latency's run-to-run CV alone), plus the time's resolution (``resolution_us``: kernel
  profilers report whole microseconds);
- the verdict: :data:`SLOWER` when the stated interval (random widened by systematic) lies above 0,
  :data:`FASTER` when below, else :data:`NO_CHANGE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Final

import numpy as np

from layerscope.runfile.derived import steadiness_text, unsteady
from layerscope.runfile.models import KernelProfileMeasurement, Layer, RunFile
from layerscope.stats import DRIFT_WARNING

#: Confidence of every interval compare states.
CONFIDENCE: Final = 0.95
#: Bootstrap resamples (raw samples on both sides) and their seed.
RESAMPLES: Final = 2000
SEED: Final = 0
#: The smallest movement between two runs in two processes that compare takes as possible on a steady machine.
NOISE_FLOOR: Final = DRIFT_WARNING
#: Resolution of a per-layer time: ONNX Runtime's profiler and OpenVINO's counters report whole microseconds.
LAYER_RESOLUTION_US: Final = 1.0

FASTER: Final = "faster"
SLOWER: Final = "slower"
NO_CHANGE: Final = "no change detectable at this noise"
UNJUDGED: Final = "not judged"

_Z90: Final = NormalDist().inv_cdf(0.9)
_MEDIAN_SE: Final = math.sqrt(math.pi / 2)


@dataclass(frozen=True)
class TimeSample:
    """One side's time: median (µs), and its spread as the run keeps it (``samples_us``: per-run times; else
    ``p90_us``, ``std_us`` and ``count``, the run count)."""

    median_us: float
    p90_us: float | None = None
    std_us: float | None = None
    count: int | None = None
    samples_us: tuple[float, ...] = ()


@dataclass(frozen=True)
class DeltaStat:
    """``after - before`` of one time with its stated interval (µs, :data:`CONFIDENCE`): ``low_us``/``high_us``
    the random part (``method``) widened by ``systematic_us``; ``None`` bounds when the time is not judged
    (``verdict`` :data:`UNJUDGED`, ``note`` says why). ``before_us`` is the base of the relative figures."""

    before_us: float
    delta_us: float
    low_us: float | None
    high_us: float | None
    systematic_us: float
    method: str
    verdict: str
    note: str = ""

    def relative(self, value_us: float | None) -> float | None:
        """``value_us`` over the before time (``None`` when either is missing or before is not positive)."""
        return None if value_us is None or self.before_us <= 0 else value_us / self.before_us

    @property
    def change(self) -> float | None:
        """(after - before) / before."""
        return self.relative(self.delta_us)

    @property
    def verdict_text(self) -> str:
        """The verdict with its note (``not judged: estimates only``)."""
        return f"{self.verdict}: {self.note}" if self.note else self.verdict


@dataclass(frozen=True)
class RunNoise:
    """How steady the machine was while one run was measured. ``recorded``: the run holds a figure to judge it by
    (``profile``: its steadiness record; ``bench``: its latency's run-to-run CV only); ``moved``: its UNSTEADY figure
    (the largest |CV| or |drift| over :data:`layerscope.stats.DRIFT_WARNING`), ``None`` when steady or not
    recorded; ``text``: one line."""

    recorded: bool
    moved: float | None
    text: str

    @property
    def verdict(self) -> str:
        """``UNSTEADY (moved 33%)``, ``steady`` or ``steadiness not recorded``."""
        if not self.recorded:
            return "steadiness not recorded"
        return f"UNSTEADY (moved {100 * self.moved:.0f}%)" if self.moved is not None else "steady"


def run_noise(run: RunFile) -> RunNoise:
    """The steadiness of ``run``'s measurement (see :class:`RunNoise`): its steadiness record (``profile``), else
    the run-to-run CV of its latency alone, judged by the same rule (``bench`` records no drift)."""
    m = run.measurement
    record = m.steadiness if isinstance(m, KernelProfileMeasurement) else None
    if record is not None:
        return RunNoise(True, unsteady(record), steadiness_text(record))
    cv = _number(run.latency.cv) if run.latency is not None and m is not None else None
    if cv is not None:
        assert m is not None
        return RunNoise(True, unsteady({"latency_cv": cv}),
                        f"run-to-run CV {100 * cv:.1f}% ({m.kind} records no drift)")
    return RunNoise(False, None, "not recorded: " + ("no run-to-run figure" if m is not None else "not measured"))


def noise_of(before: RunNoise, after: RunNoise) -> float:
    """The relative systematic widening for two runs (see the module docstring)."""
    return max(NOISE_FLOOR, before.moved or 0.0, after.moved or 0.0)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _samples(value: Any) -> tuple[float, ...]:
    """A producer's raw per-run times (``samples_us``), when it stored a list of finite numbers."""
    if not isinstance(value, list | tuple):
        return ()
    numbers = [_number(x) for x in value]
    return tuple(x for x in numbers if x is not None) if all(x is not None for x in numbers) else ()


def latency_sample(run: RunFile) -> TimeSample | None:
    """The run's measured end-to-end median with its spread; ``None`` without a measured latency."""
    lat = run.latency
    median = None if lat is None else _number(lat.p50_us if lat.p50_us is not None else lat.median_us)
    if lat is None or median is None:
        return None
    return TimeSample(median, _number(lat.p90_us), _number(lat.std_us), lat.samples,
                      _samples(getattr(lat, "samples_us", None)))


def layer_sample(layer: Layer) -> TimeSample | None:
    """A layer's measured median with its spread; ``None`` when it was not measured."""
    m = layer.measured
    median = None if m is None else _number(m.median_us)
    if m is None or median is None:
        return None
    return TimeSample(median, _number(m.p90_us), _number(m.std_us), m.samples, _samples(getattr(m, "samples_us", None)))


def _median_se_us(side: TimeSample) -> float | None:
    """Standard error of the median from the summary (see the module docstring); ``None`` without n >= 2."""
    if side.count is None or side.count < 2:
        return None
    if side.p90_us is not None and side.p90_us > side.median_us:
        sigma = (side.p90_us - side.median_us) / _Z90
    elif side.std_us is not None:
        sigma = side.std_us
    else:
        return None
    return _MEDIAN_SE * sigma / math.sqrt(side.count)


def _bootstrap_us(before: Sequence[float], after: Sequence[float], confidence: float) -> tuple[float, float]:
    rng = np.random.default_rng(SEED)
    b, a = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    draws = (np.median(a[rng.integers(0, a.size, (RESAMPLES, a.size))], axis=1)
             - np.median(b[rng.integers(0, b.size, (RESAMPLES, b.size))], axis=1))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def delta_stat(before: TimeSample, after: TimeSample, noise: float, *, resolution_us: float = 0.0,
               confidence: float = CONFIDENCE) -> DeltaStat:
    """``after - before`` with its stated interval and verdict (see the module docstring)."""
    delta = after.median_us - before.median_us
    systematic = noise * before.median_us + resolution_us
    if len(before.samples_us) >= 2 and len(after.samples_us) >= 2:
        low, high = _bootstrap_us(before.samples_us, after.samples_us, confidence)
        method = "bootstrap"
    else:
        se_b, se_a = _median_se_us(before), _median_se_us(after)
        if se_b is None or se_a is None:
            return DeltaStat(before.median_us, delta, None, None, systematic, "none", UNJUDGED,
                             "the runs keep no run count or spread")
        half = NormalDist().inv_cdf((1 + confidence) / 2) * math.hypot(se_b, se_a)
        low, high, method = delta - half, delta + half, "normal approximation"
    low, high = low - systematic, high + systematic
    verdict = SLOWER if low > 0 else FASTER if high < 0 else NO_CHANGE
    return DeltaStat(before.median_us, delta, low, high, systematic, method, verdict)


def unjudged(before_us: float, after_us: float, note: str) -> DeltaStat:
    """A difference compare does not judge (``note``: why, e.g. ``estimates only``)."""
    return DeltaStat(before_us, after_us - before_us, None, None, 0.0, "none", UNJUDGED, note)
