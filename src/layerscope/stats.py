"""Latency statistics of a list of timed runs: percentiles, mean, spread, FPS. Pure; no I/O, no clocks.

Contract of :func:`summarize`:

- input: one or more finite, non-negative durations in microseconds (any order); anything else is a
  ``ValueError`` (a bug of the caller's, not bad user input);
- percentiles use numpy's ``method="linear"`` (Hyndman & Fan type 7, numpy's and Excel's default): the
  p-th percentile of n sorted samples x[0..n-1] is x interpolated linearly at position (n - 1) * p / 100.
  With fewer than 1000 samples P99.9 therefore lies between the two largest samples: read it together
  with ``samples``;
- ``std_us`` is the sample standard deviation (``ddof=1``; 0 for a single sample) and ``cv`` = std / mean
  (0 when the mean is 0): the coefficient of variation the run-to-run noise is judged by;
- ``fps`` = 1e6 / mean: the throughput of one stream running back to back.

:func:`drift` is how far the machine moved during the runs, in the order they were timed: the median of the
second half over the median of the first half, minus 1 (0 with fewer than 4 runs). Noise that stays the same
through a measurement leaves it near 0; a machine that slowed down or sped up between the halves (another
tenant, a clock change) does not, and no statistic of those runs can then be steadier than that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Final

import numpy as np

__all__ = ["DRIFT_WARNING", "PERCENTILE_METHOD", "LatencyStats", "drift", "summarize"]

#: numpy's percentile method used for every percentile layerscope reports.
PERCENTILE_METHOD: Final = "linear"
#: A measurement whose run-to-run CV or drift exceeds this is reported as taken on an unsteady machine.
DRIFT_WARNING: Final = 0.05


@dataclass(frozen=True)
class LatencyStats:
    """Summary of ``samples`` timed runs, all in microseconds except ``cv`` (a ratio) and ``samples``."""

    median_us: float
    mean_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    min_us: float
    max_us: float
    std_us: float
    cv: float
    samples: int

    @property
    def p50_us(self) -> float:
        """The median, under the name the run file's ``latency`` section uses."""
        return self.median_us

    @property
    def fps(self) -> float:
        """Runs per second of one stream running back to back: 1e6 / mean (0 when the mean is 0)."""
        return 1e6 / self.mean_us if self.mean_us > 0 else 0.0

    def to_dict(self, ndigits: int = 3) -> dict[str, float | int]:
        """The fields as a JSON-ready dict; microseconds rounded to ``ndigits`` (3: nanoseconds), cv to 6."""
        out: dict[str, float | int] = {}
        for key, value in asdict(self).items():
            if key == "samples":
                out[key] = value
            else:
                out[key] = round(value, 6 if key == "cv" else ndigits)
        return out


def summarize(samples_us: Sequence[float] | np.ndarray) -> LatencyStats:
    """The :class:`LatencyStats` of ``samples_us`` (microseconds). See the module docstring."""
    values = np.asarray(samples_us, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("summarize: no samples")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("summarize: samples must be finite and non-negative microseconds")
    p50, p90, p99, p999 = np.percentile(values, [50.0, 90.0, 99.0, 99.9], method=PERCENTILE_METHOD)
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return LatencyStats(
        median_us=float(p50),
        mean_us=mean,
        p90_us=float(p90),
        p99_us=float(p99),
        p999_us=float(p999),
        min_us=float(values.min()),
        max_us=float(values.max()),
        std_us=std,
        cv=std / mean if mean > 0 else 0.0,
        samples=int(values.size),
    )


def drift(samples_us: Sequence[float] | np.ndarray) -> float:
    """median(second half) / median(first half) - 1 of runs in the order they were timed (see the module
    docstring); 0.0 with fewer than 4 runs or a first half whose median is 0."""
    values = np.asarray(samples_us, dtype=np.float64)
    if values.size < 4:
        return 0.0
    half = values.size // 2
    first = float(np.median(values[:half]))
    return float(np.median(values[values.size - half:])) / first - 1.0 if first > 0 else 0.0
