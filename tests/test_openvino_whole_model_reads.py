"""Every place that hands a whole model to OpenVINO reads it as ``profile`` does: top-level ``If`` layers folded to
the branch the inputs take, and a model OpenVINO cannot read refused with one line (``ModelError``, exit 2), never an
internal error. The cases are built with ``onnx.helper``: an ``If`` whose branches give outputs of different ranks,
chosen by a sample-rate input (as voice-activity detectors such as Silero VAD export), which OpenVINO's ONNX
frontend cannot convert as it is (the ``Conv`` after it has no static rank), and an ``ai.onnx.ml`` model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from layerscope.errors import ModelError
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model

pytest.importorskip("openvino")


def _if_on_sample_rate(path: Path) -> Path:
    """x [1, 1, T] -> Unsqueeze -> If (sr == 16000: Squeeze back to rank 3; else: rank 4 as it is) -> 1-D Conv."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    then_branch = helper.make_graph([helper.make_node("Squeeze", ["u", "axes"], ["squeezed"])], "then", [],
                                    [helper.make_tensor_value_info("squeezed", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", ["u"], ["same"])], "else", [],
                                    [helper.make_tensor_value_info("same", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("Equal", ["sr", "rate"], ["is_16k"], name="is_16k"),
             helper.make_node("If", ["is_16k"], ["b"], name="if", then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Conv", ["b", "w"], ["y"], name="conv", pads=[1, 1])]
    inits = [axes, helper.make_tensor("rate", TensorProto.INT64, [], [16000]),
             helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 3], np.ones(12, np.float32).tolist())]
    graph = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "T"]),
                                             helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, "T"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_kernel_groups_and_fused_groups_fold_the_if_openvino_cannot_read(tmp_path: Path) -> None:
    import openvino

    from layerscope.runtimes.openvino.compile import OpenVinoOptions
    from layerscope.runtimes.openvino.kernels import openvino_kernel_groups
    from layerscope.runtimes.openvino.runner import fused_groups

    path = _if_on_sample_rate(tmp_path / "vad.onnx")
    with pytest.raises(RuntimeError, match="rank"):  # the file as it is: what the readers were given before
        openvino.Core().read_model(str(path))
    graph = load_model(path, shapes={"x": (1, 1, 16)})
    ops = {n.id: n.op_type for n in graph.layers if not n.parent}
    groups = openvino_kernel_groups(graph, SessionConfig(threads=1))
    assert any(ops.get(i) == "Conv" for _, layers in groups for i in layers)
    assert isinstance(fused_groups(graph, SessionConfig(threads=1), OpenVinoOptions()), tuple)


def test_kernel_groups_refuse_a_model_openvino_cannot_read_with_one_line(tmp_path: Path) -> None:
    from layerscope.runtimes.openvino.kernels import openvino_kernel_groups

    node = helper.make_node("LinearRegressor", ["x"], ["y"], domain="ai.onnx.ml", coefficients=[1.0, 2.0, 3.0, 4.0],
                            intercepts=[0.5])
    graph = helper.make_graph([node], "ml", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    path = tmp_path / "ml.onnx"
    onnx.save(model, path)
    with pytest.raises(ModelError) as failure:
        openvino_kernel_groups(load_model(path), SessionConfig(threads=1))
    assert failure.value.exit_code == 2 and "\n" not in str(failure.value)
