"""OpenVINO ``benchmark_app -report_type average_counters|detailed_counters|sort_detailed_counters``.

- CSV (``benchmark_<type>_report.csv``, ``;``-separated): a header row ``layerName;execStatus;
  layerType;execType;realTime (ms);cpuTime (ms)`` (the sorted report adds a ``%`` column), one row per
  runtime node, a ``Total`` row and a blank line; the detailed report repeats the table once per infer
  request, the average report has one averaged table;
- JSON (``-json_stats``, ``benchmark_<type>_report.json``): ``{"report_type": "average",
  "avg_performance": {"nodes": [...], "total_real_time", "total_cpu_time"}}`` or ``{"report_type":
  "detailed", "detailed_performance": [{"nodes": [...]}, ...]}``, each node ``{name, status,
  node_type, exec_type, real_time, cpu_time}`` with times in ms.

- exec graph XML (``-exec_graph_path``, :func:`parse_exec_graph`): the runtime model as OpenVINO IR, one
  ``<layer name type>`` per runtime node whose ``<data originalLayersNames="a,b">`` names the operations of
  the model as read that the node does (the compiler's fusion map); it gives the entries of the same name in
  a counters report their ``source_names`` (``layerscope import report.csv exec.xml --model m.onnx``). A
  document type or entity declaration is refused (no entity expansion).

Only ``EXECUTED`` nodes carry a time; ``OPTIMIZED_OUT`` and ``NOT_RUN`` nodes are kept, with their
status and no time (they were fused into a neighbour or skipped). Several tables give a per-node
distribution over the requests; one table gives its (average) time.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from layerscope.importers._common import (
    US_PER_MS,
    as_float,
    csv_rows,
    expect_dict,
    expect_list,
    expect_str,
    fail,
    load_json,
)
from layerscope.importers.types import EntryKind, ImportResult, TimeStats, VendorEntry, make_info

TOOL = "benchmark_app"
FORMAT = "openvino"
EXECUTED = "EXECUTED"
_HEADER = ("layerName", "execStatus", "layerType", "execType", "realTime (ms)")
_LAYOUT_TYPES = frozenset({"Reorder", "Convert"})
_IO_TYPES = frozenset({"Parameter", "Result", "Input", "Output"})


@dataclass(frozen=True)
class _Row:
    """One node of one table: name, status, layer type, exec type, real time (ms)."""

    name: str
    status: str
    layer_type: str
    exec_type: str
    real_ms: float


def parse_csv(text: str, source: str) -> ImportResult:
    """Read a ``;``-separated (or the Python tool's ``,``-separated sorted) counters report."""
    delimiter = ";" if "layerName;" in text else ","
    tables: list[list[_Row]] = []
    columns: dict[str, int] | None = None
    for number, cells in csv_rows(text, source, delimiter):
        if not any(cells):
            columns = None
        elif cells[0] == "layerName":
            repeated = sorted({name for name in cells if name and cells.count(name) > 1})
            if repeated:
                fail(source, f"line {number}", f"header repeats {', '.join(repeated)}")
            columns = {name: i for i, name in enumerate(cells)}
            missing = [h for h in _HEADER if h not in columns]
            if missing:
                fail(source, f"line {number}", f"header lacks {', '.join(missing)}")
            tables.append([])
        elif columns is not None and cells[0] != "Total":
            tables[-1].append(_csv_row(cells, columns, source, number))
    if not tables:
        fail(source, "", "no 'layerName;execStatus;...' header: not an OpenVINO benchmark_app counters report")
    return _result(tables, source, "csv")


def _csv_row(cells: list[str], columns: dict[str, int], source: str, number: int) -> _Row:
    needed = max(columns[h] for h in _HEADER) + 1
    if len(cells) < needed:
        fail(source, f"line {number}", f"{len(cells)} cells where the header's columns need {needed}")
    if not cells[columns["layerName"]]:
        fail(source, f"line {number}", "empty layerName")
    return _Row(name=cells[columns["layerName"]], status=_status(cells[columns["execStatus"]]),
                layer_type=cells[columns["layerType"]], exec_type=cells[columns["execType"]],
                real_ms=as_float(cells[columns["realTime (ms)"]], source, f"line {number}.realTime (ms)"))


def parse_json(text: str, source: str) -> ImportResult:
    """Read the JSON form (either report type)."""
    data = expect_dict(load_json(text, source), source, "top level")
    tables: list[list[_Row]] = []
    for key in ("avg_performance", "detailed_performance"):
        if key in data:
            value = data[key]
            groups = value if isinstance(value, list) else [value]
            for g, group in enumerate(groups):
                where = f"{key}[{g}]" if isinstance(value, list) else key
                tables.append(_json_rows(expect_dict(group, source, where), source, where))
    if not tables:
        fail(source, "", "no avg_performance/detailed_performance: not an OpenVINO benchmark_app report")
    return _result(tables, source, "json", report_type=data.get("report_type"))


def _json_rows(group: dict[str, Any], source: str, where: str) -> list[_Row]:
    rows = []
    for i, raw in enumerate(expect_list(group.get("nodes"), source, f"{where}.nodes")):
        at = f"{where}.nodes[{i}]"
        node = expect_dict(raw, source, at)
        name = expect_str(node.get("name"), source, f"{at}.name")
        if not name:
            fail(source, f"{at}.name", "empty node name")
        rows.append(_Row(name=name,
                         status=_status(expect_str(node.get("status", EXECUTED), source, f"{at}.status")),
                         layer_type=expect_str(node.get("node_type", ""), source, f"{at}.node_type"),
                         exec_type=expect_str(node.get("exec_type", ""), source, f"{at}.exec_type"),
                         real_ms=as_float(node.get("real_time"), source, f"{at}.real_time")))
    return rows


def _status(text: str) -> str:
    """``EXECUTED`` from ``EXECUTED`` or the Python tool's ``Status.EXECUTED``."""
    return text.rsplit(".", 1)[-1].strip().upper()


def _result(tables: list[list[_Row]], source: str, form: str, report_type: Any = None) -> ImportResult:
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=_entries(tables),
                        info=make_info({"form": form, "tables": len(tables), "report_type": report_type}))


def _entries(tables: list[list[_Row]]) -> tuple[VendorEntry, ...]:
    """One entry per node name, in first-seen order; its executed times over the tables."""
    first: dict[str, _Row] = {}
    times: dict[str, list[float]] = {}
    for table in tables:
        for row in table:
            first.setdefault(row.name, row)
            if row.status == EXECUTED:
                times.setdefault(row.name, []).append(row.real_ms * US_PER_MS)
    return tuple(_entry(row, times.get(name, []), many=len(tables) > 1) for name, row in first.items())


def _entry(row: _Row, values_us: Iterable[float], *, many: bool) -> VendorEntry:
    values = list(values_us)
    if not values:
        stats = None
    elif many:
        stats = TimeStats.from_values(values)
    else:
        stats = TimeStats(mean_us=values[0])
    kind = (EntryKind.LAYOUT if row.layer_type in _LAYOUT_TYPES
            else EntryKind.OTHER if row.layer_type in _IO_TYPES else EntryKind.LAYER)
    return VendorEntry(name=row.name, kind=kind, op_type=row.layer_type, stats=stats, provider=row.exec_type,
                       status="" if values else row.status or "NOT_RUN")


def parse_exec_graph(text: str, source: str) -> ImportResult:
    """Read an exec graph XML: one timeless entry per runtime node with the original names it covers."""
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        fail(source, "", "a document type or entity declaration: not an OpenVINO exec graph")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        fail(source, f"line {exc.position[0]}", f"not well-formed XML ({exc})")
    if root.tag != "net" or root.find("layers") is None:
        fail(source, "", "no <net><layers>: not an OpenVINO exec graph")
    entries = []
    for i, layer in enumerate(root.iter("layer")):
        name, layer_type = layer.get("name", ""), layer.get("type", "")
        if not name:
            fail(source, f"layer[{i}]", "empty layer name")
        data = layer.find("data")
        attrs = data.attrib if data is not None else {}
        if layer_type == "Const":  # weights: never executed, nothing to join
            continue
        listed = [n.strip() for n in attrs.get("originalLayersNames", "").split(",") if n.strip()]
        # "n0/WithoutBiases" beside "n0": a piece the frontend split off the same source node
        names = tuple(n for n in listed if n.rsplit("/", 1)[0] not in listed or "/" not in n)
        kind = (EntryKind.LAYOUT if layer_type in _LAYOUT_TYPES
                else EntryKind.OTHER if layer_type in _IO_TYPES else EntryKind.LAYER)
        entries.append(VendorEntry(name=name, kind=kind, op_type=layer_type, provider=attrs.get("primitiveType", ""),
                                   source_names=names))
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=tuple(entries),
                        info=make_info({"form": "exec-graph", "tables": 0, "report_type": None}))
