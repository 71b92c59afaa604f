"""Classes of alike layers: the costs and estimates computed once per class equal those computed layer by layer."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import ZOO_MODELS
from layerscope.costs import LayerCost, UnitKind, classify_costs, cost_graph, cost_layer
from layerscope.costs._common import is_tensor_only, tensor_signature
from layerscope.costs.registry import REGISTRY
from layerscope.errors import LayerscopeError
from layerscope.estimator import Bound, LayerEstimate, estimate_graph
from layerscope.estimator.roofline import _renamed
from layerscope.model import Graph, Node, TensorInfo, load_model
from layerscope.targets import load_profile


def _graph(nodes: list[Node], tensors: list[TensorInfo], constants: tuple[str, ...] = (),
           const_values: Mapping[str, Any] | None = None) -> Graph:
    infos = {t.name: t for t in tensors}
    return Graph(name="g", path="", sha256="", opset=17, inputs=(), outputs=(), layers=tuple(nodes), folded=(),
                 tensors=infos, constants={k: infos[k] for k in constants}, const_values=const_values or {})


def _node(node_id: str, op_type: str, inputs: tuple[str, ...], outputs: tuple[str, ...], executions: int = 1) -> Node:
    return Node(id=node_id, name=node_id, op_type=op_type, domain="", inputs=inputs, outputs=outputs,
                executions=executions)


def test_renamed_cost_equals_replace() -> None:
    cost = LayerCost("a", "Conv", UnitKind.TENSOR, 1, 2, 3, 4, 5, 6, "float16", known=False)
    assert cost.renamed("b") == dataclasses.replace(cost, layer_id="b")
    assert cost.renamed("b").__getstate__() == dataclasses.replace(cost, layer_id="b").__getstate__()


def test_renamed_estimate_equals_replace() -> None:
    est = LayerEstimate("a", "bpu", "int8", 1.0, 2.0, 3.0, 4.0, 5.0, Bound.COMPUTE, 6, 7, 2, "why")
    assert _renamed(est, "b") == dataclasses.replace(est, layer_id="b")
    assert _renamed(est, "b").__getstate__() == dataclasses.replace(est, layer_id="b").__getstate__()


class _Touched(AssertionError):
    """A tensor_only cost function read what it declared it does not."""


class _Trap(Mapping[str, Any]):
    """A mapping that fails the test on any read."""

    def __getitem__(self, key: str) -> Any:
        raise _Touched(key)

    def __iter__(self) -> Iterator[str]:
        raise _Touched("iter")

    def __len__(self) -> int:
        raise _Touched("len")


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 4), (2, 3, 4, 5)])
def test_tensor_only_cost_functions_read_no_attribute_and_no_constant_value(shape: tuple[int, ...]) -> None:
    # every input and output of ``shape``, the odd inputs constants: each function costs the node or gives up, and
    # never reads the node's attributes or a constant's value (a _Touched is no error a cost function may raise)
    names = tuple(f"i{k}" for k in range(9))
    tensors = [TensorInfo(name, shape, "float32") for name in (*names, "o0", "o1")]
    graph = dataclasses.replace(_graph([], tensors, constants=names[1::2]), const_values=_Trap())
    checked = 0
    for (domain, op_type), fn in REGISTRY.items():
        if is_tensor_only(fn):
            node = Node(id="n", name="n", op_type=op_type, domain=domain, inputs=names, outputs=("o0", "o1"),
                        attrs=_Trap())
            with contextlib.suppress(LayerscopeError, ArithmeticError, LookupError, TypeError, ValueError):
                fn(node, graph)
            checked += 1
    assert checked > 50


def test_layers_alike_share_a_class_and_others_do_not() -> None:
    x, y = TensorInfo("x", (1, 8), "float32"), TensorInfo("y", (1, 8), "float32")
    w = TensorInfo("w", (1, 8), "float32")
    outs = [TensorInfo(f"o{k}", (1, 8), "float32") for k in range(7)]
    wide = TensorInfo("wide", (1, 9), "float32")
    nodes = [
        _node("relu1", "Relu", ("x",), ("o0",)),
        _node("relu2", "Relu", ("y",), ("o1",)),  # alike relu1
        _node("relu3", "Relu", ("wide",), ("o2",)),  # another shape
        _node("add_act", "Add", ("x", "y"), ("o3",)),
        _node("add_const", "Add", ("x", "w"), ("o4",)),  # a constant input: another class
        _node("square", "Mul", ("x", "x"), ("o5",)),  # a repeated input: no class
        _node("pow", "Pow", ("x", "y"), ("o6",)),  # Pow reads a constant exponent's value: no class
        _node("relu4", "Relu", ("x",), ("o0",), executions=3),  # alike relu1, run 3 times
    ]
    graph = _graph(nodes, [x, y, w, wide, *outs], constants=("w",))
    classified = classify_costs(graph)
    relu1, relu2, relu3, add_act, add_const, square, power, relu4 = classified.classes
    assert relu1 == relu2 == relu4 is not None
    assert len({relu1, relu3, add_act, add_const}) == 4
    assert square is None and power is None
    assert classified.costs == tuple(cost_layer(node, graph) for node in nodes)
    assert classified.costs[7].flops == 3 * classified.costs[0].flops == 24
    assert tensor_signature(nodes[0], graph) == tensor_signature(nodes[1], graph)


def test_every_layer_whose_cost_function_fails_warns(caplog: pytest.LogCaptureFixture) -> None:
    x, y = TensorInfo("x", (1, 4, 8, 8), "float32"), TensorInfo("y", (1, 2, 8, 8), "float32")
    nodes = [_node(f"c{k}", "Conv", ("x", "w_missing"), ("y",)) for k in (1, 2)]
    graph = _graph(nodes, [x, y])
    with caplog.at_level(logging.WARNING, logger="layerscope.costs"):
        classified = classify_costs(graph)
    assert classified.classes == (None, None)
    assert [c.known for c in classified.costs] == [False, False]
    assert "'c1'" in caplog.text and "'c2'" in caplog.text


@pytest.mark.parametrize("path", ZOO_MODELS, ids=lambda p: p.stem)
def test_class_costs_and_estimates_equal_layer_by_layer_ones(path: Path) -> None:
    graph = load_model(path)
    costs = cost_graph(graph)
    assert costs == tuple(cost_layer(node, graph) for node in graph.layers)
    for target, dtype in (("rdk-s100", None), ("rdk-x3", "int8"), ("host", None), ("a100-pcie", None)):
        profile = load_profile(target)
        by_class = estimate_graph(graph, profile, dtype)
        one_by_one = estimate_graph(graph, profile, dtype, costs)  # given costs: no classes, every layer estimated
        assert by_class == one_by_one and by_class.resident == one_by_one.resident
