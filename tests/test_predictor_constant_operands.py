"""The element-wise space's float Add and Mul of a constant operand (one value, or one per channel): the kernels
models add a scalar weight onto a feature map with, which the space held only as a second full tensor."""

from __future__ import annotations

from pathlib import Path

import pytest

from _predictors import feature_map, kernel_graph
from layerscope.measure import kernels as kernel_space
from layerscope.measure.kernels import FLOAT_OPERANDS, elementwise_kernel, family_configs
from layerscope.measure.session import SessionConfig
from layerscope.runtimes.onnxruntime.kernels import kernel_groups


@pytest.mark.parametrize(("operand", "dims"), [("scalar", []), ("channel", [1, 240, 1, 1])])
def test_a_constant_operand_is_a_weight_the_kernel_reads_once(operand: str, dims: list[int], tmp_path: Path) -> None:
    kernel = elementwise_kernel(61_440, "Add", True, "fp32", operand)
    assert kernel.label == f"elementwise n=61440 Add operand={operand}"
    graph = kernel_graph(kernel, tmp_path)
    (add,) = graph.layers
    assert [graph.tensor(i).shape for i in add.inputs] == [(1, 240, 16, 16), tuple(dims)]
    assert [t.name for t in graph.inputs] == ["x"] and add.inputs[1] in graph.constants
    # one ONNX Runtime kernel, whose features read the map once and the constant as weight bytes
    (group,) = kernel_groups(graph, SessionConfig(threads=1))
    assert set(group[1]) == {add.id}
    tensor = feature_map(kernel_graph(elementwise_kernel(61_440, "Add", True), tmp_path))
    constant = feature_map(graph)
    assert constant["log_act_read_bytes"] < tensor["log_act_read_bytes"]
    assert constant["log_weight_bytes"] > 0 == tensor["log_weight_bytes"]


def test_a_unary_op_has_no_operand_to_make_constant() -> None:
    with pytest.raises(ValueError, match="a binary op's"):
        elementwise_kernel(1024, "Relu", False, "fp32", "scalar")
    with pytest.raises(ValueError, match="choose from"):
        elementwise_kernel(1024, "Add", True, "fp32", "row")


def test_the_constant_operands_join_the_order_without_moving_earlier_configurations(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with_them = family_configs("elementwise")
    added = [c for c in with_them if any(k == "_4" and v in FLOAT_OPERANDS[1:] for k, v in c.params)]
    assert len(added) == 10 * 2 * 2  # ten counts, Add and Mul, scalar and channel
    monkeypatch.setattr(kernel_space, "_added_configs_7", lambda family: [])
    before = family_configs("elementwise")
    assert [c for c in with_them if c not in added] == before
    # spread from the start: the first quarter holds about a quarter of them
    first = [c for c in with_them[: len(with_them) // 4] if c in added]
    assert abs(len(first) - len(added) / 4) <= 4
