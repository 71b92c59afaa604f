"""Fusion rules learnt from ONNX Runtime's groupings of zoo models (issue #18): they reproduce its kernels on a
model they were not learnt from, replay exactly on the ones they were, respect single-consumer edges, and
round-trip through the predictor file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ModelWriter, zoo
from layerscope.analysis.fusion_rules import FusionRules, learn_rules
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import kernel_groups

CONFIG = SessionConfig(threads=1)


def _ort(name: str) -> tuple[Graph, list[tuple[str, tuple[str, ...]]]]:
    graph = load_model(zoo(name))
    return graph, kernel_groups(graph, CONFIG)


@pytest.fixture(scope="module")
def learnt() -> FusionRules:
    return learn_rules([_ort("resnet50"), _ort("densenet121"), _ort("inception_v1")], "onnxruntime")


def test_rules_learnt_elsewhere_reproduce_onnxruntime_on_squeezenet(learnt: FusionRules) -> None:
    graph, truth = _ort("squeezenet")
    ops = {n.id: n.op_type for n in graph.layers}
    mine = learnt.group(graph)
    assert sum(1 for _, layers in mine if [ops[i] for i in layers] == ["Conv", "Relu"]) == 26  # every Conv+Relu
    assert len(truth) == 39 and len(mine) == 40
    same = {frozenset(g) for _, g in truth} & {frozenset(g) for _, g in mine}
    assert len(same) == 38
    # the one difference: ORT removes the Dropout before the last Conv and the fusion map gives it to that Conv's
    # kernel; the rules never saw Dropout -> Conv, so the Dropout is a kernel of its own
    assert {tuple(ops[i] for i in g) for _, g in mine if frozenset(g) not in same} == {("Dropout",),
                                                                                       ("Conv", "Relu")}
    assert learnt.fuses("Conv", "Conv", "BatchNormalization") and learnt.fuses("Conv", "BatchNormalization", "Relu")
    assert not learnt.fuses("Conv", "Relu", "Conv") and not learnt.fuses("Concat", "Concat", "BatchNormalization")


def test_rules_replay_the_groupings_they_were_learnt_from() -> None:
    examples = [_ort("resnet50"), _ort("squeezenet")]
    rules = learn_rules(examples, "onnxruntime")
    for graph, truth in examples:
        assert {frozenset(g) for _, g in rules.group(graph)} == {frozenset(g) for _, g in truth}
    # resnet50: Conv+BatchNormalization+Relu, and Conv+BatchNormalization+Sum+Relu at each of its 16 residual adds
    fused, seen = rules.triples[("Conv", "BatchNormalization", "Sum")]
    assert (fused, seen) == (16, 20)  # the 4 projection shortcuts' BatchNormalization feeds the Sum unfused


def test_a_value_read_twice_is_never_fused(write_model: ModelWriter) -> None:
    w = np.ones((4, 4, 1, 1), dtype=np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["c", "r"], ["y"], name="add")]
    graph = load_model(write_model(nodes, [("x", F32, (1, 4, 8, 8))], [("y", F32, (1, 4, 8, 8))], {"w": w}))
    rules = FusionRules({}, {("Conv", "Relu"): (5, 5), ("Relu", "Add"): (3, 4)}, {}, "onnxruntime", 1)
    # conv's output feeds relu and add: no edge from it can fuse; relu -> add is single-consumer (3 of 4: fused)
    assert rules.group(graph) == [("conv", ("conv",)), ("relu", ("relu", "add"))]
    dropping = FusionRules({}, {}, {"Relu": (2, 3)}, "onnxruntime", 1)
    assert [layers for _, layers in dropping.group(graph)] == [("conv",), ("add",)]


def test_rules_round_trip_as_json_and_malformed_ones_are_refused(learnt: FusionRules, tmp_path: Path) -> None:
    data = json.loads(json.dumps(learnt.to_json()))
    assert FusionRules.from_json(data) == learnt
    assert data["pairs"]["Conv>BatchNormalization"][0] == data["pairs"]["Conv>BatchNormalization"][1] > 100
    bad = dict(data, pairs={"Conv>Relu": [3, 2]})  # fused more often than seen
    with pytest.raises(ValueError, match="Conv>Relu"):
        FusionRules.from_json(bad)
