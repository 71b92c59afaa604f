"""Tiny kernels (issue #39): a family's smallest timed kernels say what a kernel in the fixed-cost regime costs, and a
tree's lowest leaf (fitted to larger kernels' ratios, or to one noisy tiny sample) never predicts such a kernel above
it: a 1-element Add was predicted 5.5 µs, a 128-element Transpose 15.7 µs, where they cost ~0.3 µs in their model."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from _predictors import roofline_predictor
from layerscope.analysis.predictor import (
    FEATURES,
    FLOOR_US,
    VIEW_FAMILY,
    Caches,
    FamilyFit,
    KernelSample,
    Predictor,
    SmallKernels,
    aliased_view,
    fit_predictor,
    fit_small_kernels,
    load_predictor,
    predict_kernel,
    predict_model,
    subgraph_kernels,
    view_only,
)
from layerscope.analysis.trees import Ensemble, Tree
from layerscope.errors import InputError
from layerscope.estimator import estimate_graph
from layerscope.measure.kernels import CallCosts, kernel_family
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.targets import load_profile

_WS, _ELEM = FEATURES.index("log_working_set_bytes"), FEATURES.index("elem_bytes")


def _sample(ws_bytes: float, roofline_us: float, measured_us: float, elem_bytes: float = 4.0) -> KernelSample:
    features = [0.0] * len(FEATURES)
    features[_WS], features[_ELEM] = math.log1p(ws_bytes), elem_bytes
    return KernelSample("elementwise", f"ws={ws_bytes}", tuple(features), roofline_us, measured_us)


def test_small_kernels_read_on_the_smallest_fixed_cost_samples_per_width() -> None:
    measured = [0.1] * 6 + [0.3] * 4 + [10.0, 12.0]  # two noisy ones: the median ignores them
    samples = [_sample(100.0 * (i + 1), 0.3, m) for i, m in enumerate(measured)]
    samples += [_sample(50.0, 5.0, 100.0),  # smallest working set, but its roofline is past the fixed cost
                _sample(5000.0, 0.3, 50.0),  # in the regime, the 13th smallest: left out
                _sample(10.0, 0.3, 9.0, elem_bytes=2.0), _sample(20.0, 0.3, 9.0, elem_bytes=2.0)]  # too few fp16
    (small,) = fit_small_kernels(samples)
    assert small.elem_bytes == 4.0 and small.samples == 12
    assert small.ws_bytes == pytest.approx(1200.0)
    assert small.us == pytest.approx(0.2)  # (0.1 + 0.3) / 2
    # the 10th / 90th percentiles, linear between order statistics: 0.1; at rank 9.9, 0.3 + 0.9 * (10 - 0.3)
    assert small.low_us == pytest.approx(0.1) and small.high_us == pytest.approx(9.03)
    assert fit_small_kernels(samples[:11]) == ()  # 11 in the regime: no cap


def test_regime_membership() -> None:
    small = SmallKernels(4.0, 1200.0, 0.2, 0.1, 10.2, 12)
    features = _sample(1200.0, 0.3, 0.0).features
    assert small.caps(features, 0.3)
    assert not small.caps(features, FLOOR_US + 0.01)  # roofline past the fixed cost
    assert not small.caps(_sample(1201.0, 0.3, 0.0).features, 0.3)  # larger than any of the small ones
    assert not small.caps(_sample(100.0, 0.3, 0.0, elem_bytes=2.0).features, 0.3)  # another width


def _add(tmp_path: Path, elements: int) -> Graph:
    const = helper.make_tensor("c", TensorProto.FLOAT, [1, elements], np.ones(elements).tolist())
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, elements])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, elements])], [const])
    path = tmp_path / f"add{elements}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return load_model(path)


def _predictor(log_ratio: float, small: tuple[SmallKernels, ...]) -> Predictor:
    """One ``elementwise`` fit whose every leaf is ``log_ratio`` (interval ±0.1), with ``small``; an ``all`` fit."""
    leaf = Tree(np.array([0]), np.array([0.0]), np.array([-1]), np.array([-1]), np.array([0.0]))
    fits = {name: FamilyFit(name, 50, 0.0, 1.0, 5, -0.1, 0.1, Ensemble(log_ratio, 1.0, "sum", width, (leaf,)), small)
            for name, width in (("elementwise", len(FEATURES)), ("all", len(FEATURES) + 10))}
    return Predictor({"runner": "test"}, "host", 5.0, fits)


def test_a_tiny_kernel_is_predicted_at_most_its_familys_small_kernels(tmp_path: Path) -> None:
    graph = _add(tmp_path, 1)  # 12 bytes in, 4 out: in the regime (working set at most 1200 bytes)
    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    small = SmallKernels(4.0, 1200.0, 0.2, 0.1, 0.6, 12)
    tree_only = predict_kernel(_predictor(2.0, ()), "elementwise", graph, estimate, ["add"], name="add")
    roof = tree_only.roofline_us
    assert roof <= FLOOR_US
    assert tree_only.latency_us == pytest.approx((roof + FLOOR_US) * math.exp(2.0) - FLOOR_US)  # ~14 µs
    capped = predict_kernel(_predictor(2.0, (small,)), "elementwise", graph, estimate, ["add"], name="add")
    assert capped.latency_us == capped.isolated_us == pytest.approx(0.2)
    assert capped.low_us == pytest.approx(0.1) and capped.high_us == pytest.approx(0.6)
    # a tree that predicts less than the cap keeps its own number: its ratio set for 0.1 µs on this host's roofline
    # (the host profile is measured here, so the roofline of the Add moves with the machine)
    ratio = math.log((FLOOR_US + 0.1) / (roof + FLOOR_US))
    low = predict_kernel(_predictor(ratio, (small,)), "elementwise", graph, estimate, ["add"], name="add")
    assert 0 < low.latency_us < 0.2
    assert low.latency_us == pytest.approx((roof + FLOOR_US) * math.exp(ratio) - FLOOR_US)


def test_a_kernel_past_the_small_ones_keeps_the_trees_number(tmp_path: Path) -> None:
    graph = _add(tmp_path, 1024)  # 12 KiB: larger than every small kernel
    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    small = SmallKernels(4.0, 1200.0, 0.2, 0.1, 0.6, 12)
    got = predict_kernel(_predictor(1.0, (small,)), "elementwise", graph, estimate, ["add"], name="add")
    assert got.latency_us == pytest.approx((got.roofline_us + FLOOR_US) * math.e - FLOOR_US)


def test_small_kernels_saved_and_loaded(tmp_path: Path) -> None:
    small = SmallKernels(4.0, 1200.0, 0.2, 0.1, 0.6, 12)
    path = _predictor(0.0, (small,)).save(tmp_path / "p.json")
    assert load_predictor(path).families["elementwise"].small == (small,)
    text = path.read_text().replace('"us": 0.2', '"us": 0.9')  # above its own 90th percentile: malformed
    path.write_text(text)
    with pytest.raises(InputError, match="malformed"):
        load_predictor(path)


# ------------------------------------------------------------------------------ control flow
def _if_model(tmp_path: Path) -> Graph:
    """x[4] -> ReduceSum -> Greater 0 -> If: then Relu(x) + Slice(a constant), else Identity(x)."""
    table = helper.make_tensor("table", TensorProto.FLOAT, [8], list(range(8)))
    starts, ends = (helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("starts", 0), ("ends", 4)))
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                              helper.make_node("Slice", ["table", "starts", "ends"], ["part"], name="slice"),
                              helper.make_node("Add", ["r", "part"], ["t"], name="add")],
                             "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])],
                             [table, starts, ends])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="same")], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    path = tmp_path / "if.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return load_model(path)


def test_the_layers_run_in_a_branch_are_kernels_of_their_own_but_constant_ones(tmp_path: Path) -> None:
    graph = _if_model(tmp_path)
    inside = {n.id: n for n in graph.layers if n.parent}
    assert {n.op_type for n in inside.values()} >= {"Relu", "Slice", "Add"}  # the branch the loader saw run
    top = [(n.id, kernel_family([n.op_type]), (n.id,)) for n in graph.layers if not n.parent]
    extra = subgraph_kernels(graph, top)
    assert sorted(inside[name].op_type for name, _, _ in extra) == ["Add", "Relu"]  # the Slice of constants folds
    assert all(layers == (name,) and family == "elementwise" for name, family, layers in extra)
    assert subgraph_kernels(graph, [*top, *extra]) == []  # covered: not twice

    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    predictor = roofline_predictor(0.0)
    got = predict_model(predictor, graph, estimate, top, "none")
    names = [k.kernel for k in got.kernels]
    assert names == [name for name, _, _ in top] + [name for name, _, _ in extra]
    assert got.latency_us == pytest.approx(sum(k.latency_us for k in got.kernels))


# ------------------------------------------------------------------------------ views
def _relu_squeeze_relu(tmp_path: Path, *, alone: bool = False) -> Graph:
    """x[1, 4096] -> Relu -> Squeeze(axis 0) -> Relu -> y[4096]; ``alone``: the Squeeze only, x to y."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    src, dst = ("x", "y") if alone else ("a", "b")
    nodes = [helper.make_node("Squeeze", [src, "axes"], [dst], name="squeeze")]
    if not alone:
        nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"), *nodes,
                 helper.make_node("Relu", ["b"], ["y"], name="second")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])], [axes])
    path = tmp_path / f"view{int(alone)}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return load_model(path)


def test_a_view_in_its_model_is_a_dispatch_and_alone_a_copy(tmp_path: Path) -> None:
    graph = _relu_squeeze_relu(tmp_path)
    assert view_only(graph, ["squeeze"]) and aliased_view(graph, ["squeeze"])
    assert not view_only(graph, ["first", "squeeze"])  # a Relu fused with it does work
    alone = _relu_squeeze_relu(tmp_path, alone=True)
    assert view_only(alone, ["squeeze"]) and not aliased_view(alone, ["squeeze"])  # input to output: copied

    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    predictor = _predictor(2.0, ())  # would predict e^2 x (roofline + floor)
    view = predict_kernel(predictor, "elementwise", graph, estimate, ["squeeze"], name="squeeze")
    assert (view.family, view.latency_us, view.low_us, view.high_us, view.isolated_us) == (VIEW_FAMILY, 0, 0, 0, 0)
    relu = predict_kernel(predictor, "elementwise", graph, estimate, ["first"], name="first")
    assert relu.family == "elementwise" and relu.latency_us > 1.0
    calls = CallCosts(5.0, 1.0, 0.0, 0.25, "test")
    got = predict_model(dataclasses.replace(predictor, calls=calls), graph, estimate,
                        [(n, "elementwise", (n,)) for n in ("first", "squeeze", "second")], "none")
    assert [k.latency_us for k in got.kernels][1] == pytest.approx(0.25)  # its dispatch in the model
    copied = predict_kernel(predictor, "elementwise", alone, estimate_graph(alone, load_profile("host"), "fp32"),
                            ["squeeze"], name="squeeze")
    assert copied.family == "elementwise" and copied.latency_us > 1.0


def test_view_samples_are_not_fitted(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    kept = [_sample(float(rng.uniform(1e3, 1e6)), 0.3, float(rng.uniform(0.1, 1.0))) for _ in range(20)]
    views = [dataclasses.replace(_sample(1e5, 0.3, 40.0), view=True) for _ in range(20)]
    predictor = fit_predictor([*kept, *views], {"runner": "test"}, "host", 5.0,
                              caches=Caches(1 << 20, 32 << 20, "test"))
    assert predictor.families["elementwise"].samples == 20 and predictor.families["all"].samples == 20
    with pytest.raises(InputError, match="only 3 kernel"):
        fit_predictor([*kept[:3], *views], {"runner": "test"}, "host", 5.0, caches=Caches(1 << 20, 32 << 20, "test"))


def test_a_shape_query_does_no_work_at_any_size(tmp_path: Path) -> None:
    # the loader folds a Shape of a static shape: this one queries a data-dependent one (NonZero's)
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             helper.make_node("Shape", ["nz"], ["s"], name="shape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 4096])],
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [2])])
    path = tmp_path / "shape.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    loaded = load_model(path)
    assert [n.op_type for n in loaded.layers] == ["NonZero", "Shape"]
    shape = loaded.layers[1].id
    assert view_only(loaded, [shape]) and aliased_view(loaded, [shape])  # reads no element, copies nothing
    assert not view_only(loaded, [loaded.layers[0].id])
    estimate = estimate_graph(loaded, load_profile("host"), "fp32")
    got = predict_kernel(_predictor(2.0, ()), "elementwise", loaded, estimate, [shape], name="shape")
    assert (got.family, got.latency_us) == (VIEW_FAMILY, 0.0)
