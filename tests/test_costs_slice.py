"""A Slice reads what it keeps: the cost of ONNX Slice against bytes worked out by hand (graphs built with
onnx.helper, loaded with the real loader)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from layerscope.costs import cost_graph
from layerscope.model import load_model

SHAPE = (1, 64, 80, 80)
INPUT_BYTES = 64 * 80 * 80 * 4  # 1,638,400


def _slice_cost(tmp_path: Path, operands: dict[str, list[int]], *, constant: bool = True) -> tuple[int, int]:
    """(activation bytes read, bytes written) of one Slice of a float32 1x64x80x80 input."""
    names = ["x", *(f"{k}" for k in operands)]
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.int64), k) for k, v in operands.items()]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)]
    if not constant:  # the steps computed at run time: a graph input
        steps = inits.pop()
        inputs.append(helper.make_tensor_value_info(steps.name, TensorProto.INT64, [len(operands["steps"])]))
    graph = helper.make_graph([helper.make_node("Slice", names, ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "slice.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    (cost,) = cost_graph(load_model(path))
    return cost.bytes_read_act, cost.bytes_written


def test_a_channel_chunk_reads_only_its_half(tmp_path: Path) -> None:
    read, written = _slice_cost(tmp_path, {"starts": [0], "ends": [32], "axes": [1], "steps": [1]})
    assert written == 32 * 80 * 80 * 4 == INPUT_BYTES // 2
    assert read == written  # not the 1,638,400 bytes of the whole input


def test_a_step_along_the_innermost_axis_touches_the_lines_between(tmp_path: Path) -> None:
    # YOLOv5's Focus: x[..., ::2, ::2] keeps a quarter; every line of the kept rows is touched (half the input)
    read, written = _slice_cost(tmp_path, {"starts": [0, 0], "ends": [80, 80], "axes": [2, 3], "steps": [2, 2]})
    assert written == INPUT_BYTES // 4
    assert read == INPUT_BYTES // 2
    # a step of 32 floats spans two 64-byte lines: one line (16 floats) read per element kept, not 32
    read, written = _slice_cost(tmp_path, {"starts": [0], "ends": [80], "axes": [-1], "steps": [32]})
    assert written == 64 * 80 * 3 * 4
    assert read == written * 16


def test_steps_known_only_at_run_time_count_the_whole_input(tmp_path: Path) -> None:
    read, _ = _slice_cost(tmp_path, {"starts": [0], "ends": [32], "axes": [1], "steps": [1]}, constant=False)
    assert read == INPUT_BYTES + 8  # the whole input, and the one int64 step read beside it
