"""The trace reader: ONNX Runtime's profiler output (profile, bisect runner, pipeline and
``layerscope import --from ort`` read it through this module; :mod:`layerscope.model.shapes`, below the runtimes,
reads the same events for shapes).

The profiler writes a JSON array of Chrome-trace events (``ph: "X"``, ``ts``/``dur`` in microseconds).
``cat: "Session"`` events named ``model_run`` span one ``InferenceSession.run``; ``cat: "Node"`` events named
``<node>_kernel_time`` time one kernel of the optimized graph (``args.op_name``, ``args.provider``).
Contract of :func:`parse_profile`: kernel events are assigned to the run whose span contains them; the first
``skip_runs`` runs (warm-up) are dropped; a kernel absent from a run counts 0 µs in it; the result is
:mod:`layerscope.measure.kernel_trace`'s form. A kernel event's ``args`` also carry sizes in bytes (strings of
integers): ``output_size`` (the tensors it wrote), ``activation_size`` (the non-constant tensors it read),
``parameter_size`` (the initializers it read) and, in newer releases, ``mem_bytes_in_use`` (the CPU arena's bytes
in use after it ran): :func:`kernel_memory` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from layerscope.errors import LayerscopeError
from layerscope.measure.kernel_trace import KernelMemory, KernelSamples, ProfileData, TraceEvent

__all__ = ["KERNEL_SUFFIX", "events_between", "is_run_span", "kernel_memory", "kernel_node", "load_events",
           "model_run_spans", "parse_profile"]

#: The suffix of a kernel event's name (``<node>_kernel_time``).
KERNEL_SUFFIX = "_kernel_time"


#: ``KernelMemory`` field -> the profile event's ``args`` key.
_MEMORY_ARGS = {"output_bytes": "output_size", "activation_bytes": "activation_size",
                "parameter_bytes": "parameter_size", "in_use_bytes": "mem_bytes_in_use"}


def kernel_memory(args: Mapping[str, Any], seen: KernelMemory | None = None) -> KernelMemory | None:
    """The sizes one kernel event's ``args`` report, each the larger of it and ``seen``'s (a size is a non-negative
    integer, written as a string or a number; anything else is not a size); ``None`` when neither has any."""
    values: dict[str, int | None] = {}
    for name, key in _MEMORY_ARGS.items():
        raw = args.get(key)
        value = int(raw) if isinstance(raw, str) and raw.isdigit() else raw if type(raw) is int and raw >= 0 else None
        before = getattr(seen, name) if seen is not None else None
        values[name] = before if value is None else value if before is None else max(before, value)
    return KernelMemory(**values) if any(v is not None for v in values.values()) else None


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a profile file; ``LayerscopeError`` when it is not ONNX Runtime's format."""
    try:
        events = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LayerscopeError(f"{path}: cannot read ONNX Runtime's profile ({exc})") from None
    if not isinstance(events, list):
        raise LayerscopeError(f"{path}: ONNX Runtime's profile is not a JSON array of events")
    return [e for e in events if isinstance(e, dict)]


def is_run_span(event: Mapping[str, Any]) -> bool:
    """Whether ``event`` spans one whole run (``cat: "Session"``, ``name: "model_run"``)."""
    return event.get("cat") == "Session" and event.get("name") == "model_run"


def kernel_node(event: Mapping[str, Any]) -> str | None:
    """The runtime node a kernel event times (its name without :data:`KERNEL_SUFFIX`; ``""`` for an unnamed node);
    ``None`` when ``event`` is not a kernel event (``cat: "Node"``, a name ending in :data:`KERNEL_SUFFIX`)."""
    name = event.get("name")
    if event.get("cat") != "Node" or not isinstance(name, str) or not name.endswith(KERNEL_SUFFIX):
        return None
    return name[: -len(KERNEL_SUFFIX)]


def model_run_spans(events: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """``(start_us, duration_us)`` of every ``model_run`` span (one ``InferenceSession.run``), in time order."""
    return sorted((float(e["ts"]), float(e["dur"])) for e in events if is_run_span(e) and "ts" in e and "dur" in e)


def events_between(events: Sequence[dict[str, Any]], start_us: float, end_us: float) -> list[dict[str, Any]]:
    """The events that start within ``[start_us, end_us]`` (both ends included), in their order."""
    return [e for e in events if "ts" in e and start_us <= float(e["ts"]) <= end_us]


def parse_profile(events: Sequence[dict[str, Any]], skip_runs: int = 0) -> ProfileData:
    """Per-run kernel durations of the runs after the first ``skip_runs``. See the module docstring."""
    spans = model_run_spans(events)[skip_runs:]
    starts = [s for s, _ in spans]
    per_kernel: dict[str, list[float]] = {}
    info: dict[str, tuple[str, str]] = {}
    memory: dict[str, KernelMemory | None] = {}
    by_run: list[list[TraceEvent]] = [[] for _ in spans]
    for e in events:
        kernel = kernel_node(e)
        if kernel is None or "ts" not in e:
            continue
        run = _run_of(float(e["ts"]), spans, starts)
        if run is None:
            continue
        raw_args = e.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        info.setdefault(kernel, (str(args.get("op_name", "")), str(args.get("provider", ""))))
        memory[kernel] = kernel_memory(args, memory.get(kernel))
        series = per_kernel.setdefault(kernel, [0.0] * len(spans))
        series[run] += float(e.get("dur", 0.0))
        by_run[run].append(TraceEvent(kernel, int(e.get("tid", 0)), float(e["ts"]) - spans[run][0],
                                      float(e.get("dur", 0.0))))
    kernels = tuple(KernelSamples(k, info[k][0], info[k][1], tuple(v), memory=memory.get(k))
                    for k, v in per_kernel.items())
    durations = tuple(d for _, d in spans)
    median_index = sorted(range(len(durations)), key=lambda i: durations[i])[len(durations) // 2] if durations else 0
    median_run = tuple(by_run[median_index]) if by_run else ()
    return ProfileData(run_durations_us=durations, kernels=kernels, median_run=median_run)


def _run_of(ts: float, spans: Sequence[tuple[float, float]], starts: Sequence[float]) -> int | None:
    """Index of the run whose span contains ``ts`` (spans are sorted and disjoint)."""
    import bisect

    index = bisect.bisect_right(starts, ts) - 1
    if index < 0:
        return None
    start, duration = spans[index]
    return index if ts <= start + duration else None
