"""Importers against the tools' real outputs: trtexec's whole export set (with the engine explorer's metadata
files) and an ONNX Runtime profile joined through the fusion map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layerscope.cli.main import main
from layerscope.importers import detect_format, parse_file
from layerscope.run import load_run

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
    run = load_run(out)
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
