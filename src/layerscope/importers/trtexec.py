"""TensorRT ``trtexec`` exports: ``--exportProfile``, ``--exportLayerInfo`` and ``--exportTimes``.

- profile: a JSON array, ``{"count": N}`` (the number of profiled inferences) then one object per
  engine layer ``{name, timeMs, averageMs, medianMs, percentage}`` (``medianMs`` from TensorRT 8.4);
- layer info: ``{"Layers": [...], "Bindings": [...]}``; a layer is its name alone
  (``--profilingVerbosity=layer_names_only``) or an object with ``Name``, ``LayerType``, ``Inputs``,
  ``Outputs`` and, from TensorRT 8.6, ``Metadata`` naming the ONNX nodes it was built from
  (``[ONNX Layer: a]\\x1f[ONNX Layer: b]``);
- times: a JSON array, one object per inference with ``latencyMs``, ``computeMs``, ``h2dMs``,
  ``d2hMs`` (and their start/end timestamps).

With them, the TensorRT engine explorer's (trex) ``process_engine.py`` writes three metadata files from the
trtexec logs and the device, which ``layerscope import *.json`` reads too:

- ``*.metadata.json``: a JSON array with one object per GPU, CUDA's device properties (``Name``,
  ``ComputeCapability`` [major, minor], ``TotalMemory`` bytes, ...);
- ``*.build.metadata.json``: ``{"model_options": {...}, "build_options": {"Precision": "FP32+FP16",
  "Max batch": ...}}``, trtexec's build options as it logged them;
- ``*.profile.metadata.json``: ``{"performance_summary": {"Throughput": <inferences/s>, "Latency": [min,
  max, mean, median, percentile] ms, "GPU Compute Time": [...] ms, ...}, "inference_options": {"Batch",
  "Input inference shape": "input=32x3x224x224", ...}, "device_information": {"Selected Device", ...}}``.

Their facts land in ``info``: ``device``, ``compute_capability``, ``device_memory_bytes``, ``precision``,
``batch`` (the first dimension of the inference shape when the engine has an explicit batch),
``throughput_per_s`` (inferences per second, each of ``batch`` samples).

Engine layer names are fused names (``Conv_0 + Relu_1``, ``PWN(/m/Sigmoid, /m/Mul)``,
``{ForeignNode[a...b]}``); ``Reformatting CopyNode for Input Tensor 0 to <layer>`` entries are layout
work for ``<layer>`` and ``<tensor> copy`` entries copy a tensor (a Concat done as copies).

From a layer info file exported with ``--profilingVerbosity=detailed``, each engine layer also says what the
builder chose (trex's view of a layer):

- formats: each input's and output's ``Format/Datatype`` (``Channel major FP16 format where channel % 8 == 0``)
  as data type and layout in TensorRT's format names (``FP16 NHWC8``; ``Linear`` for row-major linear,
  ``NC/32HW32`` for a vectorized one); a description not recognised is kept as written;
- precision: the data type of the first input (the engine explorer's rule), ``<in>-><out>`` when the first
  output's differs (a reformat that casts ``FP32->FP16``);
- tactic: ``TacticName`` (the kernel, ``sm80_xmma_fprop_implicit_gemm_...``), else ``TacticValue`` (``0x...``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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
        if "performance_summary" in data or "inference_options" in data:
            return parse_profile_metadata(data, source)
        if "build_options" in data or "model_options" in data:
            return parse_build_metadata(data, source)
        if "Layers" not in data:
            fail(source, "", "a JSON object without 'Layers': not a trtexec --exportLayerInfo file")
        return parse_layer_info(data, source)
    items = expect_list(data, source, "top level")
    if items and all(isinstance(i, dict) and "ComputeCapability" in i for i in items):
        return parse_device_metadata(items, source)
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
        entries.setdefault(name, _with_choices(_engine_entry(name, op_type=op_type, source_names=names), obj, source,
                                               where))
    bindings = data.get("Bindings")
    info = make_info({"profile": "exportLayerInfo",
                      "bindings": len(bindings) if isinstance(bindings, list) else None})
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=tuple(entries.values()), info=info)


#: Data type words of TensorRT's format descriptions and format names, as layerscope writes them.
_DTYPES = {"FP32": "FP32", "Float": "FP32", "FP16": "FP16", "Half": "FP16", "BFloat16": "BF16", "BF16": "BF16",
           "FP8": "FP8", "FP4": "FP4", "Double": "FP64", "Int8": "INT8", "INT8": "INT8", "Int4": "INT4", "INT4": "INT4",
           "Int16": "INT16", "Int32": "INT32", "INT32": "INT32", "Int64": "INT64", "INT64": "INT64", "UInt8": "UINT8",
           "UINT8": "UINT8", "BOOL": "BOOL", "Bool": "BOOL"}
_VECTOR_WIDTHS = {"Two": 2, "Four": 4, "Sixteen": 16, "Thirty-two": 32}
_THREE_D = " with 3 spatial dimensions"
_LINEAR_FORMAT = re.compile(r"^Row major linear (?P<dtype>\w+)(?: format)?$")
_CHANNEL_MAJOR = re.compile(rf"^Channel major (?P<dtype>\w+) format(?P<d1>{_THREE_D})?"
                            rf"(?: where channel % (?P<vector>\d+) == 0)?(?P<d2>{_THREE_D})?$")
_VECTORIZED = re.compile(rf"^(?P<width>{'|'.join(_VECTOR_WIDTHS)}) wide channel vectorized row major (?P<dtype>\w+) "
                         rf"format(?P<d1>{_THREE_D})?$")
#: A format as data type and strides, the builder log's notation (``Half(150528,1,672,3)``).
_STRIDED = re.compile(r"^(?P<dtype>\w+)\([\d,\s]*\)$")


def tensor_format(description: str) -> tuple[str, str]:
    """(format, data type) of one ``Format/Datatype``: ``Channel major FP16 format where channel % 8 == 0`` is
    ``("FP16 NHWC8", "FP16")``, ``Row major linear FP32`` ``("FP32 Linear", "FP32")``, ``Thirty-two wide channel
    vectorized row major Int8 format`` ``("INT8 NC/32HW32", "INT8")``; a bare data type (``Half``) is its name
    alone; any other description is kept as written, with the first data type word it holds (``""``: none)."""
    text = " ".join(description.split()).rstrip(".")
    if text in _DTYPES:
        return _DTYPES[text], _DTYPES[text]
    for pattern in (_LINEAR_FORMAT, _CHANNEL_MAJOR, _VECTORIZED):
        match = pattern.match(text)
        dtype = _DTYPES.get(match["dtype"], "") if match else ""
        if not match or not dtype:
            continue
        groups = match.groupdict()
        three_d = bool(groups.get("d1") or groups.get("d2"))
        if pattern is _LINEAR_FORMAT:
            layout = "Linear"
        elif pattern is _CHANNEL_MAJOR:
            layout = ("NDHWC" if three_d else "NHWC") + (groups["vector"] or "")
        else:
            width = _VECTOR_WIDTHS[groups["width"]]
            layout = f"NC/{width}DHW{width}" if three_d else f"NC/{width}HW{width}"
        return f"{dtype} {layout}", dtype
    strided = _STRIDED.match(text)
    if strided and strided["dtype"] in _DTYPES:
        return text, _DTYPES[strided["dtype"]]
    return text, next((_DTYPES[w] for w in re.findall(r"[\w-]+", text) if w in _DTYPES), "")


def _tensor_formats(value: Any, source: str, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(formats, data types) of a layer's ``Inputs`` or ``Outputs``, for the tensors that state a format."""
    formats: list[str] = []
    dtypes: list[str] = []
    for i, tensor in enumerate(expect_list(value, source, where)):
        obj = expect_dict(tensor, source, f"{where}[{i}]")
        if "Format/Datatype" not in obj:
            continue
        fmt, dtype = tensor_format(expect_str(obj["Format/Datatype"], source, f"{where}[{i}].Format/Datatype"))
        formats.append(fmt)
        dtypes.append(dtype)
    return tuple(formats), tuple(dtypes)


def _with_choices(entry: VendorEntry, obj: dict[str, Any], source: str, where: str) -> VendorEntry:
    """``entry`` with the formats, precision and tactic its layer info object states (see the module docstring)."""
    inputs, in_types = _tensor_formats(obj.get("Inputs", []), source, f"{where}.Inputs")
    outputs, out_types = _tensor_formats(obj.get("Outputs", []), source, f"{where}.Outputs")
    reads = in_types[0] if in_types else (out_types[0] if out_types else "")
    writes = out_types[0] if out_types else ""
    precision = f"{reads}->{writes}" if reads and writes and reads != writes else reads
    tactic = ""
    for key in ("TacticName", "TacticValue"):
        value = obj.get(key)
        if value not in (None, ""):
            tactic = expect_str(value, source, f"{where}.{key}")
            break
    return replace(entry, precision=precision, input_formats=inputs, output_formats=outputs, tactic=tactic)


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


def parse_device_metadata(items: Sequence[Any], source: str) -> ImportResult:
    """``*.metadata.json``: the GPU the engine was profiled on (the first one listed)."""
    device = expect_dict(items[0], source, "[0]")
    name = expect_str(device.get("Name", ""), source, "[0].Name")
    capability = expect_list(device.get("ComputeCapability", []), source, "[0].ComputeCapability")
    major_minor = [as_int(v, source, f"[0].ComputeCapability[{i}]") for i, v in enumerate(capability[:2])]
    memory = device.get("TotalMemory")
    info = {"profile": "metadata", "device": name or None,
            "compute_capability": ".".join(str(v) for v in major_minor) or None,
            "device_memory_bytes": as_int(memory, source, "[0].TotalMemory") if memory is not None else None}
    return ImportResult(path=source, format=FORMAT, tool=TOOL, info=make_info(info))


def parse_build_metadata(data: dict[str, Any], source: str) -> ImportResult:
    """``*.build.metadata.json``: the precision the engine was built for, and the model it came from."""
    build = expect_dict(data.get("build_options", {}), source, "build_options")
    model = expect_dict(data.get("model_options", {}), source, "model_options")
    precision = build.get("Precision")
    model_path = model.get("Model") or model.get("ONNX")
    info = {"profile": "build.metadata",
            "precision": expect_str(precision, source, "build_options.Precision") if precision else None,
            "max_batch": _text(build.get("Max batch")),
            "model_name": _basename(expect_str(model_path, source, "model_options.Model")) if model_path else None}
    return ImportResult(path=source, format=FORMAT, tool=TOOL, info=make_info(info))


def parse_profile_metadata(data: dict[str, Any], source: str) -> ImportResult:
    """``*.profile.metadata.json``: throughput, latency and GPU compute time summaries, batch, device."""
    summary = expect_dict(data.get("performance_summary", {}), source, "performance_summary")
    options = expect_dict(data.get("inference_options", {}), source, "inference_options")
    device = expect_dict(data.get("device_information", {}), source, "device_information")
    throughput = summary.get("Throughput")
    fps = as_float(throughput, source, "performance_summary.Throughput") if throughput is not None else None
    latency = _summary_stats(summary, "Latency", source)
    compute = _summary_stats(summary, "GPU Compute Time", source)
    selected = device.get("Selected Device")
    info = {"profile": "profile.metadata",
            "device": expect_str(selected, source, "device_information.Selected Device") if selected else None,
            "compute_capability": _text(device.get("Compute Capability")),
            "batch": _batch(options, source),
            "throughput_per_s": fps,
            "iterations": _text(options.get("Iterations")),
            "cuda_graph": _text(options.get("CUDA Graph"))}
    totals = Totals(latency=latency, fps=fps, accelerator=compute)
    return ImportResult(path=source, format=FORMAT, tool=TOOL, totals=totals, info=make_info(info))


def _summary_stats(summary: dict[str, Any], key: str, source: str) -> TimeStats | None:
    """trtexec's ``min, max, mean, median, percentile`` (ms) of one performance summary line, in µs."""
    if key not in summary:
        return None
    values = expect_list(summary[key], source, f"performance_summary.{key}")
    numbers = [as_float(v, source, f"performance_summary.{key}[{i}]") * US_PER_MS for i, v in enumerate(values)]
    if len(numbers) < 4:
        fail(source, f"performance_summary.{key}", f"expected [min, max, mean, median, ...], got {len(numbers)} "
             "values")
    low, high, mean, median = numbers[:4]
    return TimeStats(mean_us=mean, median_us=median, min_us=low, max_us=high)


def _batch(options: dict[str, Any], source: str) -> int | None:
    """The batch of the profiled inferences: ``Batch`` when it is a number, else the first dimension of the
    first ``Input inference shape`` (``input.1=32x3x224x224``: 32)."""
    batch = options.get("Batch")
    if isinstance(batch, int) or (isinstance(batch, str) and batch.isdigit()):
        return int(batch)
    shape = options.get("Input inference shape") or options.get("Input inference shapes")
    if not isinstance(shape, str) or "=" not in shape:
        return None
    first = shape.split(",")[0].rpartition("=")[2].split("x")[0].strip()
    return int(first) if first.isdigit() else None


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, (dict, list)) else str(value)


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]
