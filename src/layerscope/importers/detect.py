"""Which vendor format a file is, and the parser that reads it.

Contract: :func:`detect_format` looks at the content (never only the file name) and returns one of
:data:`FORMATS`, or raises ``InputError`` naming the file when no format fits. :func:`parse_file`
reads a file with the given format (``"auto"`` detects it) and returns an
:class:`~layerscope.importers.types.ImportResult`; a file that is not of the format it is read as is
an ``InputError`` naming the file and the line or field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from layerscope.errors import InputError
from layerscope.importers import horizon_profiler, horizon_static, hrt_perf, openvino, ort, rknn, trtexec
from layerscope.importers._common import read_text
from layerscope.importers.types import ImportResult

Parser = Callable[[str, str], ImportResult]

#: ``import --from`` names, in the order auto-detection tries them.
FORMATS = ("horizon-profiler", "horizon-static", "trtexec", "ort", "openvino", "rknn", "hrt-perf")

_HEAD = 64 * 1024
_JSON_KEY = r'"{}"\s*:'


def _has_key(head: str, *keys: str) -> bool:
    return any(re.search(_JSON_KEY.format(re.escape(k)), head) for k in keys)


def detect_format(text: str, source: str) -> str:
    """The format of ``text`` by its content; ``InputError`` when it is none of :data:`FORMATS`."""
    head = text[:_HEAD].lstrip()
    if head.startswith("ucp_version") or _has_key(head, "perf_result", "running_condition", "model_latency",
                                                   "chip_latency", "processor_latency"):
        return "horizon-profiler"
    if re.match(r"(ucp_version,|running_condition\s*$|perf_result\s*$)", head, re.MULTILINE):
        return "horizon-profiler"
    if _has_key(head, "layer details", "interval info", "DDR access data") or (
            _has_key(head, "summary") and _has_key(head, "BPU march", "performance")):
        return "horizon-static"
    if _has_key(head, "averageMs", "Layers", "latencyMs", "computeMs", "performance_summary", "build_options",
                "ComputeCapability") or re.match(r'\[\s*\{\s*"count"', head):
        return "trtexec"
    if _has_key(head, "cat") and _has_key(head, "ph", "dur"):
        return "ort"
    if head.startswith("<") and "<net" in head and ("originalLayersNames" in head or "execOrder" in head):
        return "openvino"
    if "layerName;execStatus" in head or "layerName,execStatus" in head or _has_key(
            head, "avg_performance", "detailed_performance"):
        return "openvino"
    if rknn.find_header(head) is not None:
        return "rknn"
    if re.search(r"Average\s+latency\s+is\s*:", text):  # the console summary ends the output: search it all
        return "hrt-perf"
    raise InputError(f"{source}: not a vendor profile layerscope reads (formats: {', '.join(FORMATS)})",
                     hint="pass --from if you know which it is")


def _horizon_profiler(text: str, source: str) -> ImportResult:
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("ucp_version:") or "***" in text:
        return horizon_profiler.parse_log(text, source)
    return horizon_profiler.parse_csv(text, source)


def _openvino(text: str, source: str) -> ImportResult:
    stripped = text.lstrip()
    if stripped.startswith("<"):
        return openvino.parse_exec_graph(text, source)
    return openvino.parse_json(text, source) if stripped.startswith("{") else openvino.parse_csv(text, source)


#: Format name -> parser of (text, source name).
PARSERS: dict[str, Parser] = {
    "horizon-profiler": _horizon_profiler,
    "horizon-static": horizon_static.parse,
    "trtexec": trtexec.parse,
    "ort": ort.parse,
    "openvino": _openvino,
    "rknn": rknn.parse,
    "hrt-perf": hrt_perf.parse,
}


def parse_text(text: str, source: str, fmt: str = "auto") -> ImportResult:
    """Parse vendor text of format ``fmt`` (``"auto"``: detect it). ``source`` names it in messages."""
    name = detect_format(text, source) if fmt == "auto" else fmt
    if name not in PARSERS:
        raise InputError(f"unknown format {fmt!r} (formats: auto, {', '.join(FORMATS)})")
    return PARSERS[name](text, source)


def parse_file(path: str | Path, fmt: str = "auto") -> ImportResult:
    """Read and parse one vendor file (see :func:`parse_text`); messages name the file as given."""
    return parse_text(read_text(path), str(path), fmt)
