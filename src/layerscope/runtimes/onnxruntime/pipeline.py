"""Profile a whole inference pipeline: the user's pre- and post-processing around a model called through layerscope.

Example::

    import layerscope

    @layerscope.trace_point("decode")
    def decode(outputs): ...

    def pipeline(model):                      # called once per run with a ModelSession
        with layerscope.trace_point("preprocess"):
            feeds = {"images": letterbox(frame)}
        outputs = model.run(None, feeds)      # a span named "model"; its kernels when profiled
        with layerscope.trace_point("nms"):
            return nms(decode(outputs))

    run = layerscope.pipeline.profile(pipeline, "yolov5s.onnx", runs=20, threads=1)   # the run file (a dict)

Contract of :func:`profile_pipeline`:

- the function is called ``warmup`` times, then ``runs`` times (the *timed* phase) with a :class:`ModelSession`
  on a plain ONNX Runtime session; every call is a root span of kind ``run`` and every ``model.run`` a span
  of kind ``model``. Stage statistics, the end-to-end latency, the breakdown and the model's latency come
  from this phase, where the runtime's profiler is off;
- with ``layers`` the same is done again (the *profiled* phase) on a session with ONNX Runtime's profiler
  on: its kernels give the per-layer :class:`~layerscope.measure.profile.Measurement` (the fusion map and
  the per-run split of :mod:`layerscope.measure.profile`), and the median run of this phase, with its
  model kernels placed on the pipeline's clock, is the one kept for the trace. The k-th model call of the
  phase is matched with ONNX Runtime's k-th ``model_run``; its kernels are placed relative to the start of
  the ``model`` span and clipped to it, so they nest inside it (calls from several threads at once may be
  matched out of order);
- **breakdown** of one run (its root span): *model* = time covered by ``model`` spans; *pre* = time covered
  by user spans before the first model call starts; *post* = time covered by user spans after the last
  model call ends; *other* = the rest (code outside trace points, user spans between model calls). A run
  without a model call has pre = post = 0. :class:`Breakdown` holds the means over the runs, so the four
  add up to the mean end-to-end time;
- **stages**: one per (kind, name) of the user and model spans. Per run, *total* = time covered by its
  spans (a union of intervals: recursion and parallel threads are not double-counted, 0 in a run where it
  does not occur) and *self* = the sum over its spans of their duration minus their child spans' on the
  same thread; the statistics are over the runs. Its *parent* is the span most often directly around it
  (``None``: the run itself). A stage's kind is where most of its spans sit: ``pre``,
  ``post``, ``between`` (overlapping a model call or between two), ``other`` (a run without a model call),
  or ``model``;
- an exception from the user's function (or from ONNX Runtime inside its ``model.run``) is a
  :class:`UserCodeError` (exit 2) naming the innermost line of the function's own file, chained to the
  original; Ctrl-C keeps the runs completed so far (``interrupted``) and skips what is left.
"""

from __future__ import annotations

import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import onnx

from layerscope import tracing
from layerscope.errors import InputError, RuntimeFailure
from layerscope.measure.fusion import FusionMap, build_fusion_map
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernel_trace import TraceEvent
from layerscope.measure.profile import Measurement, kernel_results, layer_results, run_times
from layerscope.measure.session import SessionConfig
from layerscope.measure.subgraphs import exclusive_events, with_subgraph_kernels
from layerscope.model.types import Graph
from layerscope.runfile.models import Layer, Pipeline, RunFile
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime.session import is_runtime_error, make_session, ort_failure
from layerscope.runtimes.onnxruntime.trace import events_between, load_events, model_run_spans, parse_profile
from layerscope.stats import LatencyStats, summarize
from layerscope.tempdirs import scratch
from layerscope.tracing import Span, SpanRecorder

__all__ = ["MODEL_SPAN", "Breakdown", "KernelSpan", "ModelSession", "PipelineFn", "PipelineResult", "StageResult",
           "UserCodeError", "breakdown_of_run", "describe_exception", "pipeline_section", "profile",
           "profile_pipeline", "run_from_pipeline", "session", "stage_results"]

#: Name of the span every :meth:`ModelSession.run` call records.
MODEL_SPAN: Final = "model"
#: Items in the run file's ``pipeline.top`` ranking.
TOP_ITEMS: Final = 20
#: progress(phase, done, total): phases "warmup", "timed", "warmup-profiled", "profiled".
Progress = Callable[[str, int, int], None]
StageKind = Literal["pre", "post", "between", "other", "model"]


class UserCodeError(InputError):
    """The user's pipeline code (or the model call it made) raised; the original is the ``__cause__``."""


class ModelSession:
    """An ONNX Runtime session created through layerscope: each :meth:`run` is a span named ``"model"``.

    Outside a recording it is a thin pass-through to ``InferenceSession.run``.
    """

    def __init__(self, model: str | os.PathLike[str], config: SessionConfig | None = None, *,
                 example_inputs: Mapping[str, np.ndarray] | None = None) -> None:
        self.path = Path(model)
        self.config = config or SessionConfig()
        self._session: Any = make_session(self.path, self.config)
        self._examples = dict(example_inputs) if example_inputs is not None else None

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: Any = None) -> list[Any]:
        """``InferenceSession.run``, recorded as a ``model`` span while a recording is active."""
        recorder = tracing.active_recorder()
        try:
            outputs: list[Any]
            if recorder is None:
                outputs = self._session.run(output_names, input_feed, run_options)
                return outputs
            with recorder.span(MODEL_SPAN, "model"):
                outputs = self._session.run(output_names, input_feed, run_options)
                return outputs
        except Exception as exc:  # ONNX Runtime's own: naming the seeded inputs (exit 2)
            if is_runtime_error(exc):
                raise ort_failure(exc, input_feed) from exc
            raise

    @cached_property
    def example_inputs(self) -> dict[str, np.ndarray]:
        """Seeded random inputs with the model's shapes and dtypes (:func:`~layerscope.measure.inputs.make_inputs`)."""
        if self._examples is not None:
            return self._examples
        from layerscope.model import load_model

        return make_inputs(load_model(self.path))

    def get_inputs(self) -> Any:
        """The runtime's input descriptions (``NodeArg`` list)."""
        return self._session.get_inputs()

    def get_outputs(self) -> Any:
        """The runtime's output descriptions (``NodeArg`` list)."""
        return self._session.get_outputs()

    @property
    def ort_session(self) -> Any:
        """The underlying ``onnxruntime.InferenceSession``."""
        return self._session

    def _swap(self, ort_session: Any) -> None:
        self._session = ort_session


def session(model: str | os.PathLike[str], *, threads: int = 0, provider: str = "cpu",
            opt_level: str = "all") -> ModelSession:
    """A :class:`ModelSession` on ``model`` (``layerscope.pipeline.session("m.onnx")``)."""
    return ModelSession(model, SessionConfig(provider=provider, threads=threads, opt_level=opt_level))


#: The user's pipeline: called once per run with the model session; its return value is ignored.
PipelineFn = Callable[[ModelSession], object]


@dataclass(frozen=True)
class Breakdown:
    """Mean time per run in each part of the pipeline (µs); the four add up to ``end_to_end_us``."""

    pre_us: float
    model_us: float
    post_us: float
    other_us: float

    @property
    def end_to_end_us(self) -> float:
        """Pre + model + post + other."""
        return self.pre_us + self.model_us + self.post_us + self.other_us


@dataclass(frozen=True)
class StageResult:
    """One stage (user trace point or the model) over the runs: time covered and self time per run."""

    name: str
    kind: StageKind
    depth: int
    parent: str | None
    calls_per_run: float
    total: LatencyStats
    self_time: LatencyStats


@dataclass(frozen=True)
class KernelSpan:
    """A model kernel of the traced run, on the pipeline's clock (µs from the run's start)."""

    name: str
    thread: int
    start_us: float
    duration_us: float
    layers: tuple[str, ...]


@dataclass(frozen=True)
class PipelineResult:
    """Everything :func:`profile_pipeline` measured. ``trace_*``: the one run kept for the timeline."""

    function: str
    runs: int
    warmup: int
    end_to_end: LatencyStats
    breakdown: Breakdown
    stages: tuple[StageResult, ...]
    model_calls_per_run: float
    trace_phase: Literal["timed", "profiled"]
    trace_run: int
    trace_spans: tuple[Span, ...]
    trace_kernels: tuple[KernelSpan, ...]
    measurement: Measurement | None
    interrupted: bool = False


@dataclass(frozen=True)
class _Phase:
    """The spans of one phase (warm-up runs have ``run < 0``) and how many runs completed."""

    spans: tuple[Span, ...]
    completed: int
    interrupted: bool

    def measured(self) -> list[Span]:
        return [s for s in self.spans if 0 <= s.run < self.completed]

    def warm_model_calls(self) -> int:
        return sum(1 for s in self.spans if s.kind == "model" and s.run < 0)


# --- running ----------------------------------------------------------------------------------------------------

def profile_pipeline(fn: PipelineFn, model: str | os.PathLike[str], *, runs: int = 20, warmup: int = 3,
                     config: SessionConfig | None = None, layers: bool = True, graph: Graph | None = None,
                     weights: Mapping[str, float] | None = None, seed: int = 0, name: str | None = None,
                     progress: Progress | None = None) -> PipelineResult:
    """Run ``fn`` around a session on ``model`` and measure it. See the module docstring for the contract.

    ``weights`` (estimated µs per layer) split fused kernels over their layers, as in ``layerscope profile``.
    """
    if runs < 1 or warmup < 0:
        raise ValueError("profile_pipeline: runs must be >= 1 and warmup >= 0")
    from layerscope.model import load_model

    graph = graph if graph is not None else load_model(model)
    config = config or SessionConfig()
    label = name or getattr(fn, "__qualname__", None) or repr(fn)
    model_session = ModelSession(graph.path, config, example_inputs=make_inputs(graph, seed=seed))
    timed = _run_phase(fn, model_session, label=label, runs=runs, warmup=warmup, phases=("warmup", "timed"),
                       progress=progress)
    measurement: Measurement | None = None
    trace_phase: Literal["timed", "profiled"] = "timed"
    trace_source = timed
    kernels: tuple[KernelSpan, ...] = ()
    trace_run = _median_run(timed.measured())
    has_model = any(s.kind == "model" for s in timed.measured())
    interrupted = timed.interrupted
    if layers and has_model and not interrupted:
        profiled = _profiled_phase(fn, model_session, graph=graph, config=config, label=label, runs=runs,
                                   warmup=warmup, progress=progress)
        if profiled is None:
            interrupted = True
        else:
            phase, events, fusion, provider = profiled
            measurement = _measurement(graph, timed, phase, events=events, fusion=fusion, config=config,
                                       provider=provider, weights=weights or {})
            trace_phase, trace_source = "profiled", phase
            trace_run = _median_run(phase.measured())
            kernels = _place_kernels(events, phase, trace_run, fusion)
    return _result(label, timed, warmup=warmup, measurement=measurement, trace_phase=trace_phase,
                   trace_source=trace_source, trace_run=trace_run, kernels=kernels, interrupted=interrupted)


def _profiled_phase(fn: PipelineFn, model: ModelSession, *, graph: Graph, config: SessionConfig, label: str,
                    runs: int, warmup: int, progress: Progress | None
                    ) -> tuple[_Phase, list[dict[str, Any]], FusionMap, str] | None:
    """The pipeline again on a session with ONNX Runtime's profiler on: (phase, profile events, fusion map,
    provider); ``None`` when Ctrl-C came before a measured run completed."""
    with scratch("pipeline") as tmp:
        optimized_path = str(Path(tmp) / "optimized.onnx")
        ort_session = make_session(graph.path, config, profile_prefix=str(Path(tmp) / "ort"),
                                   optimized_model_path=optimized_path)
        model._swap(ort_session)
        try:
            phase = _run_phase(fn, model, label=label, runs=runs, warmup=warmup,
                               phases=("warmup-profiled", "profiled"), progress=progress)
        except KeyboardInterrupt:
            return None
        finally:
            profile_file = ort_session.end_profiling()
        optimized = onnx.load(optimized_path, load_external_data=False)
        events = exclusive_events(load_events(profile_file), optimized)
        provider = str(ort_session.get_providers()[0])
    return phase, events, with_subgraph_kernels(build_fusion_map(graph, optimized), graph, optimized), provider


def _run_phase(fn: PipelineFn, model: ModelSession, *, label: str, runs: int, warmup: int, phases: tuple[str, str],
               progress: Progress | None) -> _Phase:
    """``warmup`` then ``runs`` calls of ``fn`` under a recorder; Ctrl-C after a measured run keeps them."""
    recorder = SpanRecorder()
    completed = 0
    interrupted = False
    with tracing.recording(recorder):
        try:
            for index in range(-warmup, runs):
                recorder.run = index
                with recorder.span(label, "run"):
                    _call_user(fn, model, label)
                completed = index + 1
                if progress is not None:
                    phase, done, total = (phases[0], warmup + index + 1, warmup) if index < 0 else \
                        (phases[1], index + 1, runs)
                    progress(phase, done, total)
        except KeyboardInterrupt:
            if completed < 1:
                raise
            interrupted = True
    return _Phase(tuple(recorder.spans()), max(completed, 0), interrupted)


def _call_user(fn: PipelineFn, model: ModelSession, label: str) -> None:
    try:
        fn(model)
    except RuntimeFailure:  # the model call failed: its own message names the inputs
        raise
    except (Exception, SystemExit) as exc:
        code = getattr(fn, "__code__", None)
        raise UserCodeError(f"pipeline function {label} raised {describe_exception(exc, code and code.co_filename)}",
                            hint="rerun with --debug for the traceback") from exc


def describe_exception(exc: BaseException, filename: str | None = None) -> str:
    """``Type: first line of the message at FILE:LINE in FUNCTION``: the innermost frame in ``filename`` (the
    user's own file), else the innermost frame; a ``SyntaxError`` gives its own file and line."""
    text = str(exc).strip()
    message = f"{type(exc).__name__}: {text.splitlines()[0] if text else '(no message)'}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{type(exc).__name__}: {exc.msg} at {Path(exc.filename).name}:{exc.lineno}"
    frames = list(traceback.extract_tb(exc.__traceback__))
    own = [f for f in frames if filename is not None and f.filename == filename] or frames
    if not own:
        return message
    frame = own[-1]
    return f"{message} at {Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def _median_run(spans: Sequence[Span]) -> int:
    """The run whose root span has the median duration (-1 when there is none)."""
    roots = sorted((s for s in spans if s.kind == "run"), key=lambda s: (s.duration_ns, s.run))
    return roots[len(roots) // 2].run if roots else -1


def _measurement(graph: Graph, timed: _Phase, profiled: _Phase, *, events: list[dict[str, Any]], fusion: FusionMap,
                 config: SessionConfig, provider: str, weights: Mapping[str, float]) -> Measurement | None:
    """The per-layer measurement of the profiled phase; latency = the timed phase's model calls."""
    import onnxruntime as ort

    data = parse_profile(events, skip_runs=profiled.warm_model_calls())
    model_calls = [s.duration_ns / 1e3 for s in timed.measured() if s.kind == "model"]
    if not data.run_durations_us or not model_calls:
        return None
    kernels = kernel_results(data, fusion)
    return Measurement(
        config=config, backend_version=ort.__version__, provider=provider, warmup=profiled.warm_model_calls(),
        kernels=kernels, layers=layer_results(graph, kernels, weights), fusion=fusion, machine=machine_info(),
        median_run=data.median_run, interrupted=profiled.interrupted,
        **run_times(model_calls, data.run_durations_us, kernels))


def _place_kernels(events: Sequence[dict[str, Any]], phase: _Phase, run: int,
                   fusion: FusionMap) -> tuple[KernelSpan, ...]:
    """The kernels of run ``run``'s model calls, placed relative to that run's root span."""
    root = next((s for s in phase.spans if s.kind == "run" and s.run == run), None)
    if root is None:
        return ()
    model_runs = model_run_spans(events)
    calls = sorted((s for s in phase.spans if s.kind == "model"), key=lambda s: s.start_ns)
    placed: list[KernelSpan] = []
    for call, (ts, dur) in zip(calls, model_runs, strict=False):
        if call.run != run:
            continue
        window = events_between(events, ts, ts + dur)
        offset_us = (call.start_ns - root.start_ns) / 1e3
        limit_us = call.duration_ns / 1e3
        run_events = parse_profile(window).median_run
        known = fusion.profiled_names(e.name for e in run_events)
        placed.extend(_kernel_span(event, offset_us, limit_us, fusion, known.get(event.name, ""))
                      for event in run_events)
    return tuple(placed)


def _kernel_span(event: TraceEvent, offset_us: float, limit_us: float, fusion: FusionMap,
                 kernel: str) -> KernelSpan:
    """``event`` (kernel ``kernel`` of the map) moved by ``offset_us`` and clipped to end no later than
    ``limit_us`` after it (the model span)."""
    mapping = fusion.kernels.get(kernel)
    start_us = min(event.start_us, limit_us)
    return KernelSpan(event.name, event.thread, offset_us + start_us,
                      max(0.0, min(event.duration_us, limit_us - start_us)), mapping.layers if mapping else ())


# --- analysis (pure) --------------------------------------------------------------------------------------------

def _result(label: str, timed: _Phase, *, warmup: int, measurement: Measurement | None,
            trace_phase: Literal["timed", "profiled"], trace_source: _Phase, trace_run: int,
            kernels: tuple[KernelSpan, ...], interrupted: bool) -> PipelineResult:
    by_run = _by_run(timed.measured())
    parts = np.array([breakdown_of_run(spans) for spans in by_run.values()], dtype=np.float64) / 1e3
    pre, model, post, other = (float(v) for v in parts.mean(axis=0))
    roots = [s.duration_ns / 1e3 for s in timed.measured() if s.kind == "run"]
    model_calls = sum(1 for s in timed.measured() if s.kind == "model")
    return PipelineResult(
        function=label, runs=len(by_run), warmup=warmup, end_to_end=summarize(roots),
        breakdown=Breakdown(pre, model, post, other), stages=stage_results(by_run.values()),
        model_calls_per_run=model_calls / len(by_run), trace_phase=trace_phase, trace_run=trace_run,
        trace_spans=tuple(s for s in trace_source.spans if s.run == trace_run), trace_kernels=kernels,
        measurement=measurement, interrupted=interrupted or bool(measurement and measurement.interrupted))


def _by_run(spans: Iterable[Span]) -> dict[int, list[Span]]:
    """Spans grouped by run, only runs with a root span, in run order."""
    grouped: dict[int, list[Span]] = {}
    for span in spans:
        grouped.setdefault(span.run, []).append(span)
    return {run: grouped[run] for run in sorted(grouped) if any(s.kind == "run" for s in grouped[run])}


def _covered_ns(spans: Iterable[Span], low: int, high: int) -> int:
    """Length of the union of the spans' intervals clipped to [low, high] (ns)."""
    intervals = sorted((max(s.start_ns, low), min(s.end_ns, high)) for s in spans)
    covered, reach = 0, low
    for start, end in intervals:
        begin = max(start, reach)
        if end > begin:
            covered += end - begin
            reach = end
    return covered


def breakdown_of_run(spans: Sequence[Span]) -> tuple[int, int, int, int]:
    """(pre, model, post, other) in ns for one run's spans (its root span included). See the module docstring."""
    root = next(s for s in spans if s.kind == "run")
    models = [s for s in spans if s.kind == "model"]
    users = [s for s in spans if s.kind == "user"]
    model = _covered_ns(models, root.start_ns, root.end_ns)
    pre = post = 0
    if models:
        first = min(s.start_ns for s in models)
        last = max(s.end_ns for s in models)
        pre = _covered_ns(users, root.start_ns, first)
        post = _covered_ns(users, last, root.end_ns)
    return pre, model, post, max(0, root.duration_ns - pre - model - post)


def _kind(span: Span, model_window: tuple[int, int] | None) -> StageKind:
    """Where ``span`` sits relative to the run's model calls (first start, last end)."""
    if span.kind == "model":
        return "model"
    if model_window is None:
        return "other"
    if span.end_ns <= model_window[0]:
        return "pre"
    if span.start_ns >= model_window[1]:
        return "post"
    return "between"


@dataclass(frozen=True)
class _Nesting:
    """One run's spans with, for each, the index of the span directly around it on its thread and the time of
    the spans directly inside it (one sweep per thread: spans on a thread nest exactly, by depth)."""

    spans: Sequence[Span]
    parent: Sequence[int | None]
    children_ns: Sequence[int]
    model_window: tuple[int, int] | None

    @staticmethod
    def of(spans: Sequence[Span]) -> _Nesting:
        parent: list[int | None] = [None] * len(spans)
        children_ns = [0] * len(spans)
        by_thread: dict[int, list[int]] = {}
        for index, span in enumerate(spans):
            by_thread.setdefault(span.thread, []).append(index)
        for indices in by_thread.values():
            stack: list[int] = []
            for index in sorted(indices, key=lambda i: (spans[i].start_ns, spans[i].depth)):
                while stack and spans[stack[-1]].depth >= spans[index].depth:
                    stack.pop()
                if stack:
                    parent[index] = stack[-1]
                    children_ns[stack[-1]] += spans[index].duration_ns
                stack.append(index)
        models = [s for s in spans if s.kind == "model"]
        window = (min(s.start_ns for s in models), max(s.end_ns for s in models)) if models else None
        return _Nesting(spans, parent, children_ns, window)

    def parent_name(self, index: int) -> str | None:
        """The user or model span directly around span ``index`` (``None``: the run itself)."""
        around = self.parent[index]
        return None if around is None or self.spans[around].kind == "run" else self.spans[around].name


@dataclass
class _StageSamples:
    """What one stage did in every run: time covered and self time per run (µs), and where its spans sit."""

    totals_us: np.ndarray
    selves_us: np.ndarray
    kinds: Counter[StageKind]
    parents: Counter[str | None]
    depth: int
    calls: int = 0

    def add(self, run: int, members: Sequence[int], nesting: _Nesting) -> None:
        spans = [nesting.spans[i] for i in members]
        self.totals_us[run] = _covered_ns(spans, 0, 2**63 - 1) / 1e3
        self.selves_us[run] = sum(nesting.spans[i].duration_ns - nesting.children_ns[i] for i in members) / 1e3
        self.kinds.update(_kind(s, nesting.model_window) for s in spans)
        self.parents.update(nesting.parent_name(i) for i in members)
        self.depth = min(self.depth, *(s.depth for s in spans))
        self.calls += len(members)


def stage_results(runs: Iterable[Sequence[Span]]) -> tuple[StageResult, ...]:
    """One :class:`StageResult` per (kind, name) of the user and model spans, by median total time, longest first."""
    run_list = [list(spans) for spans in runs]
    stages: dict[tuple[str, str], _StageSamples] = {}
    for run, spans in enumerate(run_list):
        nesting = _Nesting.of(spans)
        members: dict[tuple[str, str], list[int]] = {}
        for index, span in enumerate(spans):
            if span.kind != "run":
                members.setdefault((span.kind, span.name), []).append(index)
        for key, indices in members.items():
            if key not in stages:
                stages[key] = _StageSamples(np.zeros(len(run_list)), np.zeros(len(run_list)), Counter(), Counter(),
                                            depth=spans[indices[0]].depth)
            stages[key].add(run, indices, nesting)
    results = [StageResult(name=key[1], kind=st.kinds.most_common(1)[0][0], depth=st.depth,
                           parent=st.parents.most_common(1)[0][0], calls_per_run=st.calls / len(run_list),
                           total=summarize(st.totals_us), self_time=summarize(st.selves_us))
               for key, st in stages.items()]
    return tuple(sorted(results, key=lambda r: (-r.total.median_us, r.name)))


# --- the run file -----------------------------------------------------------------------------------------------

def _us(value: float) -> float:
    return round(value, 3)


def pipeline_section(result: PipelineResult, layers: Sequence[Layer] = ()) -> Pipeline:
    """The run file's ``pipeline`` section. ``layers``: the run's layers, for the ``top`` ranking.

    ``spans`` / ``kernels`` are the traced run's, µs from its start; ``top`` ranks user stages by median self
    time beside the model's layers by measured median, each with its share of the median end-to-end time.
    """
    e2e = result.end_to_end.median_us
    b = result.breakdown
    origin_ns = next((s.start_ns for s in result.trace_spans if s.kind == "run"), 0)
    return Pipeline.model_validate({
        "function": result.function,
        "runs": result.runs,
        "warmup": result.warmup,
        "interrupted": result.interrupted,
        "model_calls_per_run": round(result.model_calls_per_run, 3),
        "end_to_end": result.end_to_end.to_dict(),
        "breakdown": {"pre_us": _us(b.pre_us), "model_us": _us(b.model_us), "post_us": _us(b.post_us),
                      "other_us": _us(b.other_us), "end_to_end_us": _us(b.end_to_end_us), "statistic": "mean"},
        "stages": [{"name": s.name, "kind": s.kind, "depth": s.depth, "parent": s.parent,
                    "calls_per_run": round(s.calls_per_run, 3), "stats": s.total.to_dict(),
                    "self": s.self_time.to_dict()} for s in result.stages],
        "top": _top(result, layers, e2e),
        "trace": {"phase": result.trace_phase, "run": result.trace_run},
        "spans": [_span_dict(s, origin_ns) for s in result.trace_spans],
        "kernels": [{"name": k.name, "thread": k.thread, "start_us": _us(k.start_us),
                     "duration_us": _us(k.duration_us), "layers": list(k.layers)} for k in result.trace_kernels],
        "source": "layerscope pipeline",
    })


def _span_dict(span: Span, origin_ns: int) -> dict[str, Any]:
    return {"name": span.name, "kind": span.kind, "thread": span.thread, "thread_name": span.thread_name,
            "start_us": _us((span.start_ns - origin_ns) / 1e3), "duration_us": _us(span.duration_ns / 1e3),
            "depth": span.depth, "run": span.run}


def _top(result: PipelineResult, layers: Sequence[Layer], e2e_us: float) -> list[dict[str, Any]]:
    items: list[tuple[float, float, str, str]] = [
        (s.self_time.median_us, s.self_time.p90_us, s.name, s.kind) for s in result.stages if s.kind != "model"]
    items += [(float(m.median_us), float(m.p90_us or 0.0), layer.id, "layer") for layer in layers
              if (m := layer.measured) is not None and m.samples and m.median_us is not None]
    ranked = sorted(items, key=lambda item: (-item[0], item[2]))[:TOP_ITEMS]
    return [{"name": name, "kind": kind, "median_us": _us(median), "p90_us": _us(p90),
             "share": round(median / e2e_us, 6) if e2e_us > 0 else 0.0} for median, p90, name, kind in ranked]


def run_from_pipeline(result: PipelineResult, graph: Graph, run: RunFile) -> RunFile:
    """``run`` (from :func:`~layerscope.run.estimate_run`) with the measurement and ``pipeline`` sections."""
    from layerscope.run import add_measurement

    if result.measurement is not None:
        run = add_measurement(run, result.measurement, source="layerscope pipeline",
                              latency_source="uninstrumented model.run calls inside the pipeline")
    return run.model_copy(update={"pipeline": pipeline_section(result, run.layers)})


def profile(fn: PipelineFn, model: str | os.PathLike[str], *, runs: int = 20, warmup: int = 3, threads: int = 0,
            provider: str = "cpu", opt_level: str = "all", target: str = "host", layers: bool = True,
            shapes: Mapping[str, tuple[int, ...]] | None = None, dims: Mapping[str, int] | None = None,
            seed: int = 0, name: str | None = None, progress: Progress | None = None) -> RunFile:
    """Profile ``fn`` around ``model`` and return the typed run (estimate on ``target``, measurement, pipeline)."""
    from layerscope.estimator import estimate_graph
    from layerscope.model import load_model
    from layerscope.run import estimate_run
    from layerscope.targets import load_profile

    graph = load_model(model, dict(shapes or {}), dict(dims or {}))
    hardware = load_profile(target)
    estimate = estimate_graph(graph, hardware)
    result = profile_pipeline(fn, graph.path, runs=runs, warmup=warmup, layers=layers, graph=graph, seed=seed,
                              config=SessionConfig(provider=provider, threads=threads, opt_level=opt_level),
                              weights={e.layer_id: e.latency_us for e in estimate.layers}, name=name,
                              progress=progress)
    return run_from_pipeline(result, graph, estimate_run(graph, estimate, hardware, "pipeline"))
