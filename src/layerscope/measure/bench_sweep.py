"""``bench --sweep``: latency against throughput over concurrent streams x batch x threads, the knee of the curve and
the best point under a latency budget.

Contract:

- a point is one :class:`~layerscope.measure.bench.BenchResult` (its own warm-up and budget: ``--runs`` or
  ``--duration`` per point) at ``streams`` concurrent requests, ``batch`` samples per request (``None``: the
  model's static batch, not swept) and ``threads`` intra-op threads;
- per request: the latency percentiles of the point's runs and inferences/s (runs / wall time of the measured
  phase); per sample: a request's latency divided by its batch (the time a sample costs, amortised over its
  request) and samples/s = inferences/s x batch;
- steadiness per point: the run-to-run CV and, where the runs' order is known, the drift
  (:func:`layerscope.stats.drift`); either above :data:`~layerscope.stats.DRIFT_WARNING` marks the point unsteady;
- :func:`knee_index`: :data:`KNEE_RULE`, on one series of points in order of growing load (samples in flight:
  streams x batch); a sweep over several thread counts has one series, and one knee, per thread count;
- :func:`best_under_budget`: the point of highest samples/s whose P99 per request is within the budget
  (:data:`BUDGET_RULE`), ``None`` when none is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layerscope.measure.bench import BenchResult
from layerscope.runfile.models import BenchSweep, BenchSweepPoint
from layerscope.stats import DRIFT_WARNING

__all__ = ["BUDGET_RULE", "KNEE_LATENCY_GROWTH", "KNEE_RULE", "KNEE_THROUGHPUT_GROWTH", "SweepPoint",
           "best_under_budget", "knee_index", "load_order", "sweep_section"]

#: The knee: throughput (samples/s) grows by less than this fraction to the next point ...
KNEE_THROUGHPUT_GROWTH = 0.10
#: ... while P90 latency per request grows by more than this fraction.
KNEE_LATENCY_GROWTH = 0.50
KNEE_RULE = (f"knee: the first point, in order of growing load (streams x batch), after which samples/s grows "
             f"< {KNEE_THROUGHPUT_GROWTH:.0%} while P90 latency per request grows > {KNEE_LATENCY_GROWTH:.0%} "
             "(one per thread count)")
BUDGET_RULE = "best: the highest samples/s among the points whose P99 latency per request is within the budget"


@dataclass(frozen=True)
class SweepPoint:
    """One measured configuration: ``batch`` ``None`` when the model's batch is static (not swept); ``settings``:
    what a compiling runtime chose for it (device, precision, hint, NUM_STREAMS, requests)."""

    streams: int
    batch: int | None
    threads: int
    result: BenchResult
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def samples_per_request(self) -> int:
        """Samples one request carries (1 for a static batch: the model's own batch counts as one request)."""
        return self.batch or 1

    @property
    def requests_per_s(self) -> float:
        """Inferences (requests) per second over the measured phase."""
        return self.result.fps

    @property
    def samples_per_s(self) -> float:
        """Samples per second: inferences/s x batch."""
        return self.result.fps * self.samples_per_request


def load_order(points: Sequence[tuple[int, int | None, int]]) -> list[int]:
    """Indices of ``(streams, batch, threads)`` points sorted by thread count, then samples in flight (streams x
    batch), then streams: each thread count's series in order of growing load."""
    return sorted(range(len(points)), key=lambda i: (points[i][2], points[i][0] * (points[i][1] or 1), points[i][0]))


def knee_index(series: Sequence[tuple[float, float]]) -> int | None:
    """The knee of one series of ``(samples_per_s, p90_us)`` in order of growing load (:data:`KNEE_RULE`): the
    first index ``i`` such that from point ``i`` to ``i + 1`` throughput grows by less than
    :data:`KNEE_THROUGHPUT_GROWTH` while P90 grows by more than :data:`KNEE_LATENCY_GROWTH`; ``None`` when no step
    is such (the curve has not bent within the points measured)."""
    for i in range(len(series) - 1):
        (tput, p90), (next_tput, next_p90) = series[i], series[i + 1]
        if tput <= 0 or p90 <= 0:
            continue
        if next_tput / tput - 1 < KNEE_THROUGHPUT_GROWTH and next_p90 / p90 - 1 > KNEE_LATENCY_GROWTH:
            return i
    return None


def best_under_budget(points: Sequence[tuple[float, float]], budget_us: float) -> int | None:
    """Index of the point of highest samples/s among ``(samples_per_s, p99_us)`` points with P99 <= ``budget_us``
    (ties: the lower P99, then the first); ``None`` when no point meets the budget."""
    within = [i for i, (_, p99) in enumerate(points) if p99 <= budget_us]
    if not within:
        return None
    return max(within, key=lambda i: (points[i][0], -points[i][1], -i))


def _point_section(point: SweepPoint) -> BenchSweepPoint:
    lat, per = point.result.latency, point.samples_per_request
    drift = point.result.drift
    steady = lat.cv <= DRIFT_WARNING and (drift is None or abs(drift) <= DRIFT_WARNING)
    return BenchSweepPoint.model_validate({
        "streams": point.streams, "batch": point.batch, "threads": point.threads,
        "runs": lat.samples, "wall_s": round(point.result.wall_s, 6), "interrupted": point.result.interrupted,
        "requests_per_s": round(point.requests_per_s, 3), "samples_per_s": round(point.samples_per_s, 3),
        "p50_us": round(lat.median_us, 3), "p90_us": round(lat.p90_us, 3), "p99_us": round(lat.p99_us, 3),
        "sample_p50_us": round(lat.median_us / per, 3), "sample_p90_us": round(lat.p90_us / per, 3),
        "sample_p99_us": round(lat.p99_us / per, 3),
        "cv": round(lat.cv, 6), "drift": None if drift is None else round(drift, 6), "steady": steady,
        "cpu_util": round(point.result.usage.cpu_util, 4),
        "settings": dict(point.settings),
    })


def sweep_section(points: Sequence[SweepPoint], *, axes: Mapping[str, Sequence[int]], batch_dim: str | None,
                  batch_note: str | None, warmup: int, runs: int | None, duration_s: float | None,
                  latency_budget_us: float | None, concurrency: str) -> BenchSweep:
    """The run file's ``bench_sweep`` section: the points in load order, the knee of each thread count's series,
    the best point under ``latency_budget_us`` (µs; ``None``: no budget given) and the rules that chose them.
    ``concurrency`` says what a stream is on the runtime measured."""
    order = load_order([(p.streams, p.batch, p.threads) for p in points])
    ordered = [points[i] for i in order]
    sections = [_point_section(p) for p in ordered]
    knees: list[int] = []
    for threads in dict.fromkeys(p.threads for p in ordered):
        members = [i for i, p in enumerate(ordered) if p.threads == threads]
        knee = knee_index([(sections[i].samples_per_s or 0.0, sections[i].p90_us or 0.0) for i in members])
        if knee is not None:
            knees.append(members[knee])
    best = None if latency_budget_us is None else best_under_budget(
        [(s.samples_per_s or 0.0, s.p99_us or 0.0) for s in sections], latency_budget_us)
    return BenchSweep.model_validate({
        "axes": {name: list(values) for name, values in axes.items()},
        "batch_dim": batch_dim, "batch_note": batch_note, "concurrency": concurrency,
        "warmup": warmup, "runs_per_point": runs, "duration_s_per_point": duration_s,
        "points": [s.model_dump(mode="json", exclude_unset=True) for s in sections],
        "knees": knees, "knee_rule": KNEE_RULE,
        "latency_budget_us": latency_budget_us, "best": best,
        "budget_rule": BUDGET_RULE if latency_budget_us is not None else None,
    })
