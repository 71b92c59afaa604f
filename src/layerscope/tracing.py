"""Trace points in user code: ``with layerscope.trace_point("nms"):`` and ``@layerscope.trace_point("decode")``.

Contract:

- **Off by default, near-zero cost when off.** Entering and leaving a trace point reads one module global
  (the active :class:`SpanRecorder`, ``None`` unless :func:`recording` is in effect) and does nothing else;
  ``benchmarks/trace_point_overhead.py`` measures the cost against an empty ``with nullcontext()`` and an
  empty function call.
- **Recording.** Inside ``with recording(recorder):`` every trace point that is entered *and* left while that
  recorder is active becomes one :class:`Span`: name, kind, native thread id and name, start and end
  (``time.perf_counter_ns``, one clock for every thread), nesting depth on its thread (0 = outermost) and the
  recorder's ``run`` at entry. A span entered before recording started, or still open when it stopped, is not
  recorded. One recording at a time: a second :func:`recording` while one is active is a ``RuntimeError``.
- **Thread-safe and nesting.** The stack of open spans is per thread, so spans on different threads never
  interleave; finished spans are appended under a lock. A ``trace_point`` object holds only its name, so
  one object may be entered from several threads at once, nested in itself, or used as a decorator on a
  recursive function.
- **Decorator.** ``@trace_point(name)`` wraps a plain (synchronous) function; the span covers the call,
  including an exception leaving it. Decorating a coroutine function is a ``TypeError`` (the span would
  time only the creation of the coroutine).
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Literal, ParamSpec, TypeVar

__all__ = ["Span", "SpanKind", "SpanRecorder", "active_recorder", "recording", "trace_point"]

P = ParamSpec("P")
R = TypeVar("R")

#: ``user``: a trace point in the user's code; ``model``: a model call made through layerscope's session;
#: ``run``: one whole iteration of a pipeline, opened by the driver.
SpanKind = Literal["user", "model", "run"]

#: The active recorder: the one global every trace point checks.
_recorder: SpanRecorder | None = None
_activation: Final = threading.Lock()


@dataclass(frozen=True)
class Span:
    """One finished trace point: times in ``perf_counter_ns`` nanoseconds; ``run`` as set by the driver."""

    name: str
    kind: SpanKind
    thread: int
    thread_name: str
    start_ns: int
    end_ns: int
    depth: int
    run: int

    @property
    def duration_ns(self) -> int:
        """End minus start, in nanoseconds."""
        return self.end_ns - self.start_ns


#: A finished span as recorded on the hot path: (name, kind, thread, thread name, start, end, depth, run).
_Raw = tuple[str, SpanKind, int, str, int, int, int, int]


class _Thread:
    """One thread's view of a recorder: its stack of open spans (name, kind, run, start) and who it is."""

    __slots__ = ("name", "native_id", "stack")

    def __init__(self) -> None:
        self.stack: list[tuple[str, SpanKind, int, int]] = []
        self.native_id = threading.get_native_id()
        self.name = threading.current_thread().name


class SpanRecorder:
    """Collects the spans of every thread while it is active. ``run`` tags the spans entered from then on.

    The hot path keeps plain tuples; :meth:`spans` turns them into :class:`Span` objects.
    """

    def __init__(self) -> None:
        self.run = -1
        self._local = threading.local()
        self._lock = threading.Lock()
        self._finished: list[_Raw] = []

    def begin(self, name: str, kind: SpanKind = "user") -> None:
        """Open a span on the calling thread."""
        self._thread().stack.append((name, kind, self.run, time.perf_counter_ns()))

    def end(self, name: str) -> None:
        """Close the innermost open span of the calling thread if it is ``name``; otherwise do nothing.

        A mismatch only happens at the edges of a recording (a span entered before it started), and such a
        span is not recorded.
        """
        end_ns = time.perf_counter_ns()
        thread = self._thread()
        stack = thread.stack
        if not stack or stack[-1][0] != name:
            return
        _, kind, run, start_ns = stack.pop()
        with self._lock:
            self._finished.append((name, kind, thread.native_id, thread.name, start_ns, end_ns, len(stack), run))

    @contextmanager
    def span(self, name: str, kind: SpanKind) -> Iterator[None]:
        """A span of ``kind`` around the ``with`` body, recorded whether or not the body raises."""
        self.begin(name, kind)
        try:
            yield
        finally:
            self.end(name)

    def spans(self) -> list[Span]:
        """The finished spans so far, every thread, ordered by start (then outermost first)."""
        with self._lock:
            finished = list(self._finished)
        return [Span(*raw) for raw in sorted(finished, key=lambda raw: (raw[4], raw[6]))]

    def _thread(self) -> _Thread:
        try:
            state: _Thread = self._local.state
        except AttributeError:
            state = self._local.state = _Thread()
        return state


def active_recorder() -> SpanRecorder | None:
    """The recorder trace points report to now, or ``None``."""
    return _recorder


@contextmanager
def recording(recorder: SpanRecorder | None = None) -> Iterator[SpanRecorder]:
    """Make ``recorder`` (a new one by default) the active recorder for the ``with`` body; yield it."""
    global _recorder  # noqa: PLW0603 -- the one global every trace point reads
    active = recorder if recorder is not None else SpanRecorder()
    with _activation:
        if _recorder is not None:
            raise RuntimeError("layerscope: another trace recording is already active")
        _recorder = active
    try:
        yield active
    finally:
        with _activation:
            _recorder = None


class trace_point:  # lower case: used like a function, ``with trace_point(...)`` / ``@trace_point(...)``
    """A named span in user code: a context manager and a decorator. See the module docstring."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if type(name) is not str or not name:
            raise TypeError(f"trace_point: name must be a non-empty str, got {name!r}")
        self.name = name

    def __enter__(self) -> None:
        recorder = _recorder
        if recorder is not None:
            recorder.begin(self.name)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        recorder = _recorder
        if recorder is not None:
            recorder.end(self.name)

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        if inspect.iscoroutinefunction(fn):
            raise TypeError(f"trace_point({self.name!r}) cannot decorate the coroutine function "
                            f"{getattr(fn, '__qualname__', fn)!r}; use `with trace_point(...)` inside it")
        name = self.name

        @functools.wraps(fn)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            recorder = _recorder
            if recorder is None:
                return fn(*args, **kwargs)
            recorder.begin(name)
            try:
                return fn(*args, **kwargs)
            finally:
                recorder.end(name)

        return traced

    def __repr__(self) -> str:
        return f"trace_point({self.name!r})"
