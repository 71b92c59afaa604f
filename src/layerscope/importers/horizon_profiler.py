"""Horizon ``hrt_model_exec perf --profile_path`` output: ``profiler.log`` and ``profiler.csv``.

``profiler.log`` holds two JSON objects separated by a line ``***`` (all times in ms):

- X3/X5 (libdnn) form: ``{"perf_result": {FPS, average_latency}, "running_condition": {core_id,
  frame_count, model_name, run_time, thread_num}}`` then ``{"chip_latency": {BPU_inference_time_cost,
  CPU_inference_time_cost}, "model_latency": {<node>: leaf}, "task_latency": {TaskPendingTime,
  TaskRunningTime}}``, each leaf ``{avg_time, max_time, min_time}``;
- J6/S100 (UCP) form: a leading ``ucp_version: <v>`` line, ``processor_latency`` instead of
  ``chip_latency``, and ``model_latency`` keys like ``Node-0-BPU-<name>_bpu_segment_0`` whose values
  hold ``Stage1-GenerateBpuTask``, ``Stage2-BpuCoreProcess`` and ``Total`` leaves.

The board tool measures each BPU subgraph as one block; CPU operators and layout conversions appear by
name. The end-to-end latency is ``perf_result.average_latency`` (the figure the tool prints), else
``task_latency.TaskRunningTime``; the accelerator's time is ``BPU_inference_time_cost``.

The log is known to come truncated or duplicated: every JSON object that parses is kept, a truncated
one is salvaged entry by entry, a repeated section keeps its first copy, and each of these is a
warning.

``profiler.csv`` is ``key,value`` lines under section lines (``running_condition``, ``perf_result``);
rows ``name,avg,max,min`` under a ``*_latency`` section are read as leaves in that order (or in the
order of a ``name,avg_time,max_time,min_time`` header row when there is one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from layerscope.importers._common import (
    US_PER_MS,
    as_float,
    as_int,
    csv_rows,
    expect_dict,
    fail,
    line_at,
    opt_float,
    raw_decode,
)
from layerscope.importers.types import EntryKind, ImportResult, TimeStats, Totals, VendorEntry, make_info

TOOL = "hrt_model_exec"
FORMAT = "horizon-profiler"

#: Sections of the log; everything else at the top level is ignored with a warning.
SECTIONS = ("perf_result", "running_condition", "chip_latency", "processor_latency", "model_latency",
            "task_latency")
_LATENCY_SECTIONS = ("chip_latency", "processor_latency", "model_latency", "task_latency")
_LEAF_KEYS = ("avg_time", "max_time", "min_time")
_UCP_TOTAL = "Total"
_UCP_STAGES = ("Stage1-GenerateBpuTask", "Stage2-BpuCoreProcess")
#: Keys inside an entry: never an entry of their own when a cut-short node is salvaged.
_INNER_KEYS = frozenset((*_LEAF_KEYS, _UCP_TOTAL, *_UCP_STAGES))
_SEPARATOR = re.compile(r"^[ \t]*\*{3,}[ \t]*$", re.MULTILINE)
#: How many times over its length a cut-short JSON object may be scanned while salvaging its entries.
SALVAGE_PASSES = 2
#: ... plus this many characters, so that small logs are never cut short by the bound.
SALVAGE_SLACK_CHARS = 1 << 16
#: Longest ``ucp_version`` value kept (real ones are like ``3.7.3``); a longer one is cut here.
MAX_VERSION_CHARS = 64
_KEY_OPEN = re.compile(r'"(?P<key>(?:[^"\\]|\\.){1,512})"\s*:\s*\{')
_SUBGRAPH = re.compile(r"(^Node-\d+-BPU-.*_bpu_segment_\d+$)|(^BPU_.*subgraph_\d+$)")
_LAYOUT = re.compile(r"(_input_layout_convert$)|(_output_layout_convert$)|(^Preprocess$)")


@dataclass
class _Collected:
    sections: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, key: str, value: Any, line: int, source: str) -> None:
        if key not in SECTIONS:
            self.warnings.append(f"{source}: line {line}: unknown section {key!r} ignored")
        elif key in self.sections:
            self.warnings.append(f"{source}: line {line}: section {key!r} repeated (duplicated log); kept the first")
        else:
            self.sections[key] = value


def parse_log(text: str, source: str) -> ImportResult:
    """Read a ``profiler.log`` (see the module docstring). ``InputError`` when nothing in it parses."""
    collected = _Collected()
    for start, chunk in _chunks(text):
        _read_chunk(chunk, start, text, source, collected)
    if not collected.sections:
        fail(source, "", "no profiler section (perf_result, model_latency, ...) found; is this an "
                         "hrt_model_exec profiler.log?")
    return _result(collected.sections, source, collected.warnings, ucp_version(text))


def ucp_version(text: str) -> str | None:
    """The value of the first ``ucp_version: <v>`` (or ``ucp_version,<v>``) line, blanks stripped.

    Line by line with ``str`` methods: linear in the text's length (the former pattern's ``.*?``
    followed by ``[ \\t]*$`` was quadratic in a line's run of blanks).
    """
    for line in text.splitlines():
        head = line.lstrip(" \t")
        if not head.startswith("ucp_version"):
            continue
        rest = head[len("ucp_version"):].lstrip(" \t")
        if rest[:1] in (":", ",") and rest[1:].strip(" \t"):
            return rest[1:].strip(" \t")[:MAX_VERSION_CHARS]
    return None


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """The text between ``***`` lines, with each part's offset in ``text``."""
    start = 0
    for match in _SEPARATOR.finditer(text):
        yield start, text[start:match.start()]
        start = match.end()
    yield start, text[start:]


def _read_chunk(chunk: str, offset: int, text: str, source: str, collected: _Collected) -> None:
    """Every whole JSON object in ``chunk``; a broken one is salvaged entry by entry."""
    pos = 0
    while True:
        brace = chunk.find("{", pos)
        if brace < 0:
            return
        decoded = raw_decode(chunk, brace)
        line = line_at(text, offset + brace)
        if decoded is None:
            _salvage(chunk[brace:], offset + brace, text, source, collected)
            return
        value, pos = decoded
        if isinstance(value, dict):
            for key, section in value.items():
                collected.add(str(key), section, line, source)


def _salvage(broken: str, offset: int, text: str, source: str, collected: _Collected) -> None:
    """Keep the complete ``"key": {...}`` objects of a truncated JSON object."""
    line = line_at(text, offset)
    section: str | None = None
    partial: dict[str, dict[str, Any]] = {}
    end = 0
    # Each failed decode may scan to the end of the text; a real cut-short log fails once per object
    # open at the cut (a handful), a hostile one at every key. Bound the scanning to a few passes.
    budget = SALVAGE_PASSES * len(broken) + SALVAGE_SLACK_CHARS
    for match in _KEY_OPEN.finditer(broken):
        if match.start() < end:
            continue
        if budget <= 0:
            collected.warnings.append(f"{source}: line {line}: salvage of the cut-short object stopped at line "
                                      f"{line_at(text, offset + match.start())} (too many unclosed objects)")
            break
        key = match["key"]
        decoded = raw_decode(broken, match.end() - 1)
        budget -= len(broken) - match.start() if decoded is None else decoded[1] - match.start()
        if key in SECTIONS:
            section = key
            if decoded is not None:
                collected.add(key, decoded[0], line_at(text, offset + match.start()), source)
                end = decoded[1]
            continue
        if decoded is not None and section in _LATENCY_SECTIONS and key not in _INNER_KEYS:
            partial.setdefault(section, {})[key] = decoded[0]
            end = decoded[1]
    kept = sum(len(v) for v in partial.values())
    for name, entries in partial.items():
        collected.add(name, entries, line, source)
    collected.warnings.append(f"{source}: line {line}: JSON object cut short (truncated log); kept {kept} "
                              f"complete entr{'y' if kept == 1 else 'ies'} of it")


def _result(sections: dict[str, Any], source: str, warnings: list[str], version: str | None) -> ImportResult:
    running = _dict_or_empty(sections.get("running_condition"), source, "running_condition")
    perf = _dict_or_empty(sections.get("perf_result"), source, "perf_result")
    frames = as_int(running["frame_count"], source, "running_condition.frame_count") \
        if running.get("frame_count") is not None else None
    processor_key = "processor_latency" if "processor_latency" in sections else "chip_latency"
    processor = _dict_or_empty(sections.get(processor_key), source, processor_key)
    task = _dict_or_empty(sections.get("task_latency"), source, "task_latency")
    model = _dict_or_empty(sections.get("model_latency"), source, "model_latency")
    entries = tuple(_entry(str(name), value, source, frames) for name, value in model.items())
    average = _opt_ms(perf, "average_latency", source, "perf_result")
    running_time = _opt_leaf(task, "TaskRunningTime", source, "task_latency", frames)
    totals = Totals(
        latency=TimeStats(mean_us=average, samples=frames) if average is not None else running_time,
        fps=opt_float(perf, "FPS", source, "perf_result"),
        accelerator=_opt_leaf(processor, "BPU_inference_time_cost", source, processor_key, frames),
        cpu=_opt_leaf(processor, "CPU_inference_time_cost", source, processor_key, frames),
    )
    info = make_info({
        "model_name": running.get("model_name"),
        "thread_num": running.get("thread_num"),
        "core_id": running.get("core_id"),
        "frame_count": frames,
        "run_time_ms": running.get("run_time"),
        "version": version,
        "form": "ucp" if version or "processor_latency" in sections else "libdnn",
    })
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=entries, totals=totals, info=info,
                        warnings=tuple(warnings))


def _dict_or_empty(value: Any, source: str, where: str) -> dict[str, Any]:
    return {} if value is None else expect_dict(value, source, where)


def _entry(name: str, value: Any, source: str, frames: int | None) -> VendorEntry:
    where = f"model_latency.{name}"
    node = expect_dict(value, source, where)
    if _UCP_TOTAL in node or any(stage in node for stage in _UCP_STAGES):
        stats = _ucp_stats(node, source, where, frames)
    else:
        stats = _leaf(node, source, where, frames)
    subgraph = _SUBGRAPH.search(name) is not None
    kind = EntryKind.SUBGRAPH if subgraph else EntryKind.LAYOUT if _LAYOUT.search(name) else EntryKind.LAYER
    return VendorEntry(name=name, kind=kind, op_type="BPU subgraph" if subgraph else "", stats=stats,
                       provider="BPU" if subgraph else "CPU")


def _ucp_stats(node: dict[str, Any], source: str, where: str, frames: int | None) -> TimeStats:
    """A UCP segment's ``Total``, or the sum of its stages when ``Total`` is missing."""
    if _UCP_TOTAL in node:
        return _leaf(node[_UCP_TOTAL], source, f"{where}.{_UCP_TOTAL}", frames)
    stages = [_leaf(node[s], source, f"{where}.{s}", frames) for s in _UCP_STAGES if s in node]
    total = stages[0]
    for stage in stages[1:]:
        total = total.plus(stage)
    return total


def _leaf(value: Any, source: str, where: str, frames: int | None) -> TimeStats:
    """``{avg_time, max_time, min_time}`` in ms as microseconds; ``avg_time`` is required."""
    leaf = expect_dict(value, source, where)
    if "avg_time" not in leaf:
        fail(source, where, "no avg_time")
    return TimeStats(
        mean_us=as_float(leaf["avg_time"], source, f"{where}.avg_time") * US_PER_MS,
        min_us=_opt_ms(leaf, "min_time", source, where),
        max_us=_opt_ms(leaf, "max_time", source, where),
        samples=frames,
    )


def _opt_leaf(section: dict[str, Any], key: str, source: str, where: str, frames: int | None) -> TimeStats | None:
    return _leaf(section[key], source, f"{where}.{key}", frames) if key in section else None


def _opt_ms(mapping: dict[str, Any], key: str, source: str, where: str) -> float | None:
    value = opt_float(mapping, key, source, where)
    return None if value is None else value * US_PER_MS


# --- profiler.csv ---------------------------------------------------------------------------------


def parse_csv(text: str, source: str) -> ImportResult:
    """Read a ``profiler.csv`` (see the module docstring) into the same sections as the log."""
    sections: dict[str, Any] = {}
    warnings: list[str] = []
    version: str | None = None
    current: str | None = None
    order: tuple[str, ...] = _LEAF_KEYS
    for number, cells in csv_rows(text, source):
        if not any(cells):
            continue
        if cells[0] == "ucp_version" and len(cells) > 1:
            version = cells[1]
        elif len(cells) == 1 or not any(cells[1:]):
            current = cells[0]
            order = _LEAF_KEYS
            if current not in SECTIONS:
                warnings.append(f"{source}: line {number}: unknown section {current!r} ignored")
            elif current in sections:
                warnings.append(f"{source}: line {number}: section {current!r} repeated; kept the first")
                current = None
            else:
                sections[current] = {}
        elif current in sections and current in SECTIONS:
            if all(c in _LEAF_KEYS for c in cells[1:4]) and len(cells) >= 4:
                order = tuple(cells[1:4])
                continue
            sections[current][cells[0]] = _csv_value(cells, current, order, source, number)
        else:
            warnings.append(f"{source}: line {number}: row outside a known section ignored")
    if not sections:
        fail(source, "", "no section (running_condition, perf_result, ...) found; is this an "
                         "hrt_model_exec profiler.csv?")
    return _result(sections, source, warnings, version)


def _csv_value(cells: list[str], section: str, order: tuple[str, ...], source: str, number: int) -> Any:
    if section in _LATENCY_SECTIONS:
        values = [c for c in cells[1:] if c]
        if len(values) < 3:
            fail(source, f"line {number}", f"expected name,avg,max,min under {section}, got {len(values)} values")
        return {key: as_float(v, source, f"line {number}") for key, v in zip(order, values[:3], strict=True)}
    return cells[1]
