"""The pipeline in the Perfetto / Chrome trace: user spans and the model's layers of one run, on their threads.

A pure function of a saved run, built on :mod:`layerscope.report.perfetto`. Contract of :func:`pipeline_trace`:

- the reporter's document (:func:`~layerscope.report.perfetto.trace_document`: measured kernels, estimated
  layers, counters) plus process 3 "Pipeline", holding the run's ``pipeline`` section: one track per thread
  (named after the Python thread), with the traced run's root span, the user's trace points, the ``model``
  spans and, inside each model span, its kernels named after the source layers they cover;
- its clock starts at 0 at the start of the traced run (``pipeline.trace.run``); slices on one track nest
  exactly (:func:`~layerscope.report.perfetto.nest_exactly`), and the number of slices cut short to make them
  nest is added to ``otherData.overlaps_fixed``;
- the same run gives identical bytes (:func:`pipeline_trace_bytes`: sorted keys, fixed separators, gzip with
  mtime 0 when asked).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from typing import Any

from layerscope.report.perfetto import nest_exactly, trace_document
from layerscope.report.sections import Run, Slice, Track, Tracks

PIPELINE_PID = 3


def pipeline_tracks(run: Run) -> Tracks | None:
    """The traced run's spans and kernels per thread; ``None`` when the run has no ``pipeline`` section."""
    section = run.get("pipeline")
    if not section or not section.get("spans"):
        return None
    names: dict[int, str] = {}
    slices: dict[int, list[Slice]] = {}
    for span in section["spans"]:
        names.setdefault(span["thread"], span.get("thread_name") or f"thread {span['thread']}")
        args: tuple[tuple[str, str], ...] = (("kind", str(span["kind"])), ("run", str(span["run"])))
        slices.setdefault(span["thread"], []).append(_slice(span, str(span["name"]), args))
    kernels = {k["name"]: k for k in run.get("kernels") or []}
    for event in section.get("kernels") or []:
        layers = [str(x) for x in event.get("layers") or []]
        args = tuple((k, v) for k, v in (("kernel", str(event["name"])),
                                         ("op_type", str(kernels.get(event["name"], {}).get("op_type") or "")),
                                         ("layers", ", ".join(layers))) if v)
        slices.setdefault(event["thread"], []).append(_slice(event, _layer_label(layers, event["name"]), args))
        names.setdefault(event["thread"], f"thread {event['thread']}")
    tracks = tuple(Track(f"{names[tid]} ({tid})", tuple(items)) for tid, items in sorted(slices.items()))
    trace = section.get("trace") or {}
    return Tracks("pipeline", f"PIPELINE: {section.get('function')}, run {trace.get('run')} "
                              f"({trace.get('phase')} phase)", tracks)


def _slice(item: Mapping[str, Any], name: str, args: tuple[tuple[str, str], ...]) -> Slice:
    start = float(item["start_us"])
    return Slice(start, start + float(item["duration_us"]), name, None, args)


def _layer_label(layers: Sequence[str], kernel: str) -> str:
    if not layers:
        return kernel
    return layers[0] if len(layers) == 1 else f"{layers[0]} (+{len(layers) - 1} fused)"


def pipeline_trace(run: Run) -> dict[str, Any]:
    """The reporter's trace document with the ``Pipeline`` process added (see the module docstring)."""
    document = trace_document(run)
    tracks = pipeline_tracks(run)
    if tracks is None:
        return document
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
    document["traceEvents"] = events + document["traceEvents"]
    other = document.setdefault("otherData", {})
    other["overlaps_fixed"] = int(other.get("overlaps_fixed", 0)) + fixed
    other["pipeline_clock"] = "the pipeline process starts at 0 at the start of the traced run"
    return document


def pipeline_trace_bytes(run: Run, *, compress: bool = False) -> bytes:
    """The trace serialized deterministically; gzip-compressed (mtime 0) when ``compress``."""
    text = json.dumps(pipeline_trace(run), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False) + "\n"
    data = text.encode("utf-8")
    return gzip.compress(data, compresslevel=9, mtime=0) if compress else data
