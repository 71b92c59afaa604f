"""ONNX Runtime profile JSON (``SessionOptions.enable_profiling``; ``onnxruntime_perf_test -p``).

The file is a bare JSON array of Chrome-trace events ``{cat, pid, tid, dur, ts, ph, name, args}``,
``dur`` in microseconds. ``cat == "Node"`` events named ``<node>_kernel_time`` time one kernel run of
runtime node ``<node>``, with ``args.op_name`` (the runtime op, e.g. ``FusedConv``), ``args.provider``,
``args.input_type_shape`` / ``output_type_shape``; ``_fence_before`` / ``_fence_after`` events are
skipped. ``cat == "Session"`` events named ``model_run`` time each whole run. A runtime node's name is
its source node's, or a name the optimizer made (``<tensor>_nchwc``, ``ReorderOutput``), which the join
resolves. The events are told apart by the trace reader (:mod:`layerscope.runtimes.onnxruntime.trace`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from layerscope.importers._common import as_float, expect_dict, expect_list, expect_str, fail, load_json
from layerscope.importers.types import EntryKind, ImportResult, TimeStats, Totals, VendorEntry, make_info
from layerscope.runtimes.onnxruntime.trace import is_run_span, kernel_node

TOOL = "onnxruntime"
FORMAT = "ort"
#: Runtime ops that only move or re-layout data.
LAYOUT_OPS = frozenset({"ReorderInput", "ReorderOutput", "MemcpyToHost", "MemcpyFromHost"})


def parse(text: str, source: str) -> ImportResult:
    """Per runtime node, the distribution of its kernel times over the profiled runs."""
    events = expect_list(load_json(text, source), source, "top level")
    durations: dict[str, list[float]] = defaultdict(list)
    meta: dict[str, tuple[str, str]] = {}
    runs: list[float] = []
    for i, raw in enumerate(events):
        event = expect_dict(raw, source, f"[{i}]")
        kernel = kernel_node(event)
        if is_run_span(event):
            runs.append(as_float(event.get("dur"), source, f"[{i}].dur"))
        elif kernel is not None:
            node, op_type, provider = _node(event, kernel, source, f"[{i}]")
            durations[node].append(as_float(event.get("dur"), source, f"[{i}].dur"))
            known_op, known_provider = meta.get(node, ("", ""))
            meta[node] = (known_op or op_type, known_provider or provider)
    if not durations and not runs:
        fail(source, "", "no Node '*_kernel_time' or Session 'model_run' events: not an ONNX Runtime profile")
    entries = tuple(_entry(node, values, *meta[node]) for node, values in durations.items())
    providers = sorted({provider for _, provider in meta.values() if provider})
    totals = Totals(latency=TimeStats.from_values(runs) if runs else None)
    info = make_info({"runs": len(runs) or None, "provider": ",".join(providers) or None})
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=entries, totals=totals, info=info)


def _node(event: dict[str, Any], node: str, source: str, where: str) -> tuple[str, str, str]:
    """(runtime node name, op type, provider) of a kernel event of runtime node ``node``; unnamed nodes get
    ``node#<index>``."""
    args = expect_dict(event.get("args", {}), source, f"{where}.args")
    op_type = expect_str(args.get("op_name", ""), source, f"{where}.args.op_name")
    provider = expect_str(args.get("provider", ""), source, f"{where}.args.provider")
    if not node:
        node = f"node#{args.get('node_index', '?')}"
    return node, op_type, provider


def _entry(node: str, values: list[float], op_type: str, provider: str) -> VendorEntry:
    kind = EntryKind.LAYOUT if op_type in LAYOUT_OPS else EntryKind.LAYER
    return VendorEntry(name=node, kind=kind, op_type=op_type, stats=TimeStats.from_values(values),
                       provider=provider)
