"""Measured memory per layer (ONNX Runtime's per-kernel sizes) in the run file, CSV and HTML, and the steadiness
verdict in every report format."""

from __future__ import annotations

import copy
import csv
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import zoo
from layerscope.cli.main import main
from layerscope.model import load_model
from layerscope.report.html import report_data
from layerscope.report.renderers import get_renderer
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run


@pytest.fixture(scope="module")
def squeezenet_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("memory") / "run.json"
    assert main(["profile", str(zoo("squeezenet")), "--runs", "3", "--warmup", "1", "--threads", "1",
                 "-o", str(out), "--top", "3"]) == 0
    return load_document(out)


def _layers(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {layer["id"]: layer for layer in run["layers"]}


def test_measured_output_bytes_are_the_tensor_sizes(squeezenet_run: dict[str, Any]) -> None:
    layers = _layers(squeezenet_run)
    # hand-checked: n2 is the first MaxPool, 1x64x111x111 -> 1x64x55x55 float32 = 64 * 55 * 55 * 4 bytes
    assert layers["n2"]["op_type"] == "MaxPool"
    assert layers["n2"]["measured"]["output_bytes"] == 64 * 55 * 55 * 4 == 774400
    assert layers["n2"]["measured"]["activation_bytes"] == 64 * 111 * 111 * 4
    # every layer with a measured output: the sizes of its output tensors from the model's shapes
    graph = load_model(zoo("squeezenet"))
    nodes = {node.id: node for node in graph.layers}
    measured = {lid: layer["measured"]["output_bytes"] for lid, layer in layers.items()
                if "output_bytes" in layer.get("measured", {})}
    assert len(measured) >= 20
    for lid, nbytes in measured.items():
        assert nbytes == sum(graph.tensors[name].nbytes for name in nodes[lid].outputs), lid
    # a fused Conv+Relu wrote one tensor: the Relu's; the Conv inside the kernel has none of its own
    assert layers["n0"]["measured"]["status"] == "fused" and "output_bytes" not in layers["n0"]["measured"]
    assert layers["n1"]["measured"]["output_bytes"] == 64 * 111 * 111 * 4
    assert layers["n1"]["measured"]["parameter_bytes"] == (64 * 3 * 3 * 3 + 64) * 4  # conv1's weights and bias


def test_peak_and_the_layers_that_hold_it(squeezenet_run: dict[str, Any]) -> None:
    memory = squeezenet_run["measurement"]["memory"]
    # hand-checked: conv1+relu's 1x64x111x111 output is still live while the first MaxPool writes 1x64x55x55
    assert memory["peak_layers"] == ["n1", "n2"] and memory["peak_at"] == ["n2"]
    assert memory["peak_bytes"] == 64 * 111 * 111 * 4 + 64 * 55 * 55 * 4
    if memory.get("arena_peak_bytes") is not None:  # ONNX Runtime releases that report the arena
        assert memory["arena_peak_bytes"] >= memory["peak_bytes"]
    assert "ONNX Runtime" in memory["source"]


def test_csv_and_html_show_measured_memory(squeezenet_run: dict[str, Any]) -> None:
    typed = as_run(squeezenet_run)
    rows = {r["layer.id"]: r for r in csv.DictReader(io.StringIO(str(get_renderer("csv").render(typed))))}
    assert rows["n2"]["meas.output_bytes"] == "774400" and rows["n2"]["meas.at_peak"] == "true"
    assert rows["n1"]["meas.at_peak"] == "true" and rows["n5"]["meas.at_peak"] == "false"
    assert rows["n0"]["meas.output_bytes"] == ""  # fused into n1's kernel: no tensor of its own, not 0
    html = str(get_renderer("html").render(as_run(squeezenet_run)))
    assert "Memory (measured)" in html and "3.75 MiB" in html  # 3928576 bytes
    details = dict(report_data(as_run(squeezenet_run))["details"])  # the detail panel's groups
    assert {key for key, _ in details["memory"]} == {"measured output_bytes", "estimated bytes_written",
                                                    "live at measured peak"}
    terminal = str(get_renderer("terminal", width=300).render(as_run(squeezenet_run)))
    assert "peak 3.75 MiB of layer outputs live at once (held by n1, n2; while n2 runs)" in terminal


def _with(run: dict[str, Any], **measurement: Any) -> dict[str, Any]:
    edited = copy.deepcopy(run)
    for key, value in measurement.items():
        if isinstance(value, dict):
            edited["measurement"][key].update(value)
        else:
            edited["measurement"][key] = value
    return edited


def test_unsteady_verdict_in_markdown_html_and_csv(squeezenet_run: dict[str, Any]) -> None:
    unsteady = _with(squeezenet_run, steadiness={"latency_cv": 0.01, "latency_drift": 0.0, "profiled_drift": -0.33})
    steady = _with(squeezenet_run, steadiness={"latency_cv": 0.01, "latency_drift": 0.002, "profiled_drift": 0.01})
    for fmt in ("md", "html"):
        assert "UNSTEADY MACHINE: its speed moved 33%" in str(get_renderer(fmt).render(as_run(unsteady))), fmt
        assert "UNSTEADY" not in str(get_renderer(fmt).render(as_run(steady))), fmt
    rows = list(csv.DictReader(io.StringIO(str(get_renderer("csv").render(as_run(unsteady))))))
    assert {r["meas.steadiness"] for r in rows if r["meas.status"]} == {"UNSTEADY (moved 33%)"}


def test_negative_overhead_reads_as_drift(squeezenet_run: dict[str, Any]) -> None:
    run = _with(squeezenet_run, overhead=-0.35)
    for fmt in ("md", "html", "terminal"):
        text = str(get_renderer(fmt).render(as_run(run)))
        assert "35.0% less time" in text and "drift" in text, fmt
        assert "-35.0%" not in text, fmt


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="OpenVINO is not installed")
def test_openvino_output_sizes_are_the_compiled_tensors_at_the_precision_it_chose(tmp_path: Path) -> None:
    """OpenVINO's CPU plugin reports no allocation per node: the sizes are its compiled model's, each executed node's
    output shape at the runtime precision it chose (bf16 or f32 depending on the CPU: read from the run, never
    assumed), and the run file says so."""
    out = tmp_path / "ov.json"
    assert main(["profile", str(zoo("squeezenet")), "--backend", "openvino", "--runs", "2", "--warmup", "1",
                 "-o", str(out)]) == 0
    run = json.loads(out.read_text())
    memory = run["measurement"]["memory"]
    assert memory["source"].startswith("OpenVINO compiled model") and memory["arena_peak_bytes"] is None
    layers = _layers(run)
    kernel = next(k for k in run["kernels"] if "n2" in k["layers"])
    element = {"bf16": 2, "f16": 2, "fp16": 2, "f32": 4, "fp32": 4}[str(kernel["precision"]).lower()]
    # n2, the first MaxPool: 1x64x55x55 at the node's runtime precision
    assert layers["n2"]["measured"]["output_bytes"] == 64 * 55 * 55 * element
    assert memory["peak_bytes"] >= layers["n2"]["measured"]["output_bytes"] and memory["peak_layers"]
    # the same columns and panels as ONNX Runtime's
    rows = {r["layer.id"]: r for r in csv.DictReader(io.StringIO(str(get_renderer("csv").render(as_run(run)))))}
    assert rows["n2"]["meas.output_bytes"] == str(64 * 55 * 55 * element)
    html = str(get_renderer("html").render(as_run(run)))
    assert "Memory (measured)" in html and "OpenVINO compiled model" in html
