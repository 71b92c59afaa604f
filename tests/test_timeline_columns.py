"""The timeline's vectorized parts against the one-record-at-a-time code they replaced (issue #19: 100k layers).

The run file's bytes must not move: the bins, the tracks, the memory peaks and the rounding are compared for exact
equality (``==`` on floats, not ``approx``) with straightforward reference implementations on real models.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from conftest import zoo
from layerscope.estimator import simulate_timeline
from layerscope.estimator.memory import Buffer, BufferKind, live_buffers, peak_bytes
from layerscope.estimator.roofline import resident_tensors
from layerscope.estimator.timeline import LOAD, STORE, Interval, Timeline
from layerscope.model import load_model
from layerscope.rounding import rounded, rounded_or_none
from layerscope.samples import sample_path
from layerscope.targets import load_profile

CASES = [("squeezenet", "rdk-s100"), ("inception_v2", "rdk-x3"), ("shufflenet", "a100-pcie")]


def timeline_of(model: str, target: str) -> Timeline:
    path = sample_path(model) if model == "yolov5s" else zoo(model)
    return simulate_timeline(load_model(path), load_profile(target))


# --- references: the per-record code as it was before the columns ---------------------------------------------------


def spread(bins: list[float], span: Interval, amount: float, width: float) -> None:
    if span.duration_us <= 0:
        bins[min(int(span.start_us / width), len(bins) - 1)] += amount
        return
    rate = amount / span.duration_us
    first = min(int(span.start_us / width), len(bins) - 1)
    last = min(int(span.end_us / width), len(bins) - 1)
    for k in range(first, last + 1):
        lo = max(span.start_us, k * width)
        hi = min(span.end_us, (k + 1) * width) if k < len(bins) - 1 else span.end_us
        if hi > lo:
            bins[k] += rate * (hi - lo)


def reference_bins(tl: Timeline, count: int) -> dict[str, tuple[float, ...]]:
    width = tl.latency_us / count
    load, store, ddr = [0.0] * count, [0.0] * count, [0.0] * count
    units = {t.name: [0.0] * count for t in tl.unit_tracks()}
    for s in tl.layers:
        if s.load:
            spread(load, s.load, s.bytes_loaded * tl.cores, width)
            spread(ddr, s.load, s.load.duration_us, width)
        if s.store:
            spread(store, s.store, s.bytes_stored * tl.cores, width)
            spread(ddr, s.store, s.store.duration_us, width)
        if s.unit in units and s.compute_us > 0:
            spread(units[s.unit], s.compute, s.compute_us, width)
    series = {"load": load, "store": store, "ddr": ddr} | units
    return {name: tuple(v / width for v in values) for name, values in series.items()}


def reference_peaks(buffers: Sequence[Buffer]) -> dict[BufferKind | None, int]:
    events = []
    for b in buffers:
        events.append((b.start_us, 1, b.nbytes, b.kind))
        events.append((b.end_us, 0 if b.end_us > b.start_us else 2, -b.nbytes, b.kind))
    events.sort(key=lambda e: (e[0], e[1]))
    live: dict[BufferKind | None, int] = dict.fromkeys((*BufferKind, None), 0)
    peak = dict(live)
    for _, _, delta, kind in events:
        for key in (kind, None):
            live[key] += delta
            peak[key] = max(peak[key], live[key])
    return peak


# --- the tests -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "target"), CASES)
def test_bins_add_each_span_in_graph_order(model: str, target: str) -> None:
    tl = timeline_of(model, target)
    want = reference_bins(tl, len(tl.bins.load_mb_per_s))
    bins = tl.bins
    assert bins.load_mb_per_s == want["load"] and bins.store_mb_per_s == want["store"]
    assert bins.ddr_utilization == want["ddr"]
    assert dict(bins.utilization) == {name: want[name] for name in bins.utilization}
    assert sum(bins.ddr_utilization) > 0 and any(any(v) for v in bins.utilization.values())


def test_bins_cut_spans_over_many_intervals_and_empty_ones() -> None:
    tl = simulate_timeline(load_model(zoo("squeezenet")), load_profile("rdk-s100"), intervals=997)
    want = reference_bins(tl, 997)
    assert tl.bins.load_mb_per_s == want["load"] and tl.bins.ddr_utilization == want["ddr"]
    spans = [s.load for s in tl.layers if s.load is not None]
    width = tl.bins.interval_us
    assert any(int(i.end_us / width) - int(i.start_us / width) >= 2 for i in spans)  # a burst over 3+ intervals


@pytest.mark.parametrize(("model", "target"), CASES)
def test_tracks_hold_the_spans_in_start_order(model: str, target: str) -> None:
    tl = timeline_of(model, target)
    for track in tl.tracks:
        if track.name == LOAD:
            rows = [(s.layer_id, s.load.start_us, s.load.end_us) for s in tl.layers if s.load]
        elif track.name == STORE:
            rows = [(s.layer_id, s.store.start_us, s.store.end_us) for s in tl.layers if s.store]
        else:
            rows = [(s.layer_id, s.active.start_us, s.compute.end_us) for s in tl.layers if s.unit == track.name]
        rows.sort(key=lambda r: r[1])  # stable: graph order on a tie
        assert [(b.layer_id, b.start_us, b.end_us) for b in track.busy] == rows
        assert track.busy_us == sum(end - start for _, start, end in rows)
    assert {t.core for t in tl.tracks} == set(range(tl.cores))


@pytest.mark.parametrize(("model", "target"), [*CASES, ("yolov5s", "rdk-x3")])
def test_memory_peaks_match_the_event_walk(model: str, target: str) -> None:
    tl = timeline_of(model, target)
    graph = load_model(sample_path(model) if model == "yolov5s" else zoo(model))
    est = tl.estimate
    resident = est.resident if est.resident is not None else resident_tensors(
        graph, load_profile(target), est.dtype, est.costs, [e.fallback_reason is not None for e in est.layers])
    buffers = live_buffers(graph, est, [(s.active.start_us, s.active.end_us) for s in tl.layers],
                           resident=resident, latency_us=tl.latency_us)
    peaks = reference_peaks(buffers)
    assert peak_bytes(buffers) == peaks
    memory = tl.memory
    assert memory.peak_live_bytes == peaks[None] > 0
    assert memory.exclusive_intermediate_bytes == peaks[BufferKind.DDR]
    assert memory.shared_temporary_bytes == peaks[BufferKind.TEMPORARY]
    assert memory.input_bytes == sum(b.nbytes for b in buffers if b.kind is BufferKind.INPUT)


def test_peaks_of_no_buffers_are_zero() -> None:
    assert peak_bytes([]) == dict.fromkeys((*BufferKind, None), 0)


def test_rounded_is_round_bit_for_bit() -> None:
    # exact ties go to even, a float just above a half rounds up, huge and non-finite values pass through round()
    values = [0.0625, 0.0005, 2.675, 1.0005, 0.1 + 0.2, -1.2345, -0.0, 0.0, 1e16, 5e-324, math.inf, math.nan]
    assert [repr(v) for v in rounded(values, 3)] == [repr(round(v, 3)) for v in values]
    assert rounded([0.0625], 3) == [0.062] and rounded([0.0005], 3) == [0.001]
    rng = np.random.default_rng(19)
    many = np.concatenate([rng.uniform(0, 1e4, 50_000), np.arange(0, 50, 0.0005), rng.exponential(30, 20_000)])
    for digits in (3, 6):
        assert rounded(many, digits) == [round(v, digits) for v in many.tolist()]
    assert np.round(many, 3).tolist() != rounded(many, 3)  # numpy's own rounding would move bytes
    assert rounded_or_none([1.23456, math.nan], [True, False], 3) == [1.235, None]
    with pytest.raises(ValueError, match="digits"):
        rounded([1.0], -1)
