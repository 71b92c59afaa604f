"""``layerscope import``: each vendor format parsed from fixture files, joined to a model, saved and loaded.

Fixtures live in ``tests/fixtures/importers/`` and are written from each format's documented form (the
source is cited in each test); the TensorRT exports are the real files in ``../shared/fixtures``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from conftest import F32
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.importers import (
    EntryKind,
    ImportResult,
    build_run,
    detect_format,
    import_files,
    parse_file,
)
from layerscope.model import Graph, load_model
from layerscope.run import SCHEMA_VERSION, save_run
from layerscope.runfile import as_run, load_document
from layerscope.runfile.models import RunFile
from layerscope.samples import SAMPLES

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
HORIZON = FIXTURES / "horizon"
SHARED_TRT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "tensorrt" / "resnet-a100-fp16"
MEASURED_KEYS = {"median_us", "mean_us", "p90_us", "min_us", "max_us", "std_us", "cv", "samples", "kernel",
                 "fused_group", "split", "method"}
ESTIMATE_KEYS = {"latency_us", "compute_us", "load_us", "store_us", "bound", "unit", "method"}
KERNEL_KEYS = {"name", "op_type", "provider", "median_us", "mean_us", "p90_us", "min_us", "max_us", "std_us", "cv",
               "samples", "layers", "category"}
#: What a vendor states of a kernel when it does (TensorRT's layer info; a layout kernel's layer without a model).
OPTIONAL_KERNEL_KEYS = {"precision", "tactic", "input_formats", "output_formats", "serves"}
MEASUREMENT_KEYS = {"backend", "backend_version", "provider", "threads", "opt_level", "runs", "warmup", "coverage",
                    "overhead", "unmapped_kernels", "machine", "created_utc", "source", "kind"}
LATENCY_KEYS = {"mean_us", "min_us", "max_us", "p50_us", "p90_us", "p99_us", "p999_us", "fps", "samples", "source"}

needs_shared_trt = pytest.mark.skipif(
    not SHARED_TRT.is_dir(), reason=f"real trtexec exports not present at {SHARED_TRT} (../shared/fixtures)")


@pytest.fixture(scope="module")
def yolov5s(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    """The bundled YOLOv5s sample (torch-style node names like ``/model.2/m/0/cv1/conv/Conv``), built into a
    temporary folder: a module-scoped fixture runs before conftest's cache isolation."""
    path = tmp_path_factory.mktemp("samples") / "yolov5s.onnx"
    onnx.save(SAMPLES["yolov5s"](), str(path))
    return load_model(path)


def layer(run: dict[str, Any], layer_id: str) -> dict[str, Any]:
    return next(x for x in run["layers"] if x["id"] == layer_id)


def round_trip(run: RunFile | dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Save with save_run (a typed run, or a document typed first), read the file back as written, and check
    nothing changed and the keys are the schema's."""
    typed = run if isinstance(run, RunFile) else as_run(run)
    path = save_run(typed, tmp_path / "run.json")
    loaded = load_document(path)
    assert loaded == json.loads(json.dumps(typed.to_json() if isinstance(run, RunFile) else run))
    assert loaded["schema_version"] == SCHEMA_VERSION
    for item in loaded["layers"]:
        if "measured" in item:
            assert set(item["measured"]) == MEASURED_KEYS
            assert item["measured"]["method"].startswith("vendor:")
        if "estimate" in item:
            assert set(item["estimate"]) >= ESTIMATE_KEYS
            assert item["estimate"]["method"].startswith("vendor:")
    for kernel in loaded.get("kernels", []):
        assert KERNEL_KEYS <= set(kernel) <= KERNEL_KEYS | OPTIONAL_KERNEL_KEYS
        assert kernel["category"] in ("layer", "layout", "unmapped")
    if "measurement" in loaded:
        assert set(loaded["measurement"]) == MEASUREMENT_KEYS
    if "latency" in loaded:
        assert set(loaded["latency"]) == LATENCY_KEYS
    return loaded


# --- Horizon hrt_model_exec perf --profile_path --------------------------------------------------------


def test_horizon_x3_profiler_log() -> None:
    """X3/X5 (libdnn) ``profiler.log``: ``perf_result``/``running_condition``, ``***``, then
    ``chip_latency``/``model_latency``/``task_latency`` leaves ``{avg_time, max_time, min_time}`` in ms.
    Source: D-Robotics/rdk_doc, docs/07_Advanced_development/04_toolchain_development/intermediate/
    runtime_sample.md ("算子耗时说明", the mobilenetv1 profiler.log on RDK X3)."""
    result = parse_file(HORIZON / "x3_profiler.log")
    assert result.format == "horizon-profiler" and result.tool == "hrt_model_exec"
    by_name = {e.name: e for e in result.entries}
    subgraph = by_name["BPU_MOBILENET_subgraph_0"]
    assert subgraph.kind is EntryKind.SUBGRAPH and subgraph.provider == "BPU"
    assert subgraph.stats is not None
    assert subgraph.stats.mean_us == pytest.approx(2210.6)
    assert subgraph.stats.max_us == pytest.approx(2563.0) and subgraph.stats.samples == 200
    assert by_name["Preprocess"].kind is EntryKind.LAYOUT
    assert by_name["MOBILENET_subgraph_0_output_layout_convert"].kind is EntryKind.LAYOUT
    assert by_name["Softmax_prob"].kind is EntryKind.LAYER and by_name["Softmax_prob"].provider == "CPU"
    assert result.totals.accelerator is not None and result.totals.accelerator.mean_us == pytest.approx(2210.6)
    assert result.totals.cpu is not None and result.totals.cpu.mean_us == pytest.approx(119.2)
    assert result.totals.latency is not None and result.totals.latency.mean_us == pytest.approx(2421.0)
    assert result.totals.fps == pytest.approx(412.0)
    assert result.info["form"] == "libdnn" and result.info["model_name"] == "mobilenetv1_224x224_nv12"
    assert result.warnings == ()


def test_horizon_ucp_profiler_log_and_csv() -> None:
    """J6/S100 (UCP) ``profiler.log``: a ``ucp_version`` line, ``processor_latency``, ``model_latency``
    keys ``Node-N-BPU-<name>_bpu_segment_<M>`` with ``Stage1-GenerateBpuTask``/``Stage2-BpuCoreProcess``/
    ``Total``; ``profiler.csv``: ``key,value`` lines under ``running_condition`` / ``perf_result``.
    Sources: Horizon J6 OpenExplorer 3.0.17 guide, ucp/runtime/tool_introduction/hrt_model_exec.html
    (``--profile_path``); the public S-series hrt_model_exec perf reference ("profiler.log 输出格式",
    "profiler.csv 输出格式"); the seed forum thread (RDK S100, processor_latency.BPU_inference_time_cost)."""
    log = parse_file(HORIZON / "s100_profiler.log")
    (segment,) = log.entries
    assert segment.name == "Node-0-BPU-yolov5s_bpu_segment_0" and segment.kind is EntryKind.SUBGRAPH
    assert segment.stats is not None and segment.stats.mean_us == pytest.approx(4100.0)  # Total, not a stage
    assert log.totals.accelerator is not None and log.totals.accelerator.mean_us == pytest.approx(4100.0)
    assert log.totals.latency is not None and log.totals.latency.mean_us == pytest.approx(4297.14)  # average_latency
    assert log.info["version"] == "3.7.4" and log.info["form"] == "ucp" and log.info["thread_num"] == "1"
    csv_result = parse_file(HORIZON / "s100_profiler.csv")
    assert csv_result.format == "horizon-profiler" and csv_result.entries == ()
    assert csv_result.totals.latency is not None and csv_result.totals.latency.mean_us == pytest.approx(4297.14)
    assert csv_result.totals.fps == pytest.approx(232.51)
    assert csv_result.info["version"] == "3.7.4" and csv_result.info["frame_count"] == "200"


def test_horizon_truncated_and_duplicated_log_keeps_what_parses() -> None:
    """The board's log is known to come truncated or duplicated (issue #8): the first block repeated, the
    second cut inside ``processor_latency``. Every complete section and entry is kept; each skip is a
    warning that names the file and line. Form as in the UCP test above."""
    result = parse_file(HORIZON / "s100_profiler_truncated.log")
    assert [e.name for e in result.entries] == ["Node-0-BPU-yolov5s_bpu_segment_0"]
    assert result.totals.accelerator is not None and result.totals.accelerator.mean_us == pytest.approx(4100.0)
    assert result.totals.cpu is None  # cut off
    assert result.totals.fps == pytest.approx(232.51)
    assert any("repeated" in w and "line 15" in w for w in result.warnings)
    assert any("cut short" in w for w in result.warnings)
    assert all(w.startswith(str(HORIZON / "s100_profiler_truncated.log")) for w in result.warnings)


# --- Horizon compiler static report ---------------------------------------------------------------------


def test_horizon_static_report_nash_form() -> None:
    """hbdk4 ``hbm_perf(..., output_dir=...)`` / hb_compile ``model.json``: ``summary.performance``,
    ``summary["DDR access data"]``, ``summary["interval info"]``, ``summary["layer details"]`` (cells like
    ``"59 us (8.2% of model)"``), ``summary["model info"]``, ``details[core][]`` instructions.
    Sources: the public hbdk4 hbm_perf JSON report reference (summary/performance/layer details/details
    structure); Horizon OpenExplorer "性能评测及调优" (Layer Details, Timeline units TAE/VAE/AAE/TRANS)."""
    result = parse_file(HORIZON / "s100_model.json")
    assert result.format == "horizon-static" and result.tool == "hbm_perf"
    assert result.totals.estimated_us == pytest.approx(3420.6) and result.totals.estimated_fps == pytest.approx(292.35)
    by_name = {e.name: e for e in result.entries}
    conv = by_name["/model.0/conv/Conv"].estimate
    assert conv is not None
    assert (conv.compute_us, conv.load_us, conv.store_us) == (98.0, 41.0, 62.0)
    assert conv.latency_us == 103.0 and conv.bound == "bandwidth" and conv.unit == "TAE"
    assert conv.active_start_us == 0.0 and conv.active_end_us == 160.0 and conv.ops == 353894400
    conv1 = by_name["/model.1/conv/Conv"].estimate
    assert conv1 is not None and conv1.bound == "compute" and conv1.latency_us == 87.0
    assert by_name["/model.2/Concat"].estimate is not None and by_name["/model.2/Concat"].estimate.unit == "TRANS"
    assert result.info["march"] == "nash-e" and result.info["form"] == "nash"
    assert all(e.stats is None for e in result.entries)


def test_horizon_static_report_bayes_form() -> None:
    """Older (Bayes, hbdk3) reports: a flat summary and ``layer details`` as rows under a header row
    ``["layer", "ops", "computing cost (no DDR)", "load/store cost"]``. Source: D-Robotics/rdk_doc,
    i18n/en/docusaurus-plugin-content-docs/current/07_Advanced_development/04_toolchain_development/expert/
    quick_start.md (``perf_model(..., layer_details=True)`` output for MobileNetV2 on BAYES)."""
    result = parse_file(HORIZON / "bayes_model.json")
    assert result.totals.estimated_us == pytest.approx(44731.9)
    assert len(result.entries) == 6
    first = result.entries[0].estimate
    assert first is not None
    assert (first.compute_us, first.load_us, first.store_us, first.ops) == (29.0, 267.0, None, 113246208)
    assert first.bound == "bandwidth" and first.latency_us == 267.0
    native = {e.name: e for e in result.entries}["_features_18_0_hz_conv2d_torch_native"].estimate
    assert native is not None and native.load_us == 0.0  # the bare "0" cell
    assert result.info["march"] == "BAYES" and result.info["form"] == "bayes"


def test_horizon_profiler_plus_static_report_gives_k_and_scaled_table_in_one_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed forum thread's workflow end to end: k = board ``BPU_inference_time_cost`` / static
    ``latency``, and the static Layer Details shares scaled by k, from one ``layerscope import`` call.
    Forms as in the UCP profiler.log and Nash static report tests above."""
    out = tmp_path / "run.json"
    code = main(["import", str(HORIZON / "s100_profiler.log"), str(HORIZON / "s100_model.json"), "-o", str(out),
                 "--top", "5"])
    printed = capsys.readouterr().out
    assert code == 0
    k = 4100.0 / 3420.6
    assert f"k = {k:.3f}" in printed
    assert "scaled by k" in printed and "/model.0/act/Mul" in printed
    run = load_document(out)
    rec = run["reconcile"]
    assert rec["k"] == pytest.approx(k, rel=1e-6)
    assert rec["measured_us"] == 4100.0 and rec["estimated_us"] == 3420.6
    # The report lists 13 layers summing to 819 µs of the 3420.6 µs static total: shares are of the vendor's
    # total (they add up to 819 / 3420.6 = 23.9%), and the scaled column is k x static (118 µs -> 141.4 µs),
    # not static x 4100 / 819 (= 5.0).
    listed = sum(s["estimated_us"] for s in rec["layers"])
    assert listed == pytest.approx(819.0)
    assert sum(s["share"] for s in rec["layers"]) == pytest.approx(819.0 / 3420.6, abs=1e-5)
    for s in rec["layers"]:
        assert s["scaled_us"] == pytest.approx(k * s["estimated_us"], abs=1e-3)
        assert s["share"] == pytest.approx(s["estimated_us"] / 3420.6, abs=1e-6)
    mul = next(s for s in rec["layers"] if s["name"] == "/model.0/act/Mul")
    assert mul["estimated_us"] == 118.0 and mul["scaled_us"] == pytest.approx(141.437, abs=1e-3)
    assert "141.4" in printed and "23.9% of it" in printed
    ranked = sorted(rec["layers"], key=lambda s: -s["share"])
    assert printed.index(ranked[0]["name"]) < printed.index(ranked[1]["name"])  # largest share first
    assert run["estimate_info"]["method"] == "vendor:hbm_perf"
    round_trip(run, tmp_path)


def test_horizon_static_report_joined_to_the_model(yolov5s: Graph, tmp_path: Path) -> None:
    """Static layers joined to the ONNX model by name (``/model.2/m.0/...`` in the report is
    ``/model.2/m/0/...`` in the sample: joined by normalized name); the one that is not a model layer is
    listed, and the BPU subgraph (one block on the board) is listed as unmapped with its reason."""
    imported = import_files([HORIZON / "s100_profiler.log", HORIZON / "s100_model.json"], graph=yolov5s)
    run = round_trip(imported.run, tmp_path)
    est = layer(run, "/model.2/m/0/cv2/conv/Conv")["estimate"]
    assert est["latency_us"] == 66.0 and est["bound"] == "compute" and est["method"] == "vendor:hbm_perf"
    assert layer(run, "/model.0/conv/Conv")["estimate"]["unit"] == "TAE"
    assert layer(run, "/model.0/conv/Conv")["macs"] > 0  # the model's own costs are kept
    unmatched = {u["name"]: u for u in run["import"]["unmatched"]}
    assert set(unmatched) == {"hz_preprocess_images", "Node-0-BPU-yolov5s_bpu_segment_0"}
    assert "one block" in unmatched["Node-0-BPU-yolov5s_bpu_segment_0"]["reason"]
    assert run["measurement"]["unmapped_kernels"] == ["Node-0-BPU-yolov5s_bpu_segment_0"]
    assert run["summary"]["estimated_layer_count"] == 12
    assert len(run["layers"]) == len(yolov5s.layers)


# --- TensorRT trtexec -----------------------------------------------------------------------------------


def _trt_resnet_model(tmp_path: Path) -> Path:
    """A small ONNX chain whose node names are the ONNX node names the real engine was built from
    (``Conv_0``, ``Relu_1``, ``MaxPool_2`` ... ``Gemm_48``), plus ``Flatten_47`` that TensorRT fused away."""
    profile = json.loads((SHARED_TRT / "resnet.onnx.engine.profile.json").read_text())
    names: set[str] = {"Flatten_47"}
    for item in profile[1:]:
        for token in item["name"].replace("+", " ").split():
            op, _, index = token.rpartition("_")
            if index.isdigit() and op in ("Conv", "Relu", "Add", "MaxPool", "GlobalAveragePool", "Gemm"):
                names.add(token)
    nodes, current = [], "x"
    inits = {"w": np.ones((4, 4, 1, 1), np.float32), "fc": np.ones((10, 4), np.float32)}
    for name in sorted(names, key=lambda n: int(n.rpartition("_")[2])):
        op = name.rpartition("_")[0]
        out = f"{name}_out"
        inputs = {"Conv": [current, "w"], "Add": [current, current], "Gemm": [current, "fc"]}.get(op, [current])
        attrs = {"kernel_shape": [1, 1]} if op == "MaxPool" else {"transB": 1} if op == "Gemm" else {}
        nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        current = out
    graph = helper.make_graph(nodes, "resnet_names", [helper.make_tensor_value_info("x", F32, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info(current, F32, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = tmp_path / "resnet_names.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@needs_shared_trt
def test_trtexec_real_exports(tmp_path: Path) -> None:
    """Real ``trtexec --exportProfile/--exportLayerInfo/--exportTimes`` files of a ResNet engine on an A100
    (NVIDIA/TensorRT, tools/experimental/trt-engine-explorer/examples/pytorch/resnet/A100/fp16, via
    ../shared/fixtures). Forms: NVIDIA/TensorRT samples/common/sampleReporting.cpp (the JSON profile,
    layer information and per-inference times exports)."""
    files = [SHARED_TRT / f"resnet.onnx.engine.{k}.json" for k in ("profile", "graph", "timing")]
    results = [parse_file(f) for f in files]
    assert {r.format for r in results} == {"trtexec"}
    profile, graph_info, timing = results
    by_name = {e.name: e for e in profile.entries}
    conv = by_name["Conv_0 + Relu_1"]
    assert conv.stats is not None and conv.stats.mean_us == pytest.approx(111.616) and conv.stats.samples == 1
    assert by_name["Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1"].kind is EntryKind.LAYOUT
    assert {e.name for e in graph_info.entries} == set(by_name)
    assert {e.name: e.op_type for e in graph_info.entries}["Conv_0 + Relu_1"] == "CaskConvolution"
    assert timing.totals.latency is not None and timing.totals.latency.samples == 3698
    assert timing.totals.accelerator is not None and timing.totals.latency.p90_us is not None

    graph = load_model(_trt_resnet_model(tmp_path))
    imported = build_run(results, graph)
    run = round_trip(imported.run, tmp_path)
    conv0, relu1 = layer(run, "Conv_0")["measured"], layer(run, "Relu_1")["measured"]
    assert conv0["fused_group"] == ["Conv_0", "Relu_1"] and conv0["split"] is True
    assert conv0["kernel"] == "Conv_0 + Relu_1" and conv0["method"] == "vendor:trtexec"
    assert conv0["mean_us"] + relu1["mean_us"] == pytest.approx(111.616, abs=2e-3)
    assert conv0["mean_us"] > relu1["mean_us"]  # split by work: the conv does the MACs
    assert "measured" not in layer(run, "Flatten_47")  # fused away: no time of its own, not invented
    unmatched = [u["name"] for u in run["import"]["unmatched"]]
    assert unmatched == ["reshape_after_Gemm_48"]  # a layer TensorRT added, listed, not dropped
    layout = [k for k in run["kernels"] if k["category"] == "layout"]
    assert len(layout) == 12 and all(k["name"].startswith("Reformatting CopyNode") for k in layout)
    assert layout[0]["layers"] == ["Conv_0", "Relu_1"]
    assert run["latency"]["samples"] == 3698 and run["latency"]["p99_us"] >= run["latency"]["p50_us"]
    assert 0.8 < run["measurement"]["coverage"] < 1.0


def test_trtexec_fused_names_metadata_and_copies(yolov5s: Graph, tmp_path: Path) -> None:
    """trtexec exports of a YOLOv5s engine in their documented form: fused names ``conv + PWN(PWN(sig),
    mul)``, a Myelin ``{ForeignNode[first...last]}`` range, ``Reformatting CopyNode`` layout entries, and
    ``<tensor> copy`` entries (Concat done as copies); layer info ``Metadata`` ``[ONNX Layer: ...]\\x1f...``.
    Sources: a public ``trtexec --exportProfile`` dump of YOLOv5s (names like
    ``/model.1/conv/Conv + PWN(PWN(/model.1/act/Sigmoid), /model.1/act/Mul)``, ``/model.2/m.0/Add_output_0
    copy``); NVIDIA/TensorRT samples/common/sampleReporting.cpp; TensorRT 8.6+ layer info Metadata."""
    trt = FIXTURES / "trtexec"
    files = [trt / "yolov5s.profile.json", trt / "yolov5s.layer.json", trt / "yolov5s.times.json"]
    assert [detect_format(f.read_text(), f.name) for f in files] == ["trtexec"] * 3
    imported = import_files(files, graph=yolov5s)
    run = round_trip(imported.run, tmp_path)
    m1 = layer(run, "/model.1/conv/Conv")["measured"]
    assert m1["fused_group"] == ["/model.1/conv/Conv", "/model.1/act/Sigmoid", "/model.1/act/Mul"]
    assert m1["samples"] == 512 and m1["median_us"] is not None
    sig = layer(run, "/model.0/act/Sigmoid")["measured"]
    assert sig["kernel"] == "PWN(PWN(/model.0/act/Sigmoid), /model.0/act/Mul)" and sig["split"]
    # the sample names /model.2/m/0/... where the engine says /model.2/m.0/...: joined by normalized name
    assert layer(run, "/model.2/m/0/Add")["measured"]["kernel"].startswith("/model.2/m.0/cv2/conv/Conv")
    concat = layer(run, "/model.2/Concat")["measured"]  # the two tensor copies are the Concat's work
    assert concat["mean_us"] == pytest.approx(23.488 + 25.664, abs=1e-3)
    foreign = [x for x in run["layers"] if "measured" in x and x["measured"]["kernel"].startswith("{ForeignNode")]
    assert len(foreign) > 20 and foreign[0]["id"] == "/model.24/m/0/Conv"
    assert sum(x["measured"]["mean_us"] for x in foreign) == pytest.approx(412.672, abs=0.05)
    assert run["import"]["unmatched"] == []
    assert run["latency"]["samples"] == 8 and run["latency"]["mean_us"] == pytest.approx(3624.625, abs=1e-3)


# --- ONNX Runtime ---------------------------------------------------------------------------------------


def _ort_model(tmp_path: Path) -> Path:
    """conv1 -> relu1 -> add1 (+ x2) -> sig1: the model the ORT fixture profile was recorded on."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu1"),
             helper.make_node("Add", ["r", "x2"], ["a"], name="add1"),
             helper.make_node("Sigmoid", ["a"], ["y"], name="sig1")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F32, [1, 3, 16, 16]),
                     helper.make_tensor_value_info("x2", F32, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", F32, [1, 8, 16, 16])],
        initializer=[numpy_helper.from_array(np.full((8, 3, 3, 3), 0.1, np.float32), "w")])
    path = tmp_path / "conv_relu_add_sigmoid.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_onnxruntime_profile_fixture(tmp_path: Path) -> None:
    """ONNX Runtime's profile JSON (``SessionOptions.enable_profiling``): a bare array of trace events,
    ``cat`` Session/Node, ``<node>_kernel_time`` with ``args.op_name``/``provider``, ``model_run`` per run.
    Source: onnxruntime.ai/docs/performance/tune-performance/profiling-tools.html; the fixture is a real
    profile written by onnxruntime 1.32 (5 runs, ORT_ENABLE_ALL, which made ``r_nchwc`` of conv1+relu1)."""
    result = parse_file(FIXTURES / "ort" / "conv_relu_add_sigmoid.profile.json")
    assert result.format == "ort"
    by_name = {e.name: e for e in result.entries}
    assert set(by_name) == {"r_nchwc", "ReorderOutput", "add1", "sig1"}
    assert by_name["ReorderOutput"].kind is EntryKind.LAYOUT
    nchwc = by_name["r_nchwc"]
    assert nchwc.op_type == "Conv" and nchwc.provider == "CPUExecutionProvider"
    assert nchwc.stats is not None and nchwc.stats.samples == 5 and len(nchwc.stats.values_us) == 5
    assert result.totals.latency is not None and result.totals.latency.samples == 5

    run = round_trip(build_run([result], load_model(_ort_model(tmp_path))).run, tmp_path)
    conv = layer(run, "conv1")["measured"]
    assert conv["fused_group"] == ["conv1", "relu1"] and conv["kernel"] == "r_nchwc"  # via tensor r + op chain
    assert conv["p90_us"] is not None and conv["std_us"] is not None and conv["samples"] == 5
    assert layer(run, "add1")["measured"]["kernel"] == "add1"
    assert run["import"]["unmatched"] == []
    assert {k["name"]: k["category"] for k in run["kernels"]}["ReorderOutput"] == "layout"


def test_onnxruntime_profile_generated_now(tmp_path: Path) -> None:
    """A profile written by the installed onnxruntime right now (``enable_profiling`` at
    ORT_ENABLE_EXTENDED, which fuses conv1+relu1 into ``FusedConv`` named ``conv1``): parsed and joined.
    Source: onnxruntime.ai/docs/performance/tune-performance/profiling-tools.html."""
    import onnxruntime as ort

    model = _ort_model(tmp_path)
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "ort")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feeds = {"x": np.ones((1, 3, 16, 16), np.float32), "x2": np.ones((1, 8, 16, 16), np.float32)}
    for _ in range(4):
        session.run(None, feeds)
    profile = Path(session.end_profiling())
    imported = import_files([profile], graph=load_model(model))
    run = round_trip(imported.run, tmp_path)
    assert layer(run, "conv1")["measured"]["samples"] == 4
    assert {"add1", "sig1"} <= {x["id"] for x in run["layers"] if "measured" in x}
    assert run["import"]["unmatched"] == []
    assert run["latency"]["samples"] == 4


# --- OpenVINO benchmark_app -----------------------------------------------------------------------------


def test_openvino_counters_reports(yolov5s: Graph, tmp_path: Path) -> None:
    """OpenVINO ``benchmark_app -report_type average_counters|detailed_counters``: ``;``-separated
    ``layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)`` tables (one per request in the
    detailed report) and the JSON ``{"report_type", "avg_performance": {"nodes": [...]}}``. Sources:
    openvinotoolkit/openvino samples/cpp/benchmark_app/statistics_report.cpp
    (dump_performance_counters_request, perf_counters_to_json) and
    tools/benchmark_tool/openvino/tools/benchmark/utils/statistics_report.py."""
    ov = FIXTURES / "openvino"
    average = parse_file(ov / "benchmark_average_counters_report.csv")
    detailed = parse_file(ov / "benchmark_detailed_counters_report.csv")
    as_json = parse_file(ov / "benchmark_average_counters_report.json")
    assert {average.format, detailed.format, as_json.format} == {"openvino"}
    conv = {e.name: e for e in average.entries}["/model.0/conv/Conv"]
    assert conv.stats is not None and conv.stats.mean_us == pytest.approx(1204.0) and conv.stats.samples is None
    assert conv.provider == "jit_avx512_FP32" and conv.op_type == "Convolution"
    assert [(e.name, e.stats) for e in as_json.entries] == [(e.name, e.stats) for e in average.entries]
    sig = {e.name: e for e in average.entries}["/model.0/act/Sigmoid"]
    assert sig.stats is None and sig.status == "OPTIMIZED_OUT"
    det = {e.name: e for e in detailed.entries}["/model.0/conv/Conv"].stats
    assert det is not None and det.samples == 3 and det.mean_us == pytest.approx(1204.0)
    assert det.median_us == pytest.approx(1.01 * 1204.0)
    run = round_trip(build_run([detailed], yolov5s).run, tmp_path)
    assert layer(run, "/model.2/m/0/cv2/conv/Conv")["measured"]["samples"] == 3
    assert "measured" not in layer(run, "/model.0/act/Sigmoid")
    assert {k["name"]: k["category"] for k in run["kernels"]}["Reorder_2158"] == "layout"
    assert [u["name"] for u in run["import"]["unmatched"]] == ["images", "output0"]


# --- Rockchip RKNN eval_perf ----------------------------------------------------------------------------


def test_rknn_eval_perf_tables(yolov5s: Graph, tmp_path: Path) -> None:
    """``rknn.eval_perf()`` with ``perf_debug=True``: the per-layer table (ID, OpType, DataType, Target,
    shapes, ``Cycles(DDR/NPU/Total)`` or separate ``DDR/NPU/Total Cycles``, ``Time(us)``, MacUsage,
    WorkLoad (``100.0%/0.0%/0.0% - Up:0.0%`` in newer toolkits), RW(KB), FullName) and the per-frame total.
    Sources: airockchip rknn-toolkit2 User Guide §3.2.3 "模型性能评估" (field table); public RK3588
    eval_perf outputs ("Network Layer Information Table"; the "Performance" table with
    ``WorkLoad(0/1/2)-ImproveTherical``)."""
    rk = FIXTURES / "rknn"
    old = parse_file(rk / "eval_perf_rk3588.txt")
    new = parse_file(rk / "eval_perf_v2.txt")
    assert old.format == new.format == "rknn" and old.warnings == () and new.warnings == ()
    conv = {e.name: e for e in old.entries}["Conv:/model.0/conv/Conv"]
    assert conv.stats is not None and conv.stats.mean_us == 2140.0 and conv.provider == "NPU"
    assert conv.op_type == "ConvExSwish" and conv.source_names == ("/model.0/conv/Conv",)
    assert {e.name: e for e in old.entries}["InputOperator:images"].kind is EntryKind.OTHER
    assert old.totals.latency is not None and old.totals.latency.mean_us == 4171.0
    v2 = {e.name: e for e in new.entries}["Conv:/model.1/conv/Conv"]
    assert v2.stats is not None and v2.stats.mean_us == 924.0  # Time(us), not a cycles column
    assert new.totals.latency is not None and new.totals.latency.mean_us == 5315.0
    run = round_trip(build_run([old], yolov5s).run, tmp_path)
    assert layer(run, "/model.2/m/0/Add")["measured"]["mean_us"] == 291.0
    assert {u["name"] for u in run["import"]["unmatched"]} == {"InputOperator:images", "OutputOperator:output0"}


# --- without a model, detection, CLI errors -------------------------------------------------------------


def test_without_model_layers_are_the_vendor_entries(tmp_path: Path) -> None:
    """Without ``--model`` the run's layers are the vendor's entries (ids = vendor names) and the
    ``model`` section says what the files say. Form as in the RKNN test above."""
    run = round_trip(import_files([FIXTURES / "rknn" / "eval_perf_rk3588.txt"]).run, tmp_path)
    assert [x["id"] for x in run["layers"]][:2] == ["InputOperator:images", "Conv:/model.0/conv/Conv"]
    assert run["model"]["path"] is None and "no ONNX model" in run["model"]["note"]
    assert run["import"]["joined_to_model"] is False


def test_same_files_give_identical_bytes(tmp_path: Path) -> None:
    """Determinism: no clock, no host in the run. Forms as in the Horizon tests above."""
    files = [HORIZON / "s100_profiler.log", HORIZON / "s100_model.json"]
    a = save_run(import_files(files).run, tmp_path / "a.json")
    b = save_run(import_files(files).run, tmp_path / "b.json")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("path, fmt", [
    (HORIZON / "x3_profiler.log", "horizon-profiler"), (HORIZON / "s100_profiler.csv", "horizon-profiler"),
    (HORIZON / "s100_model.json", "horizon-static"), (HORIZON / "bayes_model.json", "horizon-static"),
    (FIXTURES / "ort" / "conv_relu_add_sigmoid.profile.json", "ort"),
    (FIXTURES / "openvino" / "benchmark_average_counters_report.csv", "openvino"),
    (FIXTURES / "openvino" / "benchmark_average_counters_report.json", "openvino"),
    (FIXTURES / "rknn" / "eval_perf_v2.txt", "rknn"),
])
def test_detect_format(path: Path, fmt: str) -> None:
    """Every fixture is recognised by its content (forms as cited in the tests above)."""
    assert detect_format(path.read_text(encoding="utf-8"), path.name) == fmt


ALL_FIXTURES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix != ".md")  # not the source notes


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=[p.name for p in ALL_FIXTURES])
def test_every_fixture_round_trips_into_a_run(path: Path, tmp_path: Path) -> None:
    """Each fixture file alone (forms as cited in the tests above) becomes a run that save_run writes and
    load_run reads back unchanged, with the schema's keys."""
    run = round_trip(import_files([path]).run, tmp_path)
    assert run["import"]["files"][0]["sha256"] and run["import"]["files"][0]["format"]


MALFORMED: list[tuple[str, str, list[str], str]] = [
    ("profiler.log", '{"perf_result": {"FPS": "fast"}}', [], "perf_result.FPS"),
    ("model.json", '{"summary": {"layer details": [{"layer name": "a", "computing cost (no DDR)": "x us"}]}}',
     ["--from", "horizon-static"], "layer details[0].computing cost"),
    ("profile.json", '[{"count": 2}, {"name": "conv", "averageMs": -1}]', ["--from", "trtexec"], "[1].averageMs"),
    ("trace.json", '[{"cat": "Node", "name": "a_kernel_time", "dur": "soon", "ph": "X"}]', [], "[0].dur"),
    ("report.csv", "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)\nconv;EXECUTED;Conv\n",
     [], "line 2"),
    # a header that names a column twice (the later one would be read), or leaves some empty before the times
    ("repeated.csv", "layerName;execStatus;layerType;execType;layerName;realTime (ms)\na;EXECUTED;b;c;d;1.0\n",
     [], "line 1: header repeats layerName"),
    ("gaps.csv", "layerName;execStatus;layerType;execType;;;realTime (ms)\nconv;EXECUTED;Conv;jit;0.1;0.2\n",
     [], "line 2: 6 cells where the header's columns need 7"),
    ("eval_perf.txt", "ID   OpType  Target  Time(us)  FullName\n1    Conv    NPU     slow      Conv:a\n",
     ["--from", "rknn"], "line 2"),
    ("broken.json", '{"summary": {', ["--from", "horizon-static"], "line 1 column"),
    ("mystery.txt", "hello world\n", [], "not a vendor profile"),
]


@pytest.mark.parametrize("case", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_files_exit_2_naming_the_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          case: tuple[str, str, list[str], str]) -> None:
    """Bad input: exit 2, one line naming the file and the line or field, no traceback."""
    name, content, extra, where = case
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    assert main(["import", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and where in err


def test_missing_file_and_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing vendor file or model is exit 2 with its name."""
    assert main(["import", str(tmp_path / "nope.log")]) == 2
    assert "nope.log: no such file" in capsys.readouterr().err
    assert main(["import", str(HORIZON / "x3_profiler.log"), "--model", str(tmp_path / "none.onnx")]) == 2
    assert "none.onnx" in capsys.readouterr().err


def test_parse_results_are_immutable() -> None:
    """Results are frozen dataclasses: vendor data cannot be changed behind a run's back."""
    result: ImportResult = parse_file(HORIZON / "x3_profiler.log")
    set_attr: Callable[..., None] = setattr
    with pytest.raises(AttributeError):
        set_attr(result, "tool", "x")
    with pytest.raises(TypeError):
        result.info["x"] = "y"  # type: ignore[index]


def test_input_error_is_what_parsers_raise() -> None:
    """The parsers' only error type is InputError (exit 2)."""
    with pytest.raises(InputError) as info:
        parse_file(FIXTURES / "rknn" / "eval_perf_v2.txt", "trtexec")
    assert info.value.exit_code == 2
