"""``profile --format trace`` carries the hb_trace layout; DDR against the part's nominal and effective bandwidth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.errors import ProfileError
from layerscope.report.exec_trace import execution_trace, memory_peak_bytes, placement_on_target
from layerscope.report.timeline_terminal import ddr_rate_text
from layerscope.report.views.timeline import temporal
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run, load
from layerscope.targets import load_profile


def _with_fallback(write_model: ModelWriter) -> Path:
    """conv -> resize x3 (not a power of 2: the S100's CPU runs it) -> reshape (zero-copy) -> relu."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Resize", ["c", "", "scales"], ["u"], mode="nearest", name="resize"),
             helper.make_node("Reshape", ["u", "shape"], ["f"], name="flat"),
             helper.make_node("Relu", ["f"], ["y"], name="relu")]
    consts = {"w": np.full((4, 3, 3, 3), 0.1, np.float32), "scales": np.array([1, 1, 3, 3], np.float32),
              "shape": np.array([1, -1], np.int64)}
    return write_model(nodes, [("x", F32, [1, 3, 16, 16])], [("y", F32, None)], consts)


def test_trace_on_an_npu_target_has_cores_stages_cycles_and_one_statistic(
        write_model: ModelWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    args = ["profile", str(_with_fallback(write_model)), "-t", "rdk-s100", "--timeline", "--runs", "3",
            "--warmup", "1", "-o", str(out), "--format", "trace"]
    assert main(args) == 0
    trace = json.loads(capsys.readouterr().out)
    run = load_document(out)
    layers = {e["layer_name"]: e for e in trace["execution_trace"]}
    assert [e["layer_name"] for e in trace["execution_trace"]] == ["conv", "resize", "flat", "relu"]
    assert layers["resize"]["core_id"] == -1  # the CPU fallback, as hb_trace marks it
    assert [layers[n]["core_id"] for n in ("conv", "flat", "relu")] == [0, 0, 0]
    # BPU subgraph, CPU, BPU again: the reshape (zero-copy) stays in the CPU's stage, relu starts the third
    assert [layers[n]["pipeline_stage"] for n in ("conv", "resize", "flat", "relu")] == [0, 1, 1, 2]
    conv = layers["conv"]["timing"]
    assert conv["est_cycles"] == round(conv["est_us"] * 1e9 / 1e6)  # the S100 profile's 1 GHz clock
    assert "cycles" not in conv  # measured on this machine, not on the S100: no measured cycles
    summary = trace["summary"]
    assert summary["total_time_us"] == run["latency"]["p50_us"]
    assert summary["fps"] == pytest.approx(1e6 / summary["total_time_us"], abs=1e-3)
    assert "median" in summary["statistic"]
    assert summary["utilization_pct"] == round(100 * run["measurement"]["coverage"], 2)
    assert summary["total_est_cycles"] == round(run["summary"]["est_latency_us"] * 1000)
    assert set(summary["est_utilization_pct"]) >= {"TAE", "A78AE-x6"}
    # fp32: x 3,072 B to conv; c 4,096 B to resize; u 4x48x48x4 = 36,864 B; f is a view of u (0 B written),
    # so u lives until relu reads f; y 36,864 B. Steps: conv 7,168; resize 40,960; flat 36,864; relu 73,728.
    assert summary["memory_peak_bytes"] == 73_728 + run["summary"]["weight_bytes"]
    assert conv["start_time"] == conv["start_us"] and conv["end_time"] == conv["end_us"]


def test_trace_on_the_host_counts_measured_cycles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["profile", str(zoo("squeezenet")), "--runs", "2", "--warmup", "1", "-o", str(out), "--format",
                 "trace", "--level", "full"]) == 0
    trace = json.loads(capsys.readouterr().out)
    clock = load_document(out)["target"]["clock_hz"]
    first = trace["execution_trace"][0]["timing"]
    assert first["cycles"] == round(first["total_us"] * clock / 1e6) > 0
    assert trace["summary"]["total_cycles"] == round(trace["summary"]["total_time_us"] * clock / 1e6)
    assert {e["core_id"] for e in trace["execution_trace"]} == {0}  # one device, no fallback


def _run(kind: str, layers: list[tuple[str, str, str | None, list[str], list[str], int]],
         timeline: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run of (id, unit, fallback reason, inputs, outputs, bytes written) layers on a ``kind`` target."""
    run: dict[str, Any] = {
        "model": {"inputs": [{"name": "x", "shape": [1, 250], "dtype": "float32"}],
                  "outputs": [{"name": "y", "shape": [1], "dtype": "float32"}]},
        "target": {"name": "t", "kind": kind},
        "summary": {"weight_bytes": 10},
        "layers": [{"id": i, "inputs": ins, "outputs": outs, "bytes_written": size,
                    "estimate": {"unit": unit, "fallback_reason": reason}}
                   for i, unit, reason, ins, outs, size in layers],
    }
    if timeline is not None:
        run["timeline"] = timeline
    return run


def test_placement_and_memory_peak_by_hand() -> None:
    run = _run("npu", [("a", "TAE", None, ["x"], ["a"], 100), ("b", "-", None, ["a"], ["b"], 100),
                       ("c", "cpu", "NMS", ["b"], ["c"], 50), ("d", "VAE", None, ["c", "a"], ["y"], 20)],
               timeline={"layers": [{"id": "a", "core": 1}, {"id": "d", "core": 0}]})
    cores, stages = placement_on_target(as_run(run))
    assert cores == {"a": 1, "b": 0, "c": -1, "d": 0}
    assert stages == {"a": 0, "b": 0, "c": 1, "d": 2}
    # x (1,000 B) alive at step 0; a (100) from 0 to 3 (d reads it); b (100) 1..2; c (50) 2..3; y (20) 3..end.
    # Steps: 0: 1,100; 1: 200; 2: 250; 3: 170; end: 20 -> peak 1,100, plus 10 B of weights.
    assert memory_peak_bytes(as_run(run)) == 1_110


def t_peak_within(timeline: dict[str, Any], effective_bytes_per_s: float) -> bool:
    """No interval of the frame moves bytes faster than the effective rate."""
    return bool(timeline["temporal"]["ddr_peak_mb_per_s"] * 1e6 <= effective_bytes_per_s * (1 + 1e-6))


def test_ddr_against_the_nominal_and_the_effective_bandwidth(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(zoo("resnet50")), "-t", "rdk-s100", "--timeline", "--top", "0",
                 "-o", str(out)]) == 0
    run = load_document(out)
    timeline = run["timeline"]
    assert timeline["ddr_nominal_bytes_per_s"] == 76.8e9  # 6400 MT/s x 96 bit / 8
    s100 = load_profile("rdk-s100")
    # the profile's efficiencies (calibrated on published board latencies): the fastest rate bytes move at, weights
    # (weight_ddr_efficiency) or activations
    effective = 76.8e9 * max(s100.ddr_efficiency, s100.weight_ddr_efficiency or 0.0)
    assert timeline["ddr_effective_bytes_per_s"] == pytest.approx(effective)
    assert t_peak_within(timeline, effective)
    t = timeline["temporal"]
    totals = [a + b for a, b in zip(t["ddr_load_mb_per_s"], t["ddr_store_mb_per_s"], strict=True)]
    assert t["ddr_nominal_utilization"] == pytest.approx([v / 76_800 for v in totals], abs=1e-5)
    assert t["ddr_peak_mb_per_s"] == pytest.approx(max(totals), abs=1e-3)
    # mean rate over the frame = bytes per frame / frame time
    s = timeline["summary"]
    assert t["ddr_mean_mb_per_s"] == pytest.approx(s["ddr_bytes"] / s["latency_us"], rel=1e-3)
    typed = as_run(run).timeline
    assert typed is not None
    text = ddr_rate_text(typed) or ""
    assert f"of the profile's effective {effective / 1e9:.4g} GB/s" in text  # 39.2 GB/s: four significant digits
    assert "of the part's nominal 76.8 GB/s" in text
    series = temporal(as_run(run))
    assert series is not None and series.ddr_nominal_bytes_per_s == 76.8e9
    assert len(series.ddr_nominal_utilization) == t["intervals"]
    assert run["target"]["ddr_nominal_bytes_per_s"] == 76.8e9


def test_a_profile_without_a_vendor_figure_has_no_nominal_series(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "rdk-x5", "--timeline", "--top", "0",
                 "-o", str(out)]) == 0
    timeline = load(out).timeline
    assert timeline is not None and timeline.temporal is not None
    assert timeline.ddr_nominal_bytes_per_s is None and timeline.temporal.ddr_nominal_utilization is None
    assert "nominal" not in (ddr_rate_text(timeline) or "nominal")


def test_the_nominal_figure_needs_its_source(tmp_path: Path) -> None:
    s100 = load_profile("rdk-s100")
    assert s100.ddr_nominal_bytes_per_s == 76.8e9 and "76800 MB/s" in (s100.source_for("ddr_nominal_bytes_per_s") or "")
    text = (Path(s100.source_path).read_text(encoding="utf-8")
            .replace('"ddr_nominal_bytes_per_s" = ', '"unused_note" = '))
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match=r"ddr_nominal_bytes_per_s needs a sources\.ddr_nominal_bytes_per_s"):
        load_profile(str(path))


def test_levels_choose_the_fields(tmp_path: Path) -> None:
    run = _run("npu", [("a", "TAE", None, ["x"], ["y"], 4)])
    run.update({"measurement": {"backend": "onnxruntime", "backend_version": "1", "provider": "cpu", "threads": 1,
                                "opt_level": "all", "machine": {}, "coverage": 0.5, "median_run": []},
                "latency": {"p50_us": 250.0, "samples": 4}})
    run["model"].update({"name": "m", "path": None, "sha256": "s"})
    run["layers"][0].update({"op_type": "Conv", "bytes_read_act": 1, "bytes_read_weight": 2,
                             "measured": {"median_us": 200.0}})
    pipeline = execution_trace(as_run(run), "pipeline")
    assert set(pipeline["execution_trace"][0]) == {"layer_id", "layer_name", "op_type", "timing", "core_id",
                                                   "pipeline_stage", "unit"}
    assert pipeline["summary"]["fps"] == 4000.0 and pipeline["summary"]["utilization_pct"] == 50.0
    with pytest.raises(ValueError, match="basic, full, memory, pipeline"):
        execution_trace(as_run(run), "cycles")
