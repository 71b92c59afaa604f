"""``layerscope.trace_point``: spans in user code, nesting, threads, the decorator, and cost when off."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import layerscope
from layerscope import tracing
from layerscope.tracing import SpanRecorder, recording, trace_point


def test_nothing_is_recorded_when_no_recording_is_active() -> None:
    recorder = SpanRecorder()
    with trace_point("outside"):
        pass
    assert tracing.active_recorder() is None and recorder.spans() == []


def test_nesting_gives_depths_and_contained_intervals() -> None:
    with recording() as recorder, trace_point("outer"):
        with trace_point("inner"):
            time.sleep(0.001)
        with trace_point("inner"):
            pass
    outer, first, second = recorder.spans()
    assert (outer.name, outer.depth, first.depth, second.depth) == ("outer", 0, 1, 1)
    assert outer.start_ns <= first.start_ns < first.end_ns <= second.start_ns <= second.end_ns <= outer.end_ns
    assert first.duration_ns >= 1_000_000 and outer.kind == "user"
    assert outer.thread == threading.get_native_id() and outer.thread_name == threading.current_thread().name


def test_the_run_tag_comes_from_the_recorder_at_entry() -> None:
    with recording() as recorder:
        for run in range(3):
            recorder.run = run
            with trace_point("step"):
                pass
    assert [s.run for s in recorder.spans()] == [0, 1, 2]


def test_a_span_is_recorded_when_the_body_raises() -> None:
    with recording() as recorder, pytest.raises(ValueError), trace_point("boom"):
        raise ValueError("x")
    assert [s.name for s in recorder.spans()] == ["boom"]


def test_decorator_keeps_the_function_and_records_each_call() -> None:
    @trace_point("decode")
    def decode(x: int, *, scale: int = 2) -> int:
        """Doc."""
        return x * scale

    assert decode.__name__ == "decode" and decode.__doc__ == "Doc."
    assert decode(3) == 6  # not recording: a plain call
    with recording() as recorder:
        assert decode(3, scale=3) == 9
        assert decode(1) == 2
    assert [s.name for s in recorder.spans()] == ["decode", "decode"]


def test_decorator_on_a_recursive_function_nests() -> None:
    @trace_point("fact")
    def fact(n: int) -> int:
        return 1 if n <= 1 else n * fact(n - 1)

    with recording() as recorder:
        assert fact(4) == 24
    assert sorted(s.depth for s in recorder.spans()) == [0, 1, 2, 3]


def test_decorator_records_an_exception_and_reraises() -> None:
    @trace_point("fails")
    def fails() -> None:
        raise KeyError("k")

    with recording() as recorder, pytest.raises(KeyError):
        fails()
    assert [s.name for s in recorder.spans()] == ["fails"]


def test_coroutine_functions_and_bad_names_are_refused() -> None:
    async def coroutine() -> None:
        return None

    with pytest.raises(TypeError, match="coroutine"):
        trace_point("c")(coroutine)
    for bad in ("", None, 3):
        with pytest.raises(TypeError, match="non-empty str"):
            trace_point(bad)  # type: ignore[arg-type]


def test_one_object_is_safe_across_threads_and_nested_in_itself() -> None:
    point = trace_point("shared")
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        for _ in range(50):
            with point, point:
                pass

    with recording() as recorder:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    spans = recorder.spans()
    assert len(spans) == 4 * 50 * 2
    assert len({s.thread for s in spans}) == 4
    for thread_id in {s.thread for s in spans}:
        mine = [s for s in spans if s.thread == thread_id]
        assert sorted(s.depth for s in mine) == [0] * 50 + [1] * 50


def test_spans_at_the_edges_of_a_recording_are_dropped() -> None:
    recorder = SpanRecorder()
    point = trace_point("edge")
    point.__enter__()  # entered before recording starts
    with recording(recorder):
        point.__exit__(None, None, None)  # left while recording: no matching open span, ignored
        inner = trace_point("open")
        inner.__enter__()  # still open when recording stops
    inner.__exit__(None, None, None)
    assert recorder.spans() == []


def test_one_recording_at_a_time() -> None:
    with recording(), pytest.raises(RuntimeError, match="already active"), recording():
        pass
    assert tracing.active_recorder() is None


def test_trace_point_is_exported_lazily() -> None:
    assert layerscope.trace_point is trace_point
    code = ("import sys, layerscope; assert 'layerscope.tracing' not in sys.modules; "
            "layerscope.trace_point; assert 'layerscope.tracing' in sys.modules; "
            "assert 'onnx' not in sys.modules and 'numpy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = layerscope.nope  # type: ignore[attr-defined]
