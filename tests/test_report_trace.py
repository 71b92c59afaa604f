"""The Perfetto / Chrome trace: format, exact nesting on every track, counters, identical bytes."""

from __future__ import annotations

import copy
import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layerscope.cli.main import main
from layerscope.report.perfetto import ESTIMATED_PID, MEASURED_PID, nest_exactly, trace_bytes, trace_document
from layerscope.report.views.timeline import Slice
from layerscope.runfile import as_run
from test_report_runs import ALL_RUNS, Runs, shared_runs

PHASES = {"X", "M", "C"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return shared_runs(tmp_path_factory)


def ns(us: float) -> int:
    """As Perfetto reads a JSON time: microseconds times 1000, rounded."""
    return round(us * 1000)


def check_format(doc: dict[str, Any]) -> None:
    """The JSON object format: typed fields per phase, names for every process and track used."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    events = doc["traceEvents"]
    assert isinstance(events, list)
    process_names, thread_names = set(), set()
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
            if e["name"] == "process_name":
                process_names.add(e["pid"])
            if e["name"] == "thread_name":
                assert isinstance(e["args"]["name"], str)
                thread_names.add((e["pid"], e["tid"]))
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0
        assert abs(e["ts"] * 1000 - ns(e["ts"])) < 1e-6  # at most three decimals
        if e["ph"] == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0
            assert abs(e["dur"] * 1000 - ns(e["dur"])) < 1e-6
            assert isinstance(e["args"], dict)
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, int | float) for v in e["args"].values())
    for e in events:
        if e["ph"] != "M":
            assert e["pid"] in process_names
        if e["ph"] == "X":
            assert (e["pid"], e["tid"]) in thread_names


def check_nesting(doc: dict[str, Any]) -> None:
    """On each track, two slices are disjoint or one contains the other (in integer nanoseconds)."""
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            tracks[e["pid"], e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[int] = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], f"partial overlap at {start} ns"
            open_ends.append(end)


@pytest.mark.parametrize("name", ALL_RUNS)
def test_trace_format_and_nesting(runs: Runs, name: str) -> None:
    doc = json.loads(trace_bytes(as_run(runs.load(name))))
    check_format(doc)
    check_nesting(doc)


def test_tracks_are_named_after_units_and_threads(runs: Runs) -> None:
    doc = trace_document(as_run(runs.load("estimate")))
    names = {(e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert (ESTIMATED_PID, "core 0 · TAE") in names and (ESTIMATED_PID, "core 0 · LOAD") in names
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "DDR bandwidth (MB/s)"]
    run = runs.load("estimate")
    assert len(counters) == run["timeline"]["temporal"]["intervals"] + 1
    assert counters[-1]["args"] == {"load": 0.0, "store": 0.0}
    measured = trace_document(as_run(runs.load("profile")))
    threads = [e for e in measured["traceEvents"] if e["name"] == "thread_name" and e["pid"] == MEASURED_PID]
    assert threads and all(e["args"]["name"].startswith("thread ") for e in threads)
    kernels = [e for e in measured["traceEvents"] if e["ph"] == "X" and e["pid"] == MEASURED_PID]
    assert len(kernels) == len(runs.load("profile")["measurement"]["median_run"])


def test_what_the_run_lacks_is_said(runs: Runs) -> None:
    other = trace_document(as_run(runs.load("horizon")))["otherData"]
    assert any("measured kernels" in text for text in other["missing"])


def test_partial_overlaps_are_fixed_deterministically(runs: Runs) -> None:
    run = copy.deepcopy(runs.load("profile"))
    events = run["measurement"]["median_run"]
    thread = events[0]["thread"]
    events[1] = dict(events[1], start_us=events[0]["start_us"] + events[0]["duration_us"] / 2, thread=thread,
                     duration_us=events[0]["duration_us"] * 2)
    doc = trace_document(as_run(run))
    assert doc["otherData"]["overlaps_fixed"] >= 1
    check_nesting(doc)
    assert trace_bytes(as_run(run)) == trace_bytes(as_run(copy.deepcopy(run)))


def test_same_run_gives_identical_bytes(runs: Runs, tmp_path: Path) -> None:
    run = as_run(runs.load("estimate"))
    assert trace_bytes(run) == trace_bytes(as_run(runs.load("estimate")))
    packed = trace_bytes(run, compress=True)
    assert packed == trace_bytes(run, compress=True)
    assert gzip.decompress(packed) == trace_bytes(run)
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    for out in (a, b):
        assert main(["report", str(runs.estimate), "--trace", str(out)]) == 0
    assert a.read_bytes() == b.read_bytes() == packed
    plain = tmp_path / "t.json"
    assert main(["report", str(runs.estimate), "--trace", str(plain)]) == 0
    assert plain.read_bytes() == trace_bytes(run)


spans = st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 500)), max_size=40)


@given(spans)
def test_nest_exactly_property(raw: list[tuple[int, int]]) -> None:
    slices = [Slice(start / 1000 * 7, (start + dur) / 1000 * 7, f"s{i}") for i, (start, dur) in enumerate(raw)]
    out, _ = nest_exactly(slices)
    assert len(out) == len(slices)
    originals = {s.name: s for s in slices}
    open_ends: list[int] = []
    for span in out:  # in start order, nested exactly
        original = originals[span.slice.name]
        assert span.start_ns == ns(original.start_us)
        assert span.start_ns <= span.end_ns <= max(ns(original.start_us), ns(original.end_us))
        while open_ends and open_ends[-1] <= span.start_ns:
            open_ends.pop()
        assert not open_ends or span.end_ns <= open_ends[-1]
        open_ends.append(span.end_ns)
