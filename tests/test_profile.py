"""``layerscope profile``: per-layer measurement on ONNX Runtime joined to the estimate."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import zoo
from layerscope.cli.main import main
from layerscope.measure.kernel_trace import KernelSamples
from layerscope.measure.profile import KernelResult, _shares, layer_results, timed_runs
from layerscope.model import load_model
from layerscope.report.terminal import measurement_summary
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run
from layerscope.stats import summarize


@pytest.fixture(scope="module")
def squeezenet_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("profile") / "run.json"
    assert main(["profile", str(zoo("squeezenet")), "-t", "rdk-s100", "--runs", "5", "--warmup", "1",
                 "--threads", "1", "-o", str(out), "--top", "5"]) == 0
    return load_document(out)


def test_run_file_has_the_measured_sections(squeezenet_run: dict[str, Any]) -> None:
    run = squeezenet_run
    assert {"measurement", "latency", "kernels"} <= run.keys()
    m = run["measurement"]
    assert m["backend"] == "onnxruntime" and m["provider"] == "CPUExecutionProvider"
    assert m["threads"] == 1 and m["opt_level"] == "all" and m["runs"] == 5
    assert {"cpu", "cores", "hostname"} <= m["machine"].keys()
    assert m["mapped_share"] >= 0.99 and m["unmapped_kernels"] == []
    assert 0.3 < m["coverage"] <= 1.05
    lat = run["latency"]
    assert lat["samples"] == 5 and lat["p50_us"] <= lat["p90_us"] <= lat["p99_us"] <= lat["max_us"]
    assert lat["fps"] == pytest.approx(1e6 / lat["mean_us"], rel=1e-3)


def test_steadiness_says_how_far_the_machine_moved(squeezenet_run: dict[str, Any]) -> None:
    steadiness = squeezenet_run["measurement"]["steadiness"]
    assert steadiness["latency_cv"] == pytest.approx(squeezenet_run["latency"]["cv"], abs=1e-6)
    assert -1.0 < steadiness["latency_drift"] < 10.0 and -1.0 < steadiness["profiled_drift"] < 10.0

    def rendered(**values: float) -> str:
        run = copy.deepcopy(squeezenet_run)
        run["measurement"]["steadiness"].update(values)
        console = Console(width=240, record=True)
        console.print(measurement_summary(as_run(run)))
        return console.export_text()

    steady = rendered(latency_cv=0.01, latency_drift=0.004, profiled_drift=-0.02)
    assert "median moved +0.4% from the first to the second half" in steady and "UNSTEADY" not in steady
    unsteady = rendered(latency_cv=0.01, latency_drift=0.0, profiled_drift=-0.18)
    assert "UNSTEADY MACHINE: its speed moved 18%" in unsteady
    # it recommends commands that exist (there is no `layerscope stress`)
    assert "layerscope stress" not in unsteady and "`layerscope bench --stress`" in unsteady


def test_every_layer_is_measured_fused_or_eliminated(squeezenet_run: dict[str, Any]) -> None:
    statuses = {layer["measured"]["status"] for layer in squeezenet_run["layers"]}
    assert statuses <= {"measured", "fused", "eliminated"}
    for layer in squeezenet_run["layers"]:
        meas = layer["measured"]
        if meas["status"] == "fused":
            assert meas["split"] and layer["id"] in meas["fused_group"]
        if meas["status"] != "eliminated":
            assert meas["samples"] == 5 and meas["kernel"]


def test_layer_times_add_up_to_the_kernels_they_come_from(squeezenet_run: dict[str, Any]) -> None:
    # Per run, each kernel's time is split over its layers, so layer means add up to layer-kernel means.
    kernels = [k for k in squeezenet_run["kernels"] if k["category"] == "layer"]
    layers = [layer for layer in squeezenet_run["layers"] if layer["measured"]["status"] != "eliminated"]
    assert sum(layer["measured"]["mean_us"] for layer in layers) == pytest.approx(
        sum(k["mean_us"] for k in kernels), rel=1e-4)


def test_shares_follow_the_estimate() -> None:
    assert _shares(("a", "b", "c"), {"a": 3.0, "b": 1.0, "c": 0.0}) == [0.75, 0.25, 0.0]
    assert _shares(("a", "b"), {}) == [0.5, 0.5]


def test_split_is_per_run(tmp_path: Path) -> None:
    graph = load_model(zoo("squeezenet"))
    first, second = graph.layers[0].id, graph.layers[1].id  # Conv, Relu
    kernel = KernelResult(KernelSamples("k", "FusedConv", "cpu", (10.0, 30.0)), summarize([10.0, 30.0]),
                          (first, second), "layer")
    results = layer_results(graph, (kernel,), {first: 3.0, second: 1.0})
    conv = results[first]
    assert conv.stats is not None and conv.stats.min_us == pytest.approx(7.5) and conv.stats.max_us == 22.5
    assert conv.split and conv.fused_group == (first, second) and conv.status == "fused"
    assert results[graph.layers[2].id].status == "eliminated"


class _Session:
    def __init__(self, fail_at: int) -> None:
        self.calls = 0
        self.fail_at = fail_at

    def run(self, *_: object) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt


def test_interrupt_keeps_what_was_measured() -> None:
    samples, interrupted = timed_runs(_Session(fail_at=4).run, 0, 10, phases=("warmup", "latency"), progress=None)
    assert interrupted and len(samples) == 3


def test_unavailable_provider_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(zoo("squeezenet")), "--provider", "tensorrt"]) == 3
    err = capsys.readouterr().err
    assert "not available" in err and "cpu" in err


def test_wrong_input_shape_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros((1, 3, 200, 200), np.float32))
    assert main(["profile", str(zoo("squeezenet")), "--input", f"data_0={tmp_path / 'x.npy'}"]) == 2
    err = capsys.readouterr().err
    assert "1x3x200x200" in err and "1x3x224x224" in err


def test_run_file_is_valid_json_with_the_estimate_beside(squeezenet_run: dict[str, Any]) -> None:
    assert squeezenet_run["target"]["name"] == "rdk-s100"
    assert all("estimate" in layer for layer in squeezenet_run["layers"])
    json.dumps(squeezenet_run, allow_nan=False)


def test_execution_trace_levels(squeezenet_run: dict[str, Any]) -> None:
    from layerscope.report.exec_trace import execution_trace

    full = execution_trace(as_run(squeezenet_run), "full")
    assert full["model_info"]["total_layers"] == len(squeezenet_run["layers"]) == len(full["execution_trace"])
    first = full["execution_trace"][0]
    assert first["op_type"] == "Conv" and first["input_shape"] == [1, 3, 224, 224]
    # squeezenet's first conv: 64 x 3 x 3 x 3 fp32 weights + 64 biases = (1728 + 64) x 4 = 7,168 B
    assert first["memory"]["weight_size_bytes"] == 7_168
    timed = [e for e in full["execution_trace"] if e["timing"]["start_us"] is not None]
    assert timed and all(e["timing"]["end_us"] >= e["timing"]["start_us"] >= 0 for e in timed)
    intervals = sorted((e["timing"]["start_us"], e["timing"]["end_us"]) for e in timed)
    # the sequential executor runs one kernel at a time: layers never overlap inside the run
    assert all(end <= nxt + 1e-3 for (_, end), (nxt, _) in itertools.pairwise(intervals))
    basic = execution_trace(as_run(squeezenet_run), "basic")["execution_trace"][0]
    assert set(basic) == {"layer_id", "layer_name", "op_type", "timing"}
    memory = execution_trace(as_run(squeezenet_run), "memory")["execution_trace"][0]
    assert "memory" in memory and "input_shape" not in memory
    assert full["summary"]["provider"] == "CPUExecutionProvider" and full["summary"]["measured"]


def _has_cuda() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.mark.skipif(not _has_cuda(), reason="needs onnxruntime-gpu and an NVIDIA GPU (CI has neither)")
def test_cuda_provider_maps_kernels(tmp_path: Path) -> None:
    out = tmp_path / "cuda.json"
    assert main(["profile", str(zoo("resnet50")), "--provider", "cuda", "--runs", "10", "-o", str(out)]) == 0
    run = load_document(out)
    assert run["measurement"]["provider"] == "CUDAExecutionProvider"
    assert run["measurement"]["mapped_share"] >= 0.99
