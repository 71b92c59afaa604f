"""Folding ``If`` layers to the branch the inputs take, and OpenVINO measuring a model with ``If`` layers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.fold_if import fold_ifs


def _branch(name: str, op: str, constant: str) -> onnx.GraphProto:
    """``x op constant`` then a Relu, reading ``x`` from the outer graph (as exporters write branches)."""
    nodes = [helper.make_node(op, ["x", constant], [f"{name}_t"], name=f"{name}_op"),
             helper.make_node("Relu", [f"{name}_t"], [f"{name}_out"], name=f"{name}_relu")]
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT,
                                                                              [1, 8])])


def _model(tmp_path: Path) -> Path:
    """A voice-activity model's shape: ``sr`` (a scalar input) picks the branch, ``Equal(sr, 16000)``."""
    nodes = [helper.make_node("Equal", ["sr", "rate"], ["is16k"], name="equal"),
             helper.make_node("If", ["is16k"], ["h"], name="choose", then_branch=_branch("then", "Add", "one"),
                              else_branch=_branch("else", "Mul", "two")),
             helper.make_node("Sigmoid", ["h"], ["y"], name="out")]
    inits = [numpy_helper.from_array(np.array(16000, np.int64), "rate"),
             numpy_helper.from_array(np.ones((1, 8), np.float32), "one"),
             numpy_helper.from_array(np.full((1, 8), 2.0, np.float32), "two")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
                     helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    path = tmp_path / "vad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


@pytest.mark.parametrize(("rate", "branch"), [(16000, "then_branch"), (8000, "else_branch")])
def test_an_if_folds_to_the_branch_its_inputs_take_and_computes_the_same(tmp_path: Path, rate: int,
                                                                          branch: str) -> None:
    path = _model(tmp_path)
    model = onnx.load(path)
    feeds: dict[str, np.ndarray] = {"x": np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8),
                                    "sr": np.array(rate, np.int64)}
    folded, folds = fold_ifs(model, feeds)
    assert [(f.layer_id, f.branch, f.nodes) for f in folds] == [("choose", branch, 2)]
    assert "If" not in {n.op_type for n in folded.graph.node}
    onnx.checker.check_model(folded)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ort.InferenceSession(folded.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(got, expected)
    # the inlined nodes carry the ids layerscope gives the subgraph's layers
    prefix = "else" if rate == 8000 else "then"
    assert {f"choose/{branch}/{prefix}_op", f"choose/{branch}/{prefix}_relu"} <= {n.name for n in folded.graph.node}


def test_a_model_without_an_if_is_left_as_it_is(tmp_path: Path) -> None:
    model = onnx.load(_model(tmp_path))
    del model.graph.node[:]
    model.graph.node.append(helper.make_node("Relu", ["x"], ["y"], name="r"))
    folded, folds = fold_ifs(model, {"x": np.zeros((1, 8), np.float32), "sr": np.array(1, np.int64)})
    assert folds == [] and folded is model


def test_openvino_measures_the_branch_layers_of_a_model_with_an_if(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    from layerscope.runtimes.openvino.profile import OpenVinoBackend

    graph = load_model(_model(tmp_path))
    feeds = make_inputs(graph, ())
    assert feeds["sr"].shape == ()  # a scalar input stays a scalar in OpenVINO's feed
    measurement = OpenVinoBackend().profile(graph, feeds, SessionConfig(provider="cpu", threads=1), runs=2, warmup=1)
    taken = "then_branch" if int(feeds["sr"]) == 16000 else "else_branch"
    assert "1 If layer(s) folded" in measurement.machine["openvino_folded_if"]
    assert f"choose -> {taken}" in measurement.machine["openvino_folded_if"]
    branch_layers = {n.id for n in graph.layers if n.parent == "choose"}
    assert branch_layers and all(measurement.layers[lid].status in ("measured", "fused") for lid in branch_layers)
