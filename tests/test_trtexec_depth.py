"""trtexec imports at the engine explorer's (trex) depth, on the real exports of a ResNet engine on an A100 (FP16):
per-layer precision, input/output formats, tactic and layer type, the reformat layers' time as their own category,
and throughput per inference (a batch of 32) against per sample, in the run file, the CSV, the HTML details and the
terminal.

The files are NVIDIA/TensorRT's trt-engine-explorer example exports, copied under
``tests/fixtures/importers/trtexec/resnet-a100-fp16/`` (``SOURCES.md`` there). Every expected value below was read
in those files by hand: ``resnet.onnx.engine.graph.json`` (``--exportLayerInfo``) for types, formats and tactics,
``resnet.onnx.engine.profile.json`` (``--exportProfile``) for the times, ``resnet.onnx.engine.profile.metadata.json``
for the throughput and the inference shape. trtexec's throughput is queries per second of host walltime, one query
being one inference of the whole batch (trtexec's "Explanations of the performance metrics": "Throughput: the
observed throughput computed by dividing the number of queries by the Total Host Walltime").
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from conftest import F32
from layerscope.cli.main import main
from layerscope.importers import EntryKind, build_run, parse_file
from layerscope.importers.trtexec import tensor_format
from layerscope.model import load_model
from layerscope.report.html import render_html, report_data
from layerscope.report.tables import layers_csv, markdown_summary
from layerscope.report.views.engine import layout_time, precision_mix_text
from layerscope.report.views.layers import layer_rows
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run

TRT = Path(__file__).parent / "fixtures" / "importers" / "trtexec" / "resnet-a100-fp16"
FILES = [TRT / f"resnet.onnx.engine.{kind}.json" for kind in ("profile", "graph", "profile.metadata",
                                                                 "build.metadata", "metadata")]

CONV0 = "Conv_0 + Relu_1"
REFORMAT_IN = "Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1"
REFORMAT_OUT = "Reformatting CopyNode for Output Tensor 0 to reshape_after_Gemm_48"
#: "TacticName" of Conv_0 + Relu_1 in the graph file.
CONV0_TACTIC = "trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc_nhwc_k64r7s7c4_stride2x2"
#: The 12 reformat layers' averageMs in the profile: 0.080896 (into Conv_0), 0.007168 (out of the last NoOp), ten 0.
REFORMAT_US = 80.896 + 7.168
#: All 36 layers' averageMs in the profile, summed.
PROFILE_US = 1016.832


def test_format_descriptions_become_tensorrt_format_names() -> None:
    """TensorRT's format descriptions (the TensorFormat docs: kHWC8 is "NHWC8", kCHW32 "NC/32HW32", kLINEAR
    "Linear"); a description not recognised is kept as written, with the data type it names."""
    assert tensor_format("Channel major FP16 format where channel % 8 == 0") == ("FP16 NHWC8", "FP16")
    assert tensor_format("Row major linear FP32") == ("FP32 Linear", "FP32")
    assert tensor_format("Row major linear FP16 format") == ("FP16 Linear", "FP16")
    assert tensor_format("Thirty-two wide channel vectorized row major Int8 format") == ("INT8 NC/32HW32", "INT8")
    assert tensor_format("Half(150528,1,672,3)") == ("Half(150528,1,672,3)", "FP16")
    assert tensor_format("Half") == ("FP16", "FP16")
    odd = "Channel major FP16 format where channel == 4 and column stride % 32 == 0"
    assert tensor_format(odd) == (odd, "FP16")
    assert tensor_format("Unknown format") == ("Unknown format", "")


def test_layer_info_gives_precision_formats_tactic_and_type_per_layer() -> None:
    entries = {e.name: e for e in parse_file(TRT / "resnet.onnx.engine.graph.json").entries}
    assert len(entries) == 36
    conv = entries[CONV0]
    assert conv.kind is EntryKind.LAYER and conv.op_type == "CaskConvolution"
    assert conv.precision == "FP16" and conv.tactic == CONV0_TACTIC
    # in: "Channel major FP16 format where channel % 4 == 0"; out: "... channel % 8 == 0"
    assert conv.input_formats == ("FP16 NHWC4",) and conv.output_formats == ("FP16 NHWC8",)
    # two inputs (the residual), both "Channel major FP16 format where channel % 16 == 0"
    assert entries["Conv_5 + Add_6 + Relu_7"].input_formats == ("FP16 NHWC16", "FP16 NHWC16")
    pool = entries["MaxPool_2"]  # no TacticName: the TacticValue
    assert pool.op_type == "CudaPooling" and pool.tactic == "0xfffffffffffffffe" and pool.precision == "FP16"
    # the input reformat casts: "Row major linear FP32" -> "Channel major FP16 format where channel % 4 == 0"
    into = entries[REFORMAT_IN]
    assert into.kind is EntryKind.LAYOUT and into.op_type == "Reformat" and into.precision == "FP32->FP16"
    assert (into.input_formats, into.output_formats, into.tactic) == (("FP32 Linear",), ("FP16 NHWC4",),
                                                                      "0x0000000000000000")
    out = entries[REFORMAT_OUT]  # "Row major linear FP16 format" -> "Row major linear FP32", TacticValue 0x...3e8
    assert out.precision == "FP16->FP32" and out.output_formats == ("FP32 Linear",)
    assert out.tactic == "0x00000000000003e8"
    reformats = [e for e in entries.values() if e.name.startswith("Reformatting CopyNode")]
    assert len(reformats) == 12 and all(e.kind is EntryKind.LAYOUT for e in reformats)


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    out = tmp_path / "run.json"
    assert main(["import", *map(str, FILES), "-o", str(out), "--top", "3"]) == 0
    return load_document(out), " ".join(capsys.readouterr().out.split())


def test_run_keeps_the_choices_and_reformat_time_as_its_own_category(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    run, printed = _run(tmp_path, capsys)
    kernels = {k["name"]: k for k in run["kernels"]}
    conv = kernels[CONV0]
    assert conv["category"] == "layer" and conv["op_type"] == "CaskConvolution" and conv["mean_us"] == 111.616
    assert (conv["precision"], conv["tactic"]) == ("FP16", CONV0_TACTIC)
    assert (conv["input_formats"], conv["output_formats"]) == (["FP16 NHWC4"], ["FP16 NHWC8"])
    layout = [k for k in run["kernels"] if k["category"] == "layout"]
    assert len(layout) == 12 and {k["name"] for k in layout} == {k for k in kernels if k.startswith("Reformatting")}
    assert sum(k["mean_us"] for k in layout) == pytest.approx(REFORMAT_US, abs=1e-3)
    into = kernels[REFORMAT_IN]
    assert into["precision"] == "FP32->FP16" and into["serves"] == [CONV0] and into["mean_us"] == 80.896
    # the reformats are no layer and their time is in no layer's: the layers hold the rest of the profile
    assert not any(layer["id"].startswith("Reformatting") for layer in run["layers"])
    assert run["summary"]["measured_layer_sum_us"] == pytest.approx(PROFILE_US - REFORMAT_US, abs=1e-3)
    assert next(x for x in run["layers"] if x["id"] == CONV0)["measured"]["mean_us"] == 111.616
    # "Throughput": 1155.36 queries/s of "input.1=32x3x224x224": 1155.36 x 32 samples/s
    context = run["import"]["context"]
    assert (context["batch"], context["throughput_per_s"], context["samples_per_s"]) == (32, 1155.36, 36971.52)

    # the terminal: precision mix (every non-layout layer reads FP16), the reformat share 88.064 / 1016.832
    assert "precision mix FP16 100.0% (24 kernels) of the layers' measured time" in printed
    assert ("reformat 88.1 µs = 8.7% of the measured time, in 2 of 12 reformat/copy kernels (layout work, not "
            "counted in any layer's time)") in printed
    assert "throughput 1,155.4 inferences/s x batch 32 = 36,971.5 samples/s" in printed
    assert "mean, 1155.4 inferences/s (batch 32)" in printed and "FPS" not in printed


def test_csv_html_and_markdown_show_the_same_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _run(tmp_path, capsys)
    rows = {r["layer.id"]: r for r in csv.DictReader(io.StringIO(layers_csv(as_run(run))))}
    conv = rows[CONV0]
    assert (conv["meas.precision"], conv["meas.tactic"]) == ("FP16", CONV0_TACTIC)
    assert (conv["meas.input_formats"], conv["meas.output_formats"]) == ("FP16 NHWC4", "FP16 NHWC8")
    assert rows["Conv_5 + Add_6 + Relu_7"]["meas.input_formats"] == "FP16 NHWC16; FP16 NHWC16"
    assert rows["MaxPool_2"]["meas.tactic"] == "0xfffffffffffffffe"

    typed = as_run(run)
    detail = next(r.detail for r in layer_rows(typed) if r.id == CONV0)["kernel"]
    assert detail["tactic"] == CONV0_TACTIC and detail["input_formats"] == ["FP16 NHWC4"]
    assert detail["reformats"] == [REFORMAT_IN] and detail["reformat_us"] == 80.896
    data = report_data(typed)
    kernel_group = dict(next(columns for group, columns in data["details"] if group == "kernel"))
    assert kernel_group["tactic"][0] == "s" and CONV0_TACTIC in data["strings"]
    assert "reformat_us" in kernel_group and "output_formats" in kernel_group
    assert render_html(typed)  # the page renders with the new detail keys

    markdown = markdown_summary(typed)
    assert "| inferences/s (batch 32) |" in markdown and "FPS" not in markdown
    assert "FP16 100.0% (24 kernels)" in markdown and "8.7% of the measured time" in markdown


def _resnet_names_model(tmp_path: Path) -> Path:
    """A chain of ONNX nodes named as the nodes the engine was built from (``Conv_0`` ... ``Gemm_48``, read from the
    engine layer names of the profile), each a 1x1 op on a 4-channel tensor: enough to join the engine to."""
    ops = ("Conv", "Relu", "Add", "MaxPool", "GlobalAveragePool", "Gemm")
    profile = json.loads((TRT / "resnet.onnx.engine.profile.json").read_text())
    names = {part for item in profile[1:] for part in item["name"].split(" + ")
             if part.rpartition("_")[0] in ops and part.rpartition("_")[2].isdigit()}
    nodes, current = [], "x"
    for name in sorted(names, key=lambda n: int(n.rpartition("_")[2])):
        op = name.rpartition("_")[0]
        inputs = {"Conv": [current, "w"], "Add": [current, current], "Gemm": [current, "fc"]}.get(op, [current])
        attrs: dict[str, Any] = {"kernel_shape": [1, 1]} if op == "MaxPool" else {"transB": 1} if op == "Gemm" else {}
        if op == "Gemm":
            nodes.append(helper.make_node("Flatten", [current], ["flat"], name="Flatten_47"))
            inputs = ["flat", "fc"]
        nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        current = f"{name}_out"
    inits = [numpy_helper.from_array(np.ones((4, 4, 1, 1), np.float32), "w"),
             numpy_helper.from_array(np.ones((10, 4), np.float32), "fc")]
    graph = helper.make_graph(nodes, "resnet_names", [helper.make_tensor_value_info("x", F32, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info(current, F32, None)], initializer=inits)
    path = tmp_path / "resnet_names.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_joined_to_a_model_the_reformat_time_stays_off_the_layers(tmp_path: Path) -> None:
    graph = load_model(_resnet_names_model(tmp_path))
    run = build_run([parse_file(f) for f in FILES], graph).run
    layers = {layer.id: layer for layer in run.layers}
    conv0, relu1 = layers["Conv_0"].measured, layers["Relu_1"].measured
    assert conv0 is not None and relu1 is not None
    # the fused kernel's 111.616 µs split over its two layers; the 80.896 µs reformat into it is on neither
    assert (conv0.mean_us or 0) + (relu1.mean_us or 0) == pytest.approx(111.616, abs=2e-3)
    into = next(k for k in run.kernels if k.name == REFORMAT_IN)
    assert into.category == "layout" and into.layers == ["Conv_0", "Relu_1"] and into.serves is None
    rows = {r["layer.id"]: r for r in csv.DictReader(io.StringIO(layers_csv(run)))}
    assert (rows["Conv_0"]["meas.kernel"], rows["Conv_0"]["meas.precision"]) == (CONV0, "FP16")
    assert rows["Conv_0"]["meas.tactic"] == CONV0_TACTIC and rows["Relu_1"]["meas.output_formats"] == "FP16 NHWC8"
    detail = next(r.detail for r in layer_rows(run) if r.id == "Conv_0")["kernel"]
    assert detail["reformats"] == [REFORMAT_IN] and detail["reformat_us"] == 80.896


def test_precision_mix_says_when_only_some_layers_state_a_precision() -> None:
    """The YOLOv5s exports (sources cited in ``test_importers.test_trtexec_fused_names_metadata_and_copies``): the
    layer info lists 4 of the profile's 10 timed engine layers. Three read ``Channel major FP16 format where
    channel % 8 == 0`` (median 35.808, 43.936, 57.344 µs); the Myelin ``{ForeignNode[...]}`` reads FP16 and writes
    ``Row major linear FP32`` (median 412.16 µs). Layout: two reformats (29.696 and 7.168 µs, one 0) and two
    tensor copies (23.456, 25.632 µs)."""
    trt = TRT.parent
    run = build_run([parse_file(trt / "yolov5s.profile.json"), parse_file(trt / "yolov5s.layer.json")]).run
    text = precision_mix_text(run.kernels)
    assert text == ("FP16->FP32 75.0% (1 kernel), FP16 25.0% (3 kernels) of the measured time of the 4 of 10 layer "
                    "kernels that state one")
    layout = layout_time(run.kernels)
    assert layout is not None and (layout.kernels, layout.timed) == (5, 4)
    assert layout.time_us == pytest.approx(29.696 + 7.168 + 23.456 + 25.632, abs=1e-3)
