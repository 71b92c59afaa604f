"""Importers against the tools' real outputs: trtexec's whole export set (with the engine explorer's metadata
files) and an ONNX Runtime profile joined through the fusion map."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from conftest import ModelWriter
from layerscope.cli.main import main
from layerscope.importers import detect_format, parse_file
from layerscope.importers.ort_join import LEVELS
from layerscope.measure.fusion import build_fusion_map
from layerscope.measure.profile import kernel_results, layer_results
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runfile import load_document
from layerscope.runtimes.onnxruntime.session import make_session
from layerscope.runtimes.onnxruntime.trace import load_events, parse_profile
from layerscope.samples import sample_path
from test_fusion_invariant import BUILDERS

#: The real trtexec exports (../shared/fixtures beside the checkout, or above a worktree of it).
SHARED_TRT = next((p / "shared" / "fixtures" / "tensorrt" / "resnet-a100-fp16" for p in Path(__file__).resolve().parents
                   if (p / "shared" / "fixtures" / "tensorrt").is_dir()), Path("shared/fixtures/tensorrt/missing"))
needs_shared_trt = pytest.mark.skipif(
    not SHARED_TRT.is_dir(), reason=f"real trtexec exports not present at {SHARED_TRT} (../shared/fixtures)")


@needs_shared_trt
def test_trtexec_metadata_files_say_device_precision_batch_throughput() -> None:
    device, build, profile = (parse_file(SHARED_TRT / f"resnet.onnx.engine.{k}json")
                              for k in ("metadata.", "build.metadata.", "profile.metadata."))
    assert {r.format for r in (device, build, profile)} == {"trtexec"}
    assert device.info["device"] == "NVIDIA A100 80GB PCIe" and device.info["compute_capability"] == "8.0"
    assert device.info["device_memory_bytes"] == "84929216512"
    assert build.info["precision"] == "FP32+FP16" and build.info["model_name"] == "resnet.onnx"
    # "Input inference shape": "input.1=32x3x224x224" with "Batch": "Explicit"
    assert profile.info["batch"] == "32" and profile.info["throughput_per_s"] == "1155.36"
    assert profile.info["device"] == "NVIDIA A100 80GB PCIe"
    latency = profile.totals.latency
    # "Latency": [0.856049, 0.872559, 0.86277, 0.862183, 0.871338] ms = min, max, mean, median, percentile
    assert latency is not None and (latency.min_us, latency.max_us, latency.mean_us, latency.median_us) == \
        pytest.approx((856.049, 872.559, 862.77, 862.183))
    assert profile.totals.fps == 1155.36 and profile.totals.accelerator is not None


@needs_shared_trt
def test_import_of_the_whole_trtexec_export_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(SHARED_TRT.glob("*.json"))
    assert len(files) == 6 and {detect_format(f.read_text(), f.name) for f in files} == {"trtexec"}
    out = tmp_path / "run.json"
    assert main(["import", *map(str, files), "-o", str(out), "--top", "3"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "device NVIDIA A100 80GB PCIe (compute capability 8.0)" in printed
    assert "precision FP32+FP16" in printed and "batch 32" in printed
    # 1155.36 inferences/s of 32 images: 36,971.52 images/s
    assert "throughput 1,155.4 inferences/s x batch 32 = 36,971.5 samples/s" in printed
    run = load_document(out)
    assert run["import"]["context"] == {
        "device": "NVIDIA A100 80GB PCIe", "compute_capability": "8.0", "device_memory_bytes": 84929216512,
        "precision": "FP32+FP16", "batch": 32, "throughput_per_s": 1155.36, "samples_per_s": 36971.52}
    # the per-inference times (--exportTimes) win over the summary line the metadata repeats
    assert run["latency"]["samples"] == 3698 and run["latency"]["source"].endswith("timing.json")
    assert run["latency"]["fps"] == 1155.36 and run["summary"]["fps"] == 1155.36
    assert len(run["kernels"]) == 36 and run["import"]["unmatched"] == []


def test_broken_trtexec_metadata_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "m.profile.metadata.json"
    bad.write_text(json.dumps({"performance_summary": {"Throughput": 10.0, "Latency": [1.0, 2.0]}}))
    assert main(["import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "performance_summary.Latency: expected [min, max, mean, median, ...], got 2 values" in err
    device = tmp_path / "m.metadata.json"
    device.write_text(json.dumps([{"Name": "GPU", "ComputeCapability": ["eight", 0]}]))
    assert main(["import", str(device)]) == 2


def _profile_file(model: Path, level: str, prefix: Path) -> Path:
    """Run ``model`` three times with ONNX Runtime's own profiler on, at ``level``; the profile JSON."""
    import onnxruntime as ort

    from layerscope.measure.inputs import make_inputs
    from layerscope.runtimes.onnxruntime.session import _graph_opt_level

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(prefix)
    options.graph_optimization_level = _graph_opt_level(level)
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feeds = make_inputs(load_model(model))
    for _ in range(3):
        session.run(None, feeds)
    return Path(session.end_profiling())


@pytest.mark.parametrize(("model", "level"), [("conv_gelu_conv", "all"), ("transformer_block", "extended"),
                                              ("transformer_block", "disable"), ("yolov5s", "all")])
def test_ort_profile_import_maps_as_the_profile_command_does(model: str, level: str, write_model: ModelWriter,
                                                             tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = sample_path("yolov5s", size=320) if model == "yolov5s" else BUILDERS[model](write_model)
    graph = load_model(path)
    profile = _profile_file(path, level, tmp_path / "ort")
    out = tmp_path / "run.json"
    assert main(["import", str(profile), "--model", str(path), "-o", str(out), "--top", "0"]) == 0
    run = load_document(out)
    # the direct backend's mapping of the same kernels: the optimized graph at the same level
    optimized = tmp_path / "optimized.onnx"
    make_session(path, SessionConfig(opt_level=level), optimized_model_path=str(optimized))
    fusion = build_fusion_map(graph, onnx.load(str(optimized)))
    direct = kernel_results(parse_profile(load_events(profile)), fusion)
    imported = {k["name"]: k for k in run["kernels"]}
    assert set(imported) == {k.samples.name for k in direct}
    expected_category = {"layer": "layer", "layout": "layout", "constant": "layout", "unmapped": "unmapped"}
    for kernel in direct:
        row = imported[kernel.samples.name]
        assert (row["category"], row["layers"]) == (expected_category[kernel.category],
                                                    list(kernel.layers) if kernel.category == "layer" else [])
    total = sum(k.stats.median_us for k in direct)
    direct_share = 1.0 - sum(k.stats.median_us for k in direct if k.category == "unmapped") / total
    fusion_section = run["import"]["fusion_map"]
    # the first level from "all" down whose graph names every kernel: the profiled one, or one above it that
    # builds the same graph (the transformer block has nothing for the NCHWc transformer of "all")
    assert LEVELS.index(fusion_section["opt_level"]) <= LEVELS.index(level)
    assert fusion_section["kernels_named"] == fusion_section["kernels"]
    assert fusion_section["mapped_share"] >= 0.99 and fusion_section["mapped_share"] == pytest.approx(direct_share)
    assert run["measurement"]["unmapped_kernels"] == [] and run["import"]["unmatched"] == []
    printed = " ".join(capsys.readouterr().out.split())
    assert (f"placed through its optimized graph (re-created here at level {fusion_section['opt_level']}: names "
            f"{fusion_section['kernels']} of {fusion_section['kernels']} kernels)") in printed
    # a layer that is its kernel's only layer has that kernel's time, in both
    layers = layer_results(graph, direct, {})
    alone = [k for k in direct if k.category == "layer" and len(k.layers) == 1
             and layers[k.layers[0]].kernels == (k.samples.name,)]
    assert alone
    by_id = {layer["id"]: layer for layer in run["layers"]}
    for kernel in alone:
        stats = layers[kernel.layers[0]].stats
        assert stats is not None
        assert by_id[kernel.layers[0]]["measured"]["median_us"] == pytest.approx(stats.median_us, abs=1e-3)
        assert by_id[kernel.layers[0]]["measured"]["kernel"] == kernel.samples.name
    if model == "conv_gelu_conv":  # the GELU fused on blocked tensors is placed on the five GELU ops
        assert imported["Gelu"]["layers"] == ["/act/Div", "/act/Erf", "/act/Add", "/act/Mul", "/act/Mul_1"]
    if model == "yolov5s":  # SiLU fused as QuickGelu: named after the Mul, placed on Sigmoid + Mul
        quick = [k for k in direct if k.samples.name.endswith("/QuickGeluFusion/")]
        assert len(quick) == 57 and all(len(imported[k.samples.name]["layers"]) == 2 for k in quick)
