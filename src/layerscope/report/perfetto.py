"""The run as a Perfetto / Chrome trace (JSON object format), for ui.perfetto.dev or chrome://tracing.

A pure function of a saved run. Contract of :func:`trace_document`:

- process 1 "Measured" holds the median profiled run's kernels, one track (thread) per runtime thread; process 2
  "Estimated" holds the estimated layers, one track per unit and core (the timeline's schedule, or the
  roofline's layers one after another when the run has no timeline), and counter tracks (``ph: "C"``) of DDR
  bandwidth (MB/s), DDR utilization and unit utilization (%) over the frame. Each process starts at 0 on its own
  clock: one is a measurement on this machine, the other an estimate on a profile. Process 3 "Pipeline" holds
  the run's ``pipeline`` section when it has one (``layerscope pipeline``): one track per Python thread, with the
  traced run's root span, the user's trace points, the ``model`` spans and, inside each model span, its kernels
  named after the source layers they cover; its clock starts at 0 at the start of the traced run. Names come from
  ``process_name`` / ``thread_name`` metadata events; sort order from ``*_sort_index``;
- complete events (``ph: "X"``) on one track nest exactly: two slices are disjoint or one contains the other.
  Times are handled in integer nanoseconds; a slice that starts inside an open slice and ends after it (partial
  overlap, e.g. from rounding) cuts the open slice short at its own start. This is deterministic and counted in
  ``otherData.overlaps_fixed``;
- ``ts`` and ``dur`` are microseconds with at most three decimals, so ``round(x * 1000)`` is exact;
- the same run gives identical bytes (:func:`trace_bytes`: sorted keys, fixed separators, gzip with mtime 0).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.report.views.common import Run
from layerscope.report.views.timeline import Slice, Temporal, Track, Tracks, estimated_tracks, measured_tracks, temporal
from layerscope.runfile.models import PipelineKernel, PipelineSpan, RunFile

MEASURED_PID = 1
ESTIMATED_PID = 2
PIPELINE_PID = 3


@dataclass(frozen=True)
class _Span:
    """A slice in integer nanoseconds, ready to nest."""

    start_ns: int
    end_ns: int
    slice: Slice


def to_ns(us: float) -> int:
    """Microseconds to integer nanoseconds (round half to even, as Python rounds)."""
    return round(us * 1000)


def nest_exactly(slices: Sequence[Slice]) -> tuple[list[_Span], int]:
    """The slices of one track in start order, nested exactly; returns them and how many were cut short.

    Sorted by (start, longest first, name). Walking a stack of open slices, a new slice closes every open slice
    that ended before it starts; an open slice that ends inside the new one (partial overlap) is cut at the new
    slice's start. A negative duration becomes 0.
    """
    spans = sorted((_Span(to_ns(s.start_us), max(to_ns(s.start_us), to_ns(s.end_us)), s) for s in slices),
                   key=lambda sp: (sp.start_ns, -sp.end_ns, sp.slice.name))
    ends: list[int] = []  # end of each open span, innermost last
    out: list[_Span] = []
    open_index: list[int] = []  # index into ``out`` of each open span
    fixed = 0
    for span in spans:
        while ends:
            if ends[-1] <= span.start_ns:
                ends.pop()
                open_index.pop()
            elif ends[-1] < span.end_ns:  # partial overlap: cut the open span at this one's start
                i = open_index.pop()
                out[i] = _Span(out[i].start_ns, span.start_ns, out[i].slice)
                ends.pop()
                fixed += 1
            else:
                break
        out.append(span)
        ends.append(span.end_ns)
        open_index.append(len(out) - 1)
    return out, fixed


def _us(ns: int) -> float:
    return ns / 1000


def _metadata(pid: int, name: str, sort_index: int, tracks: Sequence[Track]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}},
        {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": sort_index}},
    ]
    for tid, track in enumerate(tracks, 1):
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": track.name}})
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    return events


def _slice_events(pid: int, tracks: Sequence[Track], category: str,
                  layer_args: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    events: list[dict[str, Any]] = []
    fixed = 0
    for tid, track in enumerate(tracks, 1):
        spans, cut = nest_exactly(track.slices)
        fixed += cut
        for span in spans:
            args: dict[str, Any] = dict(span.slice.args)
            if span.slice.layer is not None and span.slice.layer < len(layer_args):
                args.update(layer_args[span.slice.layer])
            events.append({"ph": "X", "pid": pid, "tid": tid, "cat": category, "name": span.slice.name,
                           "ts": _us(span.start_ns), "dur": _us(span.end_ns - span.start_ns), "args": args})
    return events, fixed


def _counter_events(series: Temporal) -> list[dict[str, Any]]:
    """DDR bandwidth, DDR utilization and unit utilization, one sample per interval and a closing 0."""
    events: list[dict[str, Any]] = []
    end = round(len(series.starts_us) * series.interval_us, 3)
    for i, start in enumerate([*series.starts_us, end]):
        last = i == len(series.starts_us)

        def at(values: Sequence[float], i: int = i, last: bool = last) -> float:
            return 0.0 if last or i >= len(values) else float(values[i])

        events.append({"ph": "C", "pid": ESTIMATED_PID, "tid": 0, "name": "DDR bandwidth (MB/s)", "ts": start,
                       "args": {"load": at(series.ddr_load_mb_per_s), "store": at(series.ddr_store_mb_per_s)}})
        events.append({"ph": "C", "pid": ESTIMATED_PID, "tid": 0, "name": "DDR utilization (%)", "ts": start,
                       "args": {"ddr": round(100 * at(series.ddr_utilization), 4),
                                **({"of_nominal": round(100 * at(series.ddr_nominal_utilization), 4)}
                                   if series.ddr_nominal_utilization else {})}})
        if series.utilization:
            events.append({"ph": "C", "pid": ESTIMATED_PID, "tid": 0, "name": "unit utilization (%)", "ts": start,
                           "args": {unit: round(100 * at(values), 4) for unit, values in series.utilization}})
    return events


def _layer_args(run: Run) -> list[dict[str, Any]]:
    """Per layer, what an estimated slice shows when clicked: op, estimated µs, bound, unit."""
    out = []
    for layer in run.layers:
        est = layer.est
        args = {"layer": layer.id, "op_type": layer.op_type, "est_latency_us": est.latency_us, "bound": est.bound,
                "unit": est.unit or layer.unit, "fallback_reason": est.fallback_reason}
        out.append({k: v for k, v in args.items() if v is not None})
    return out


def trace_document(run: RunFile) -> dict[str, Any]:
    """The trace as a JSON-ready dict (see the module docstring for the contract)."""
    measured = measured_tracks(run)
    estimated = estimated_tracks(run)
    series = temporal(run)
    events: list[dict[str, Any]] = []
    fixed = 0
    no_layer_args: list[Mapping[str, Any]] = []
    if measured is not None:
        events += _metadata(MEASURED_PID, _process_name("Measured", measured), 1, measured.tracks)
        slices, cut = _slice_events(MEASURED_PID, measured.tracks, "kernel", no_layer_args)
        events += slices
        fixed += cut
    if estimated is not None or series is not None:
        tracks = estimated.tracks if estimated is not None else ()
        name = _process_name("Estimated", estimated) if estimated is not None else "Estimated"
        events += _metadata(ESTIMATED_PID, name, 2, tracks)
        slices, cut = _slice_events(ESTIMATED_PID, tracks, "layer", _layer_args(run))
        events += slices
        fixed += cut
    if series is not None:
        events += _counter_events(series)
    pipeline = pipeline_tracks(run)
    if pipeline is not None:
        pipeline_events, cut = _pipeline_events(pipeline)
        events = pipeline_events + events
        fixed += cut
    other = {
        "model": run.model.name,
        "model_sha256": run.model.sha256,
        "target": run.target_or_empty.name,
        "tool": f"layerscope {(run.tool.version if run.tool is not None else None) or ''}".strip(),
        "clocks": "the measured and the estimated process each start at 0 on their own clock",
        "overlaps_fixed": fixed,
        "missing": [text for present, text in (
            (measured is not None, "measured kernels (no kernel events in the run)"),
            (estimated is not None, "estimated layers (no estimate in the run)"),
            (series is not None, "bandwidth counters (no timeline in the run)")) if not present],
        **({"pipeline_clock": "the pipeline process starts at 0 at the start of the traced run"}
           if pipeline is not None else {}),
    }
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def pipeline_tracks(run: Run) -> Tracks | None:
    """The traced run's spans and kernels per thread; ``None`` when the run has no ``pipeline`` section."""
    section = run.pipeline
    if section is None or not section.spans:
        return None
    names: dict[int, str] = {}
    slices: dict[int, list[Slice]] = {}
    for span in section.spans:
        names.setdefault(span.thread, span.thread_name or f"thread {span.thread}")
        args: tuple[tuple[str, str], ...] = (("kind", str(span.kind)), ("run", str(span.run)))
        slices.setdefault(span.thread, []).append(_slice(span, span.name, args))
    kernels = {k.name: k for k in run.kernels}
    for event in section.kernels:
        kernel = kernels.get(event.name)
        args = tuple((k, v) for k, v in (("kernel", event.name),
                                         ("op_type", (kernel.op_type if kernel is not None else None) or ""),
                                         ("layers", ", ".join(event.layers))) if v)
        slices.setdefault(event.thread, []).append(_slice(event, _layer_label(event.layers, event.name), args))
        names.setdefault(event.thread, f"thread {event.thread}")
    tracks = tuple(Track(f"{names[tid]} ({tid})", tuple(items)) for tid, items in sorted(slices.items()))
    trace = section.trace
    return Tracks("pipeline", f"PIPELINE: {section.function}, run {trace.run if trace else None} "
                              f"({trace.phase if trace else None} phase)", tracks)


def _slice(item: PipelineSpan | PipelineKernel, name: str, args: tuple[tuple[str, str], ...]) -> Slice:
    return Slice(item.start_us, item.start_us + item.duration_us, name, None, args)


def _layer_label(layers: Sequence[str], kernel: str) -> str:
    if not layers:
        return kernel
    return layers[0] if len(layers) == 1 else f"{layers[0]} (+{len(layers) - 1} fused)"


def _pipeline_events(tracks: Tracks) -> tuple[list[dict[str, Any]], int]:
    """Process 3's metadata and complete events, and how many slices were cut short to nest."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": PIPELINE_PID, "tid": 0, "name": "process_name", "args": {"name": tracks.note}},
        {"ph": "M", "pid": PIPELINE_PID, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}},
    ]
    fixed = 0
    for tid, track in enumerate(tracks.tracks, 1):
        events.append({"ph": "M", "pid": PIPELINE_PID, "tid": tid, "name": "thread_name", "args": {"name": track.name}})
        nested, cut = nest_exactly(track.slices)
        fixed += cut
        events.extend({"ph": "X", "pid": PIPELINE_PID, "tid": tid, "cat": "pipeline", "name": s.slice.name,
                       "ts": s.start_ns / 1000, "dur": (s.end_ns - s.start_ns) / 1000, "args": dict(s.slice.args)}
                      for s in nested)
    return events, fixed


def _process_name(kind: str, tracks: Tracks) -> str:
    """``Estimated (static schedule on profile 'x', not a measurement)``: the kind, then the tracks' note."""
    note = tracks.note.split(": ", 1)[1] if tracks.note.startswith(("ESTIMATE: ", "MEASURED: ")) else tracks.note
    return f"{kind} ({note})"


def trace_bytes(run: RunFile, *, compress: bool = False) -> bytes:
    """The trace serialized deterministically; gzip-compressed (mtime 0, no file name) when ``compress``."""
    text = json.dumps(trace_document(run), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False) + "\n"
    data = text.encode("utf-8")
    return gzip.compress(data, compresslevel=9, mtime=0) if compress else data
