"""A model ONNX Runtime refuses to load (one the ONNX checker passes) is one line on stderr, exit 2, holding the
runtime's whole reason on one line (:func:`layerscope.errors.condensed`: its source locations dropped), whether
``profile`` or ``bench`` meets it creating the measured session or observing shapes that were not resolved
statically. Models built with ``onnx.helper``; each command a child process."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from tests._cli_subprocess import run_cli

F32 = TensorProto.FLOAT


def _save(path: Path, node: onnx.NodeProto, inputs: list[onnx.ValueInfoProto], output: onnx.ValueInfoProto,
          domains: tuple[str, ...] = ()) -> Path:
    graph = helper.make_graph([node], "g", inputs, [output])
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in domains)]
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)  # saved unchecked
    return path


def _int64_fused_matmul(path: Path, output_dims: list[int] | None) -> Path:
    """``com.microsoft.FusedMatMul`` fed an int64 tensor: a type mismatch ONNX's checker cannot see (it has no schema
    of the domain) and ONNX Runtime refuses; without declared output dims the shapes must be observed."""
    node = helper.make_node("FusedMatMul", ["x", "y"], ["z"], name="fm", domain="com.microsoft")
    return _save(path, node, [helper.make_tensor_value_info("x", F32, [4, 4]),
                              helper.make_tensor_value_info("y", TensorProto.INT64, [4, 4])],
                 helper.make_tensor_value_info("z", F32, output_dims), ("com.microsoft",))


TYPE_REASON = ("[ONNXRuntimeError] : 10 : INVALID_GRAPH : {load}This is an invalid model. Type Error: Type "
               "'tensor(int64)' of input parameter (y) of operator (FusedMatMul) in node (fm) is invalid.")


@pytest.mark.parametrize("command", ["profile", "bench"])
def test_a_type_mismatch_is_one_line_with_the_runtime_reason(command: str, tmp_path: Path) -> None:
    model = _int64_fused_matmul(tmp_path / "fm.onnx", [4, 4])
    result = run_cli([command, model, "--runs", "2", "--warmup", "0"])
    assert result.returncode == 2, result.describe()
    reason = TYPE_REASON.format(load=f"Load model from {model} failed:")
    assert result.err_lines == [f"layerscope: error: fm.onnx: ONNX Runtime cannot load the model: {reason}"]


def test_a_type_mismatch_met_observing_shapes_is_one_line_with_the_runtime_reason(tmp_path: Path) -> None:
    model = _int64_fused_matmul(tmp_path / "fm.onnx", None)
    result = run_cli(["profile", model, "--runs", "2", "--warmup", "0"])
    assert result.returncode == 2, result.describe()
    assert result.err_lines == ["layerscope: error: shapes not resolved statically, and ONNX Runtime could not load "
                                f"the model to observe them: {TYPE_REASON.format(load='')}"]


def test_a_kernel_the_runtime_refuses_keeps_its_reason_without_the_source_place(tmp_path: Path) -> None:
    """LRN of an even size: ONNX Runtime's kernel refuses it as the session is made, its reason prefixed by a
    place in its own sources (``/onnxruntime_src/.../lrn.h:23``) and ending in a line break."""
    node = helper.make_node("LRN", ["x"], ["z"], name="lrn", size=2)
    model = _save(tmp_path / "lrn.onnx", node, [helper.make_tensor_value_info("x", F32, [1, 3, 4, 4])],
                  helper.make_tensor_value_info("z", F32, [1, 3, 4, 4]))
    result = run_cli(["bench", model, "--runs", "2", "--warmup", "0"])
    assert result.returncode == 2, result.describe()
    (line,) = result.err_lines
    assert line.startswith("layerscope: error: lrn.onnx: ONNX Runtime cannot load the model: [ONNXRuntimeError] : 1 "
                           ": FAIL : Exception during initialization: ")
    assert line.endswith("size_ % 2 == 1 was false.") and "onnxruntime_src" not in line and "lrn.h" not in line
