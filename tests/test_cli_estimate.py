"""``layerscope estimate`` end to end: the run file, the table, and one-line errors with exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.run import SCHEMA_VERSION
from layerscope.runfile import load_document
from layerscope.targets import load_profile

RUN_KEYS = {"schema_version", "model", "target", "layers", "summary", "unknown_ops"}
LAYER_KEYS = {"id", "op_type", "macs", "flops", "bytes_read", "bytes_written", "weight_bytes", "unit", "estimate"}


def test_estimate_resnet50_on_s100_writes_the_run_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(zoo("resnet50")), "--target", "rdk-s100", "-o", str(out), "--top", "5"]) == 0
    run = load_document(out)
    assert run.keys() >= RUN_KEYS
    assert run["schema_version"] == SCHEMA_VERSION
    assert run["target"]["name"] == "rdk-s100"
    assert run["model"]["inputs"] == [{"name": "gpu_0/data_0", "shape": [1, 3, 224, 224], "dtype": "float32"}]
    assert len(run["model"]["sha256"]) == 64
    for layer in run["layers"]:
        assert layer.keys() >= LAYER_KEYS
        assert {"latency_us", "bound"} <= layer["estimate"].keys()
    # ResNet-50 at 224: 4.09 GMACs in Conv + Gemm (see test_costs_zoo for the independent count).
    assert abs(run["summary"]["tensor_macs"] - 4.089e9) / 4.089e9 < 0.02
    # the layers one after another, and the profile's per-inference part once: its task overhead and the hand-over
    # of the (1, 1000) float32 output at its output rate
    profile = load_profile("rdk-s100")
    assert profile.output_bytes_per_s
    task = profile.task_overhead_us + 1000 * 4 / profile.output_bytes_per_s * 1e6
    assert run["summary"]["est_task_overhead_us"] == pytest.approx(task, abs=0.05) and profile.task_overhead_us > 0
    total = sum(layer["estimate"]["latency_us"] for layer in run["layers"]) + task
    assert run["summary"]["est_latency_us"] == pytest.approx(total, abs=1e-3 * len(run["layers"]))
    assert run["summary"]["est_fps"] == pytest.approx(1e6 / total, rel=1e-3)
    printed = capsys.readouterr().out
    assert "per-inference task overhead" in printed
    assert "Top 5 of" in printed and "ESTIMATE" in printed and "rdk-s100" in printed


def test_same_inputs_give_identical_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert main(["estimate", str(zoo("squeezenet")), "-t", "rdk-x5", "-o", str(out), "--top", "0"]) == 0
    assert a.read_bytes() == b.read_bytes()


def _dynamic(write_model: ModelWriter) -> Path:
    node = helper.make_node("Conv", ["images", "w"], ["y"], pads=[1, 1, 1, 1])
    return write_model([node], [("images", F32, ["n", 3, "h", "w"])], [("y", F32, None)],
                       {"w": np.ones((4, 3, 3, 3), np.float32)})


def test_shape_option(write_model: ModelWriter, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    args = ["estimate", str(_dynamic(write_model)), "-t", "rdk-s100", "--shape", "images=1x3x32x32", "-o", str(out)]
    assert main(args) == 0
    # 4 out channels x 32 x 32 x (3 x 3 x 3) = 110,592 MACs
    assert json.loads(out.read_text())["summary"]["macs"] == 4 * 32 * 32 * 27


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "layerscope", *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "no such file"),
        ("text", "not a readable ONNX model"),
        ("truncated", "ONNX"),
        ("dynamic", "input dims not fixed: images[n,3,h,w]"),
        ("unknown_input", "unknown input(s) imgs"),
        ("unknown_target", "unknown target 'no-such-npu'"),
        ("bad_profile", "bad.toml"),
        ("bad_shape_arg", "--shape"),
    ],
)
def test_bad_input_is_one_line_exit_2_no_traceback(case: str, message: str, tmp_path: Path,
                                                     write_model: ModelWriter) -> None:
    model = str(zoo("squeezenet"))
    args: list[str]
    if case == "missing":
        args = ["estimate", str(tmp_path / "nope.onnx")]
    elif case == "text":
        (tmp_path / "t.onnx").write_text("hello\n" * 100)
        args = ["estimate", str(tmp_path / "t.onnx")]
    elif case == "truncated":
        (tmp_path / "c.onnx").write_bytes(zoo("squeezenet").read_bytes()[:5000])
        args = ["estimate", str(tmp_path / "c.onnx")]
    elif case == "dynamic":
        args = ["estimate", str(_dynamic(write_model)), "-t", "rdk-s100"]
    elif case == "unknown_input":
        args = ["estimate", str(_dynamic(write_model)), "-t", "rdk-s100", "--shape", "imgs=1x3x8x8"]
    elif case == "unknown_target":
        args = ["estimate", model, "-t", "no-such-npu"]
    elif case == "bad_profile":
        (tmp_path / "bad.toml").write_text("name = 'x'\n[[units]\n")
        args = ["estimate", model, "-t", str(tmp_path / "bad.toml")]
    else:
        args = ["estimate", model, "-t", "rdk-s100", "--shape", "data_0=1xax3"]
    result = _cli(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = _cli("--debug", "estimate", str(tmp_path / "nope.onnx"))
    assert result.returncode != 0
    assert "Traceback" in result.stderr


def test_hostile_layer_names_survive_the_terminal_and_the_run_file(write_model: ModelWriter, tmp_path: Path) -> None:
    hostile = "<img src=x onerror=alert(1)>[bold red]x[/]"
    node = helper.make_node("Relu", ["x"], ["y"], name=hostile)
    out = tmp_path / "run.json"
    result = _cli("estimate", str(write_model([node], [("x", F32, [1, 8])], [("y", F32, None)])),
                  "-t", "rdk-s100", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert hostile in result.stdout  # printed literally: rich markup in names is not interpreted
    assert load_document(out)["layers"][0]["id"] == hostile


def test_quantized_outputs_drops_the_float32_hand_over_and_says_so(write_model: ModelWriter, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # a 1x1 Conv to a 1x80x64x64 output: 1,310,720 B as float32, handed over at the X5's output_bytes_per_s
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="head", kernel_shape=[1, 1])
    model = write_model([node], [("x", F32, [1, 16, 64, 64])], [("y", F32, None)],
                        {"w": np.full((80, 16, 1, 1), 0.01, np.float32)})
    out = tmp_path / "run.json"
    assert main(["estimate", str(model), "-t", "rdk-x5", "-o", str(out), "--top", "0"]) == 0
    plain = load_document(out)
    handover = 1_310_720 / (load_profile("rdk-x5").output_bytes_per_s or 0.0) * 1e6
    assert plain["summary"]["est_output_handover_us"] == pytest.approx(handover, abs=1e-3)
    # the summary line wraps at the console's width: its words are compared, not its line breaks
    assert "of it the outputs' float32 hand-over" in " ".join(capsys.readouterr().out.split())
    # refreshing the same run with the option: the hand-over leaves the total, the run and the summary line say so
    assert main(["estimate", str(model), "-t", "rdk-x5", "-o", str(out), "--top", "0", "--quantized-outputs"]) == 0
    quantized = load_document(out)
    assert "est_output_handover_us" not in quantized["summary"]
    assert quantized["estimate_info"]["quantized_outputs"] is True
    assert quantized["summary"]["est_latency_us"] == pytest.approx(plain["summary"]["est_latency_us"] - handover,
                                                                   abs=2e-3)
    assert "outputs handed over quantized" in " ".join(capsys.readouterr().out.split())
