"""TensorRT ``trtexec`` exports: ``--exportProfile``, ``--exportLayerInfo`` and ``--exportTimes``.

- profile: a JSON array, ``{"count": N}`` (the number of profiled inferences) then one object per
  engine layer ``{name, timeMs, averageMs, medianMs, percentage}`` (``medianMs`` from TensorRT 8.4);
- layer info: ``{"Layers": [...], "Bindings": [...]}``; a layer is its name alone
  (``--profilingVerbosity=layer_names_only``) or an object with ``Name``, ``LayerType``, ``Inputs``,
  ``Outputs`` and, from TensorRT 8.6, ``Metadata`` naming the ONNX nodes it was built from
  (``[ONNX Layer: a]\\x1f[ONNX Layer: b]``);
- times: a JSON array, one object per inference with ``latencyMs``, ``computeMs``, ``h2dMs``,
  ``d2hMs`` (and their start/end timestamps).

Engine layer names are fused names (``Conv_0 + Relu_1``, ``PWN(/m/Sigmoid, /m/Mul)``,
``{ForeignNode[a...b]}``); ``Reformatting CopyNode for Input Tensor 0 to <layer>`` entries are layout
work for ``<layer>`` and ``<tensor> copy`` entries copy a tensor (a Concat done as copies).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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
)
from layerscope.importers.names import onnx_layers_in_metadata
from layerscope.importers.types import EntryKind, ImportResult, TimeStats, Totals, VendorEntry, make_info

TOOL = "trtexec"
FORMAT = "trtexec"

_REFORMAT = re.compile(r"^Reformatting CopyNode for (?:Input|Output) Tensor \d+ to (?P<target>.+)$", re.DOTALL)
_COPY = re.compile(r"^(?P<tensor>.+) copy$", re.DOTALL)


def parse(text: str, source: str) -> ImportResult:
    """Read any of the three exports; which one it is follows from its content."""
    data = load_json(text, source)
    if isinstance(data, dict):
        if "Layers" not in data:
            fail(source, "", "a JSON object without 'Layers': not a trtexec --exportLayerInfo file")
        return parse_layer_info(data, source)
    items = expect_list(data, source, "top level")
    if any(isinstance(i, dict) and ("latencyMs" in i or "computeMs" in i) for i in items[:4]):
        return parse_times(items, source)
    return parse_profile(items, source)


def parse_profile(items: Sequence[Any], source: str) -> ImportResult:
    """``--exportProfile``: one entry per engine layer, times in µs, ``samples`` from ``count``."""
    samples: int | None = None
    entries: dict[str, VendorEntry] = {}
    warnings: list[str] = []
    for i, item in enumerate(items):
        obj = expect_dict(item, source, f"[{i}]")
        if "name" not in obj and "count" in obj:
            samples = as_int(obj["count"], source, f"[{i}].count")
            continue
        name = expect_str(obj.get("name"), source, f"[{i}].name")
        stats = _profile_stats(obj, samples, source, f"[{i}]")
        if name in entries:
            warnings.append(f"{source}: [{i}]: layer {name!r} listed again; kept the first")
            continue
        entries[name] = _engine_entry(name, stats=stats)
    if not entries:
        fail(source, "", "no layer entries: not a trtexec --exportProfile file")
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=tuple(entries.values()),
                        info=make_info({"profile": "exportProfile", "count": samples}), warnings=tuple(warnings))


def _profile_stats(obj: dict[str, Any], samples: int | None, source: str, where: str) -> TimeStats:
    average = opt_float(obj, "averageMs", source, where)
    total = opt_float(obj, "timeMs", source, where)
    if average is None:
        if total is None or not samples:
            fail(source, where, "no averageMs (and no timeMs with a count)")
        average = total / samples
    median = opt_float(obj, "medianMs", source, where)
    return TimeStats(mean_us=average * US_PER_MS, median_us=None if median is None else median * US_PER_MS,
                     samples=samples)


def _engine_entry(name: str, *, stats: TimeStats | None = None, op_type: str = "",
                  source_names: tuple[str, ...] = ()) -> VendorEntry:
    """An engine layer, classified: reformat and tensor copies are layout work."""
    reformat = _REFORMAT.match(name)
    if reformat or op_type == "Reformat":
        target = reformat["target"] if reformat else ""
        return VendorEntry(name=name, kind=EntryKind.LAYOUT, op_type=op_type or "Reformat", stats=stats,
                           provider="GPU", source_names=(target,) if target else ())
    copy = _COPY.match(name)
    if copy and not source_names:
        return VendorEntry(name=name, kind=EntryKind.LAYOUT, op_type=op_type or "copy", stats=stats, provider="GPU",
                           tensor=copy["tensor"])
    return VendorEntry(name=name, kind=EntryKind.LAYER, op_type=op_type, stats=stats, provider="GPU",
                       source_names=source_names)


def parse_layer_info(data: dict[str, Any], source: str) -> ImportResult:
    """``--exportLayerInfo``: engine layers with their type and, when recorded, their ONNX nodes."""
    layers = expect_list(data["Layers"], source, "Layers")
    entries: dict[str, VendorEntry] = {}
    for i, layer in enumerate(layers):
        where = f"Layers[{i}]"
        if isinstance(layer, str):
            entries.setdefault(layer, _engine_entry(layer))
            continue
        obj = expect_dict(layer, source, where)
        name = expect_str(obj.get("Name"), source, f"{where}.Name")
        op_type = expect_str(obj.get("LayerType", ""), source, f"{where}.LayerType")
        metadata = obj.get("Metadata")
        names = onnx_layers_in_metadata(expect_str(metadata, source, f"{where}.Metadata")) if metadata else ()
        entries.setdefault(name, _engine_entry(name, op_type=op_type, source_names=names))
    bindings = data.get("Bindings")
    info = make_info({"profile": "exportLayerInfo",
                      "bindings": len(bindings) if isinstance(bindings, list) else None})
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=tuple(entries.values()), info=info)


def parse_times(items: Sequence[Any], source: str) -> ImportResult:
    """``--exportTimes``: the per-inference latency and GPU compute time distributions."""
    latency: list[float] = []
    compute: list[float] = []
    for i, item in enumerate(items):
        obj = expect_dict(item, source, f"[{i}]")
        for key, values in (("latencyMs", latency), ("computeMs", compute)):
            if key in obj:
                values.append(as_float(obj[key], source, f"[{i}].{key}") * US_PER_MS)
    if not latency and not compute:
        fail(source, "", "no latencyMs/computeMs: not a trtexec --exportTimes file")
    totals = Totals(latency=TimeStats.from_values(latency) if latency else None,
                    accelerator=TimeStats.from_values(compute) if compute else None)
    return ImportResult(path=source, format=FORMAT, tool=TOOL, totals=totals,
                        info=make_info({"profile": "exportTimes", "inferences": len(items)}))
