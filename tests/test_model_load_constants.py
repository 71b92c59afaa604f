"""Constant nodes are folded by reading their attribute (no reference evaluator to set up), to the very value,
dtype and shape ONNX's reference implementation gives; and a big model's load passes: weights are given to shape
inference as typed inputs, a graph stored in order is not re-sorted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from layerscope.model import load_model
from layerscope.model.load import _constant_value
from layerscope.model.validate import in_order, topological

CASES: dict[str, dict[str, Any]] = {
    "tensor-int64-2d": {"value": numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3))},
    "tensor-float16-scalar": {"value": numpy_helper.from_array(np.float16(2.0))},
    "value_float": {"value_float": 1.5},
    "value_floats": {"value_floats": [1.0, 2.5]},
    "value_int": {"value_int": 3},
    "value_ints": {"value_ints": [1, 2, 3]},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_constant_is_read_as_the_reference_evaluator_computes_it(case: str) -> None:
    node = helper.make_node("Constant", [], ["c"], **CASES[case])
    model = helper.make_model(helper.make_graph([node], "g", [], [helper.make_tensor_value_info("c", 0, None)]),
                              opset_imports=[helper.make_opsetid("", 17)])
    expected = np.asarray(ReferenceEvaluator(model).run(None, {})[0])
    got = _constant_value(node)
    assert got is not None
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    assert np.array_equal(got, expected)


def test_a_string_constant_is_left_to_the_reference_evaluator() -> None:
    assert _constant_value(helper.make_node("Constant", [], ["c"], value_string="abc")) is None


def test_constants_fold_into_a_reshape_target_and_a_weight(tmp_path: Path) -> None:
    """y = Reshape(Conv(x, w), shape): ``shape`` and ``w`` come from Constant nodes; both fold, shapes resolve."""
    w = np.ones((4, 3, 3, 3), np.float32)
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w), name="cw"),
             helper.make_node("Constant", [], ["shape"], value_ints=[1, -1], name="cs"),
             helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Reshape", ["c", "shape"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    loaded = load_model(path)
    assert [n.op_type for n in loaded.layers] == ["Conv", "Reshape"]
    assert sorted(n.id for n in loaded.folded) == ["cs", "cw"]
    assert loaded.tensor("y") is not None and loaded.tensor("y").shape == (1, 4 * 8 * 8)
    assert loaded.tensor("w").shape == (4, 3, 3, 3) and graph_value(loaded, "shape") == [1, -1]


def graph_value(graph: Any, name: str) -> list[int]:
    value = graph.value(name)
    assert value is not None
    return [int(v) for v in value]


def test_a_graph_in_order_is_returned_as_it_is_and_one_out_of_order_is_sorted() -> None:
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"r{i}") for i in range(5)]
    assert in_order(nodes, {"t0"}) and topological(nodes, {"t0"}) is nodes
    reverse = nodes[::-1]
    assert not in_order(reverse, {"t0"})
    assert [n.name for n in topological(reverse, {"t0"})] == [f"r{i}" for i in range(5)]
    reads_itself = [helper.make_node("Add", ["t0", "u"], ["u"], name="loop")]
    assert not in_order(reads_itself, {"t0"})


def test_an_omitted_optional_input_keeps_a_graph_in_order() -> None:
    nodes = [helper.make_node("Clip", ["t0", "", "m"], ["t1"]), helper.make_node("Relu", ["t1"], ["t2"])]
    assert in_order(nodes, {"t0", "m"})
    assert not in_order(nodes, {"t0"})  # "m" is read before anything writes it


@pytest.mark.parametrize(("outputs", "inputs", "initializers", "message"), [
    ([["y"], ["y"]], ["x"], [], "graph.node[1] (Relu 'n1') writes 'y', which another node already writes"),
    ([["y"], ["w"]], ["x"], ["w"], "graph.node[1] (Relu 'n1') writes 'w', which is a graph input or initializer"),
    ([["y"], ["x"]], ["x"], [], "graph.node[1] (Relu 'n1') writes 'x', which is a graph input or initializer"),
    ([["y"], ["z"]], ["x", "x"], [], "graph.input[1] repeats the name 'x'"),
    ([["y"], ["z"]], ["x"], ["w", "w"], "graph.initializer[1] repeats the name 'w'"),
    ([["y", ""], ["z", ""]], ["x"], [], None),  # omitted optional outputs are no names
])
def test_each_name_is_defined_once(outputs: list[list[str]], inputs: list[str], initializers: list[str],
                                   message: str | None) -> None:
    from layerscope.errors import ModelError
    from layerscope.model.validate import _check_unique_names, node_fields

    nodes = [helper.make_node("Relu", ["x"], outs, name=f"n{k}") for k, outs in enumerate(outputs)]
    weights = [numpy_helper.from_array(np.ones(1, np.float32), w) for w in initializers]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, [1]) for i in inputs],
                              [], initializer=weights)
    if message is None:
        _check_unique_names(graph, Path("m.onnx"), node_fields(graph.node))
        return
    with pytest.raises(ModelError, match="^" + re.escape(f"m.onnx: {message}")):
        _check_unique_names(graph, Path("m.onnx"), node_fields(graph.node))


def test_a_refusal_names_the_tensor_whose_data_does_not_fit_its_dims(tmp_path: Path) -> None:
    """Initializers come first, then the nodes' tensor attributes: each named where it is."""
    from layerscope.errors import ModelError
    from layerscope.model.validate import validate_model

    good = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    short = numpy_helper.from_array(np.ones((2, 2), np.float32), "v")
    short.raw_data = short.raw_data[:8]
    nodes = [helper.make_node("Constant", [], ["a"], name="ca", value=good),
             helper.make_node("Constant", [], ["b"], name="cb", value=short),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                              initializer=[good])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    with pytest.raises(ModelError, match="^" + re.escape(
            f"{path}: graph.node[1] (Constant 'cb').value: raw_data holds 8 bytes, its dims [2, 2] need 16")):
        validate_model(model, path, tmp_path)
    model.graph.initializer.append(short)
    with pytest.raises(ModelError, match="^" + re.escape(
            f"{path}: graph.initializer[1] 'v': raw_data holds 8 bytes, its dims [2, 2] need 16")):
        validate_model(model, path, tmp_path)
