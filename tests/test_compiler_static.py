"""``benchmarks/data/compiler_static.csv`` (the RDK X5 compile logs' static estimates, the zoo's throughputs) and
``benchmarks/compiler_check.py``'s helpers. The spot values were read by hand from the cited logs and READMEs."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from types import ModuleType

import pytest
from onnx import TensorProto, helper

from _scripts import load_script
from layerscope.model import load_model

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "compiler_static.csv"
BOARD = ROOT / "benchmarks" / "data" / "board_latency.csv"
SCRIPT = ROOT / "benchmarks" / "compiler_check.py"
COLUMNS = ["board", "model", "sample", "hbdk_latency_us", "hbdk_ddr_bytes", "threads1_fps", "threads2_fps",
           "output_f32_bytes", "source"]
SOURCE = re.compile(r"^D-Robotics/rdk_model_zoo@[0-9a-f]{40}:samples/vision/[^#;]+(#[^;]+)?"
                    r"(; D-Robotics/rdk_model_zoo@[0-9a-f]{40}:samples/vision/[^#;]+(#[^;]+)?)?$")


def _script() -> ModuleType:
    return load_script("compiler_check", SCRIPT)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if path == DATA:
            assert reader.fieldnames == COLUMNS
        return list(reader)


def test_every_row_is_a_compile_log_line_of_a_published_board_row() -> None:
    board = {(r["board"], r["model"]): r for r in _rows(BOARD)}
    rows = _rows(DATA)
    assert len(rows) == 15
    for row in rows:
        where = row["model"]
        assert SOURCE.match(row["source"]), where
        published = board[(row["board"], row["model"])]
        assert row["sample"] == published["sample"], where
        latency_us = float(row["hbdk_latency_us"])
        assert int(row["hbdk_ddr_bytes"]) > 1_000_000, where
        # the board's single-thread time holds the compiled BPU model and what runs outside it
        assert float(published["latency_ms"]) * 1e3 > latency_us, where
        if row["threads2_fps"]:
            # two threads keep the BPU busy: its time per frame is the compiler's latency, within 10%
            assert abs(1e6 / float(row["threads2_fps"]) / latency_us - 1) < 0.10, where
            # and one thread is slower by what runs outside the BPU
            assert float(row["threads1_fps"]) < float(row["threads2_fps"]), where


def test_spot_values_read_from_the_logs() -> None:
    rows = {r["model"]: r for r in _rows(DATA)}
    assert rows["YOLO12n"]["hbdk_latency_us"] == "35638.8"
    assert rows["YOLO12n"]["hbdk_ddr_bytes"] == "149531184"
    assert rows["YOLO11n"]["hbdk_ddr_bytes"] == "14326256"
    assert rows["YOLOv8n-CLS"]["hbdk_latency_us"] == "495.4"
    assert rows["YOLOv5n_v7.0"]["hbdk_latency_us"] == "3461.4"
    assert (rows["YOLOv8n"]["threads1_fps"], rows["YOLOv8n"]["threads2_fps"]) == ("141.9", "247.2")
    assert rows["YOLOv8n"]["output_f32_bytes"] == "4838400"  # 80x80, 40x40, 20x20 x (64 + 80) float32


def test_the_gap_line_recovers_a_known_line_and_needs_two_sizes() -> None:
    check = _script()
    a, b = check.gap_line([0.0, 4.0, 8.0], [0.5, 2.5, 4.5])
    assert a == pytest.approx(0.5)
    assert b == pytest.approx(0.5)
    with pytest.raises(ValueError, match="two distinct"):
        check.gap_line([4.0, 4.0], [1.0, 2.0])


def test_float_output_bytes_counts_every_output_as_float32(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 8, 4, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 8, 2, 2])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("MaxPool", ["a"], ["b"], kernel_shape=[2, 2], strides=[2, 2])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [a, b]),
                              opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    # (8*4*4 + 8*2*2) elements x 4 bytes
    assert _script().float_output_bytes(load_model(path)) == (128 + 32) * 4
