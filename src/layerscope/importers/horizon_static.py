"""Horizon compiler static report JSON (``hb_compile`` working dir, ``hbm_perf(..., output_dir=...)``).

Two forms are read:

- Nash (J6 / S100, hbdk4): ``{"summary": {"performance": {FPS, "latency (us)", "latency (ms)"},
  "DDR access data": {"loaded bytes per run", "stored bytes per run", ...}, "interval info": {...},
  "layer details": [{"layer name", "active period of time", "computing cost (no DDR)", "load cost",
  "store cost", "origin ops"}], "model info": {"BPU march", "BPU core number", ...}},
  "details": [[{inst_type, source_layer_names, "start_time (us)", "working_time (us)"}], ...]}`` with
  one instruction list per core;
- Bayes (hbdk3, older): a flat summary (``FPS``, ``latency (ms)``, ``latency (us)``, ``BPU march``,
  ``DDR bytes per run`` ...) whose ``layer details`` is a list of rows under a header row
  ``["layer", "ops", "computing cost (no DDR)", "load/store cost", ...]``.

Cost cells are strings like ``"59 us (8.2% of model)"``. Each layer becomes an entry with a
:class:`~layerscope.importers.types.StaticCost` (an estimate, not a measurement); its ``unit`` is the
instruction type (TAE, VAE, AAE, VPU, SPU, TRANS) with the most working time in ``details``.
A report without ``layer details`` (compiled without ``debug=True``) still gives the model's
estimated latency, with a warning.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from layerscope.importers._common import (
    US_PER_MS,
    as_float,
    as_int,
    expect_dict,
    expect_list,
    expect_str,
    fail,
    load_json,
    opt_float,
    parse_cost,
)
from layerscope.importers.types import EntryKind, ImportResult, StaticCost, Totals, VendorEntry, make_info

TOOL = "hbm_perf"
FORMAT = "horizon-static"

_NAME_KEYS = ("layer name", "layer")
_COMPUTE = "computing cost (no DDR)"
_LOAD, _STORE, _LOAD_STORE = "load cost", "store cost", "load/store cost"
_OPS_KEYS = ("origin ops", "ops")
_ACTIVE = "active period of time"
_MEMORY_UNITS = frozenset({"LOAD", "STORE"})
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_FLAT_MARKERS = ("layer details", "latency (ms)", "latency (us)", "FPS", "BPU march")


def parse(text: str, source: str) -> ImportResult:
    """Read a static report (either form). ``InputError`` names the field that is malformed."""
    data = expect_dict(load_json(text, source), source, "top level")
    summary = _summary(data, source)
    warnings: list[str] = []
    units = _units_from_details(data.get("details"), source)
    rows = _layer_rows(summary.get("layer details"), source)
    if not rows:
        warnings.append(f"{source}: no 'layer details' (compile with debug=True to get per-layer costs); "
                        "only the model's estimated latency is imported")
    entries = _merge_repeats([_entry(row, index, units, source) for index, row in enumerate(rows)])
    performance = _performance(summary, source)
    totals = Totals(estimated_us=_latency_us(performance, source),
                    estimated_fps=opt_float(performance, "FPS", source, "summary.performance"))
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=entries, totals=totals,
                        info=_info(summary), warnings=tuple(warnings))


def _summary(data: dict[str, Any], source: str) -> dict[str, Any]:
    if "summary" in data:
        return expect_dict(data["summary"], source, "summary")
    if any(key in data for key in _FLAT_MARKERS):
        return data
    fail(source, "", "no 'summary' section: not a Horizon static performance report (model.json)")


def _performance(summary: dict[str, Any], source: str) -> dict[str, Any]:
    """Nash reports group the figures under ``performance``; Bayes reports keep them flat."""
    if "performance" in summary:
        return expect_dict(summary["performance"], source, "summary.performance")
    return summary


def _latency_us(performance: dict[str, Any], source: str) -> float | None:
    where = "summary.performance"
    us = opt_float(performance, "latency (us)", source, where)
    if us is not None:
        return us
    ms = opt_float(performance, "latency (ms)", source, where)
    return None if ms is None else ms * US_PER_MS


def _layer_rows(value: Any, source: str) -> list[dict[str, Any]]:
    """``layer details`` as one dict per layer, from either a list of objects or header + rows."""
    if value is None:
        return []
    rows = expect_list(value, source, "summary.layer details")
    if not rows:
        return []
    if isinstance(rows[0], list):
        header = [expect_str(h, source, f"summary.layer details[0][{i}]").strip() for i, h in enumerate(rows[0])]
        table: list[dict[str, Any]] = []
        for i, row in enumerate(rows[1:], 1):
            cells = expect_list(row, source, f"summary.layer details[{i}]")
            if len(cells) != len(header):
                fail(source, f"summary.layer details[{i}]", f"{len(cells)} cells under a header of {len(header)}")
            table.append(dict(zip(header, cells, strict=True)))
        return table
    return [expect_dict(row, source, f"summary.layer details[{i}]") for i, row in enumerate(rows)]


def _entry(row: dict[str, Any], index: int, units: dict[str, str], source: str) -> VendorEntry:
    where = f"summary.layer details[{index}]"
    name_key = next((k for k in _NAME_KEYS if k in row), None)
    if name_key is None:
        fail(source, where, "no 'layer name'")
    name = expect_str(row[name_key], source, f"{where}.{name_key}").strip()
    if not name:
        fail(source, f"{where}.{name_key}", "empty layer name")
    compute = _cost(row, _COMPUTE, source, where)
    if _LOAD_STORE in row:
        load, store = _cost(row, _LOAD_STORE, source, where), None
    else:
        load, store = _cost(row, _LOAD, source, where), _cost(row, _STORE, source, where)
    ops_key = next((k for k in _OPS_KEYS if k in row), None)
    ops = as_int(row[ops_key], source, f"{where}.{ops_key}") if ops_key else None
    start, end = _active_period(row.get(_ACTIVE))
    estimate = StaticCost.from_parts(compute, load, store, unit=units.get(name), ops=ops,
                                     active_start_us=start, active_end_us=end)
    return VendorEntry(name=name, kind=EntryKind.LAYER, estimate=estimate, provider="BPU")


def _merge_repeats(entries: list[VendorEntry]) -> tuple[VendorEntry, ...]:
    """One entry per layer name: a layer listed twice (e.g. once per segment) has its costs added."""
    merged: dict[str, VendorEntry] = {}
    for entry in entries:
        first = merged.get(entry.name)
        if first is None or first.estimate is None or entry.estimate is None:
            merged.setdefault(entry.name, entry)
        else:
            merged[entry.name] = replace(first, estimate=first.estimate.plus(entry.estimate))
    return tuple(merged.values())


def _cost(row: dict[str, Any], key: str, source: str, where: str) -> float | None:
    return parse_cost(row[key], source, f"{where}.{key}")[0] if row.get(key) is not None else None


def _active_period(value: Any) -> tuple[float | None, float | None]:
    """``"12 us - 71 us"``-like text as (start, end) µs; ``(None, None)`` when it is not two numbers."""
    if not isinstance(value, str):
        return None, None
    numbers = _NUMBER.findall(value)
    if len(numbers) != 2:
        return None, None
    scale = 1e3 if "ms" in value else 1.0
    return float(numbers[0]) * scale, float(numbers[1]) * scale


def _units_from_details(value: Any, source: str) -> dict[str, str]:
    """Per layer, the compute instruction type with the most working time in the instruction list."""
    if value is None:
        return {}
    cores = expect_list(value, source, "details")
    if cores and isinstance(cores[0], dict):
        cores = [cores]
    busy: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for c, core in enumerate(cores):
        for i, inst in enumerate(expect_list(core, source, f"details[{c}]")):
            where = f"details[{c}][{i}]"
            item = expect_dict(inst, source, where)
            kind = expect_str(item.get("inst_type"), source, f"{where}.inst_type")
            working_key = "working_time (us)" if "working_time (us)" in item else "working_time"
            working = as_float(item.get(working_key), source, f"{where}.{working_key}")
            for layer in _layer_names(item.get("source_layer_names"), source, f"{where}.source_layer_names"):
                busy[layer][kind] += working
    return {layer: _main_unit(kinds) for layer, kinds in busy.items()}


def _layer_names(value: Any, source: str, where: str) -> list[str]:
    if isinstance(value, list):
        return [expect_str(v, source, where).strip() for v in value]
    return [part.strip() for part in expect_str(value, source, where).split(",") if part.strip()]


def _main_unit(kinds: dict[str, float]) -> str:
    compute = {k: v for k, v in kinds.items() if k.upper() not in _MEMORY_UNITS}
    pool = compute or kinds
    return max(sorted(pool), key=lambda k: pool[k])


def _section_or(summary: dict[str, Any], key: str) -> dict[str, Any]:
    """``summary[key]`` when it is an object (Nash), else the flat summary itself (Bayes)."""
    value = summary.get(key)
    return value if isinstance(value, dict) else summary


def _info(summary: dict[str, Any]) -> Mapping[str, str]:
    model_info = _section_or(summary, "model info")
    ddr = _section_or(summary, "DDR access data")
    return make_info({
        "march": model_info.get("BPU march"),
        "cores": model_info.get("BPU core number"),
        "version": model_info.get("compiling HBDK version", model_info.get("HBDK version")),
        "model_name": summary.get("model name"),
        "loaded_bytes_per_run": ddr.get("loaded bytes per run"),
        "stored_bytes_per_run": ddr.get("stored bytes per run"),
        "form": "nash" if "performance" in summary else "bayes",
    })
