"""Differential profiling: the cut planner, the estimators and the bisect loop (``layerscope.measure``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from conftest import F32, ModelWriter, zoo
from layerscope.errors import InputError
from layerscope.estimator import estimate_graph
from layerscope.measure.cuts import CutPlanner
from layerscope.measure.differential import (
    BisectConfig,
    SampleStore,
    add_bisect,
    bootstrap_increments,
    increments,
    level,
    profile_segment_us,
    round_matrix,
    run_bisect,
)
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernel_trace import KernelSamples
from layerscope.measure.profile import KernelResult
from layerscope.measure.runners import NO_BOUNDARY_COST, BoundaryCost, Job
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.report.views.bisect import bisect_view
from layerscope.run import estimate_run
from layerscope.runfile import as_run
from layerscope.runtimes.onnxruntime.runner import OrtRunner
from layerscope.stats import summarize
from layerscope.targets import load_profile

RNG = np.random.default_rng(0)


def _conv(name: str, x: str, w: str, out: str) -> onnx.NodeProto:
    return helper.make_node("Conv", [x, w], [out], name=name, pads=[1, 1, 1, 1])


@pytest.fixture()
def residual(write_model: ModelWriter) -> Path:
    return write_residual(write_model)


def write_residual(write_model: ModelWriter) -> Path:
    """conv0 -> relu0 -> conv1 -> add(relu0) -> relu1 -> pool -> flat -> gemm: a skip connection over 2 layers."""
    nodes = [
        _conv("conv0", "x", "w0", "c0"), helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        _conv("conv1", "r0", "w1", "c1"), helper.make_node("Add", ["c1", "r0"], ["a1"], name="add1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r1"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wg"], ["y"], name="gemm", transB=1),
    ]
    weights = {"w0": RNG.standard_normal((8, 3, 3, 3)).astype(np.float32),
               "w1": RNG.standard_normal((8, 8, 3, 3)).astype(np.float32),
               "wg": RNG.standard_normal((4, 8)).astype(np.float32)}
    return write_model(nodes, [("x", F32, [1, 3, 16, 16])], [("y", F32, [1, 4])], weights)


def _planner(path: Path, weights: list[float] | None = None) -> tuple[Graph, CutPlanner]:
    graph = load_model(path)
    return graph, CutPlanner.for_model(graph, weights)


def _run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(feeds)), strict=True))


# --- cut planner -------------------------------------------------------------------------------------------------

def test_crossing_tensors_follow_the_skip_connection(residual: Path) -> None:
    _, planner = _planner(residual)
    assert planner.cut(1).outputs == ("c0",)
    assert planner.cut(2).outputs == ("r0",)
    assert planner.cut(3).outputs == ("r0", "c1")  # the skip tensor crosses until the Add reads it
    assert planner.cut(4).outputs == ("a1",)
    assert planner.cut(8).outputs == ("y",)
    assert planner.cut(3).crossing_bytes == 2 * 8 * 16 * 16 * 4
    # conv -> relu and conv -> add are fused by runtimes: cutting between them is flagged
    # conv1 -> add1 -> relu1 too (the add reads conv1's output, relu1 the add's, each its only reader)
    assert planner.cut(1).breaks_fusion and planner.cut(3).breaks_fusion and planner.cut(4).breaks_fusion
    # relu0's output also feeds the skip: conv1 is no tail, and neither is add1's read of it
    assert not planner.cut(2).breaks_fusion and not planner.cut(5).breaks_fusion


def test_every_prefix_is_valid_and_computes_the_models_values(residual: Path) -> None:
    graph, planner = _planner(residual)
    feeds = make_inputs(graph)
    expected = ReferenceEvaluator(onnx.load(str(residual))).run(None, feeds, intermediate=True)
    assert isinstance(expected, dict)
    for cut in range(planner.layer_count + 1):
        model = planner.prefix_model(cut)
        onnx.checker.check_model(model, full_check=True)
        assert [i.name for i in model.graph.input] == ["x"]
        outputs = _run(model, feeds)
        if cut == 0:  # the baseline: fed like every prefix, it returns one element and moves no data
            assert [n.op_type for n in model.graph.node] == ["Slice"]
            np.testing.assert_array_equal(next(iter(outputs.values())), feeds["x"][:1, :1, :1, :1])
            continue
        assert list(outputs) == list(planner.cut(cut).outputs)
        assert [n.name for n in model.graph.node] == [n.name for n in graph.layers[:cut]]
        for name, value in outputs.items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-4, atol=1e-4)
    full = planner.prefix_model(planner.layer_count)
    assert [o.name for o in full.graph.output] == ["y"] and full.opset_import == onnx.load(str(residual)).opset_import


@pytest.mark.parametrize("name", ["residual", "squeezenet"])
def test_every_suffix_computes_the_models_outputs_from_its_prefix(name: str, write_model: ModelWriter) -> None:
    path = write_residual(write_model) if name == "residual" else zoo("squeezenet")
    graph, planner = _planner(path)
    feeds = make_inputs(graph, (), 0)
    expected = _run(planner.prefix_model(planner.layer_count), feeds)
    cuts = range(1, planner.layer_count) if name == "residual" else (7, 33, 60)
    for k in cuts:
        suffix = planner.suffix_model(k)
        onnx.checker.check_model(suffix, full_check=True)
        crossing = _run(planner.prefix_model(k), feeds)
        weights = {t.name for t in suffix.graph.initializer}  # an IR 3 model lists them as inputs too
        names = [i.name for i in suffix.graph.input if i.name not in weights]
        # the prefix's crossing tensors a later layer reads, and the model inputs the suffix still reads
        assert set(names) <= set(crossing) | set(feeds) and set(names) & set(crossing)
        got = _run(suffix, {n: crossing[n] if n in crossing else feeds[n] for n in names})
        assert list(got) == [o.name for o in graph.outputs]
        for out, value in got.items():
            np.testing.assert_allclose(value, expected[out], rtol=1e-4, atol=1e-4)
    assert planner.suffix_model(0) == planner.prefix_model(planner.layer_count)
    baseline = planner.suffix_model(planner.layer_count)
    assert [n.op_type for n in baseline.graph.node] == ["Slice"] * len(graph.outputs)
    assert [i.name for i in baseline.graph.input] == [o.name for o in graph.outputs]
    onnx.checker.check_model(baseline, full_check=True)
    returned = _run(baseline, expected)
    assert [v.shape for v in returned.values()] == [(1,) * len(o.shape) for o in graph.outputs]


def test_prefixes_keep_the_folded_constants_they_need(write_model: ModelWriter) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Constant", [], ["shape"], name="const",
                              value=helper.make_tensor("v", TensorProto.INT64, [2], [1, 12])),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")]
    graph, planner = _planner(write_model(nodes, [("x", F32, [1, 3, 2, 2])], [("y", F32, [1, 12])]))
    assert [n.id for n in graph.layers] == ["relu", "reshape"] and [n.id for n in graph.folded] == ["const"]
    assert [n.name for n in planner.prefix_model(1).graph.node] == ["relu"]  # not needed yet
    model = planner.prefix_model(2)
    assert [n.name for n in model.graph.node] == ["const", "relu", "reshape"]
    onnx.checker.check_model(model, full_check=True)


def test_a_folded_shape_of_an_activation_is_given_as_its_value(write_model: ModelWriter) -> None:
    # YOLOv8's head (nudenet-320n): Shape of an activation is folded (its shape is static) and read after the cut;
    # kept as a node, it ran first in a suffix, before (or without) the layer that computes its input.
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["a"], name="sigmoid"),
             helper.make_node("Tanh", ["a"], ["b"], name="tanh"),
             helper.make_node("Shape", ["a"], ["s"], name="shape"),
             helper.make_node("Reshape", ["b", "s"], ["y"], name="reshape")]
    graph, planner = _planner(write_model(nodes, [("x", F32, [1, 3, 2, 2])], [("y", F32, [1, 3, 2, 2])]))
    assert [n.id for n in graph.layers] == ["relu", "sigmoid", "tanh", "reshape"]
    assert [n.id for n in graph.folded] == ["shape"]
    feeds = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 3, 2, 2)}
    expected = _run(planner.prefix_model(planner.layer_count), feeds)["y"]
    for k in range(1, planner.layer_count):
        suffix = planner.suffix_model(k)
        onnx.checker.check_model(suffix, full_check=True)
        assert "shape" not in [n.name for n in suffix.graph.node]
        np.testing.assert_array_equal([int(v) for v in onnx.numpy_helper.to_array(
            next(t for t in suffix.graph.initializer if t.name == "s"))], [1, 3, 2, 2])
        crossing = _run(planner.prefix_model(k), feeds)
        inputs = [i.name for i in suffix.graph.input if i.name not in {t.name for t in suffix.graph.initializer}]
        got = _run(suffix, {n: crossing[n] if n in crossing else feeds[n] for n in inputs})["y"]
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_tensor_read_only_inside_a_subgraph_crosses_the_cut(write_model: ModelWriter) -> None:
    branch = helper.make_graph([helper.make_node("Neg", ["a"], ["out"])], "then", [],
                               [helper.make_tensor_value_info("out", F32, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["a"], ["out2"])], "else", [],
                              [helper.make_tensor_value_info("out2", F32, [2])])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other)]
    path = write_model(nodes, [("x", F32, [2])], [("y", F32, [2])], {"zero": np.zeros((), np.float32)})
    graph, planner = _planner(path)
    assert [n.id for n in graph.layers] == ["relu", "sum", "gt", "if", "if/then_branch/Neg(out)"]
    assert [n.id for n in planner.graph.layers] == ["relu", "sum", "gt", "if"]  # cuts are top-level only
    assert planner.cut(3).outputs == ("a", "c")  # "a" is read by the If's branches only
    onnx.checker.check_model(planner.prefix_model(3), full_check=True)


def test_parts_of_a_control_flow_model_keep_the_declared_input_shapes(write_model: ModelWriter) -> None:
    """Parts are fed static shapes (the ones the run gave), except with control flow: ONNX Runtime type-checks
    every branch against the declared shapes, and the branch not taken need not check with the given ones."""
    branch = helper.make_graph([helper.make_node("Neg", ["a"], ["out"])], "then", [],
                               [helper.make_tensor_value_info("out", F32, ["N"])])
    other = helper.make_graph([helper.make_node("Identity", ["a"], ["out2"])], "else", [],
                              [helper.make_tensor_value_info("out2", F32, ["N"])])
    plain = [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Neg", ["a"], ["y"], name="neg")]
    flow = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
            helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
            helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other)]
    zero = {"zero": np.zeros((), np.float32)}
    for nodes, declared in ((plain, False), (flow, True)):
        path = write_model(nodes, [("x", F32, ["N"])], [("y", F32, ["N"])], zero if declared else None)
        planner = CutPlanner.for_model(load_model(path, {"x": (4,)}))
        dims = planner.prefix_model(1).graph.input[0].type.tensor_type.shape.dim
        assert [d.dim_param or d.dim_value for d in dims] == (["N"] if declared else [4])


def test_the_baseline_of_a_model_without_the_default_domain_loads() -> None:
    """scikit-learn's logistic regression as ONNX Runtime ships it imports only ai.onnx.ml: the baseline's Slice
    needs a default-domain opset of its own (ONNX Runtime refused it as an opset-1 Slice)."""
    path = Path(ort.__file__).parent / "datasets" / "logreg_iris.onnx"
    assert {o.domain for o in onnx.load(str(path)).opset_import} == {"ai.onnx.ml"}
    graph, planner = _planner(path)
    baseline = planner.prefix_model(0)
    assert [n.op_type for n in baseline.graph.node] == ["Slice"] * len(graph.inputs)
    feeds = {t.name: np.ones(t.shape, np.float32) for t in graph.inputs}
    assert [v.shape for v in _run(baseline, feeds).values()] == [(1,) * len(t.shape) for t in graph.inputs]


def test_coarse_cuts_balance_the_estimate_and_avoid_fused_pairs() -> None:
    graph, planner = _planner(zoo("resnet50"))
    cuts = planner.coarse_cuts(12)
    assert cuts[0] == 0 and cuts[-1] == planner.layer_count and list(cuts) == sorted(set(cuts))
    assert len(cuts) == 13
    assert not any(planner.cut(c).breaks_fusion for c in cuts)
    segments = planner.segments(cuts)
    assert [lid for s in segments for lid in s.layer_ids] == [n.id for n in graph.layers]
    sizes = [s.end - s.start for s in segments]
    assert max(sizes) <= 2.5 * planner.layer_count / 12  # equal weights: roughly equal layer counts
    for cut in cuts:
        onnx.checker.check_model(planner.prefix_model(cut))  # IR 3 model: initializers stay listed as inputs
    assert planner.coarse_cuts(12, baseline=False)[0] != 0
    assert planner.layer_cuts() == tuple(range(planner.layer_count + 1))


def test_cuts_keep_a_concat_with_its_inputs() -> None:
    """Just before an Inception module's Concat, its four branch outputs cross the cut; just after it, the same
    bytes as one tensor (which the runtime wrote in place). The planner takes the cut after the join."""
    graph, planner = _planner(zoo("inception_v1"))
    for cuts in (planner.coarse_cuts(12), planner.coarse_cuts(8)):
        for k in cuts[1:-1]:
            assert len(planner.cut(k).outputs) == 1, (k, graph.layers[k].op_type, planner.cut(k).outputs)
    joins = [k for k in range(1, planner.layer_count) if graph.layers[k].op_type == "Concat"]
    assert joins and all(len(planner.cut(k).outputs) == 4 for k in joins)
    assert all(planner.cut(k + 1).crossing_bytes == planner.cut(k).crossing_bytes for k in joins)
    for k in joins:  # a split around the join: its own cut, never the one before it
        assert planner.split_cut(k - 3, k + 4) != k


def test_coarse_cuts_follow_the_estimated_time(residual: Path) -> None:
    _, planner = _planner(residual, [40.0, 0, 10, 10, 0, 0, 0, 40])
    # near half the time, cuts 2 and 5-7 do not split a fused group; after the pool only 32 bytes cross
    assert planner.coarse_cuts(2) == (0, 6, 8)
    _, lumpy = _planner(residual, [100.0, 0, 1, 1, 0, 0, 0, 1])
    assert lumpy.coarse_cuts(4) == (0, 8)  # one layer holds the time: no near-empty segments beside it
    assert planner.split_cut(2, 8) in range(3, 8) and planner.split_cut(3, 4) is None
    assert planner.split_cut(0, 2) is None  # conv0 + relu0 run as one kernel
    assert planner.split_cut(2, 5) is None  # conv1 + add1 + relu1 run as one kernel
    assert planner.split_cut(2, 8) == 6 and planner.split_cut(4, 8) == 6


def test_refinement_refuses_splits_that_would_mostly_time_their_outputs(residual: Path) -> None:
    graph = load_model(residual)
    weights = [40.0, 0, 10, 10, 0, 0, 0, 40]
    fast = CutPlanner.for_model(graph, weights, bandwidth_bytes_per_s=1e12)
    assert fast.boundary_us(5) == pytest.approx(2 * 8 * 16 * 16 * 4 / 1e6)
    assert fast.split_cut(0, 6) == 2 and fast.boundary_us(8) == 0.0
    # at 1 MB/s writing back r0 (8 KiB) costs ~16 ms: far more than a tenth of either half
    slow = CutPlanner.for_model(graph, weights, bandwidth_bytes_per_s=1e6)
    assert slow.split_cut(0, 6) is None
    # coarse boundaries obey the same rule: at 1 MB/s no cut is cheap, at 1 TB/s every one is
    assert fast.coarse_cuts(2) == (0, 6, 8) and slow.coarse_cuts(2) == slow.coarse_cuts(4) == (0, 8)
    # 100 MB/s: after the pool (32 bytes cross, 0.64 us) the cut is cheap, before it (8 KiB, 164 us) it is not
    mid = CutPlanner.for_model(graph, weights, bandwidth_bytes_per_s=1e8)
    assert mid.boundary_us(6) == pytest.approx(0.64) and mid.boundary_us(5) > 0.1 * 50
    assert mid.coarse_cuts(2) == (0, 6, 8)
    assert slow.split_cut(0, 6, measured_us=1e6) == 2  # the measured segment is 20,000x its estimate


# --- estimators --------------------------------------------------------------------------------------------------

def test_paired_median_cancels_drift_and_min_ignores_interference() -> None:
    rounds = 9
    truth = np.array([10.0, 110.0, 160.0, 150.0])  # the third segment is really negative
    drift = np.linspace(0.0, 50.0, rounds)  # a slow drift, common to all prefixes in a round
    matrix = truth[:, None] + drift[None, :]
    np.testing.assert_allclose(increments(matrix, "median"), [100.0, 50.0, -10.0])
    spiky = truth[:, None] + np.where(RNG.random((4, rounds)) < 0.3, 80.0, 0.0)
    spiky[:, 0] = truth  # at least one quiet round per prefix
    np.testing.assert_allclose(increments(spiky, "min"), [100.0, 50.0, -10.0])
    no_baseline = round_matrix([[5.0, 5.0], [7.0, 9.0]], 2, baseline=False)
    np.testing.assert_allclose(increments(no_baseline, "median"), [5.0, 3.0])


def test_p10_rests_on_several_fast_rounds_and_adds_up() -> None:
    # 11 rounds: the 10th percentile sits at position (11 - 1) * 0.1 = 1 of the sorted rounds, the 2nd fastest
    first = np.array([100.0, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110])
    lucky = first + 50
    lucky[3] = 120.0  # one lucky round of the second prefix: the minimum's difference follows it, p10's does not
    matrix = np.vstack([np.zeros(11), first, lucky])
    np.testing.assert_allclose(increments(matrix, "min"), [100.0, 20.0])
    np.testing.assert_allclose(increments(matrix, "p10"), [101.0, 150.0 - 101.0])
    np.testing.assert_allclose(level(lucky, "p10"), 150.0)
    # differences of levels add up to the last prefix's level minus the first's, exactly
    rng = np.random.default_rng(1)
    noisy = np.cumsum(rng.random((6, 40)) * 10, axis=0)
    for statistic in ("p10", "min"):
        assert increments(noisy, statistic).sum() == pytest.approx(float(level(noisy[-1], statistic) -
                                                                          level(noisy[0], statistic)))


def _profiled(runs: int, **kernels: tuple[tuple[str, ...], tuple[float, ...]]) -> Any:
    """A stand-in for a Measurement: what ``profile_segment_us`` reads (its runs and layer kernels)."""
    results = tuple(KernelResult(KernelSamples(name, "Op", "cpu", durations), summarize(durations), layers, "layer")
                    for name, (layers, durations) in kernels.items())
    return type("Profiled", (), {"runs": runs, "kernels": results})()


def test_validation_reference_is_a_statistic_of_per_run_segment_sums() -> None:
    # kernel k1 runs layers a and b fused (split 3:1 by estimate), k2 runs layer c
    weights = {"a": 3.0, "b": 1.0, "c": 1.0}
    first = _profiled(2, k1=(("a", "b"), (10.0, 30.0)), k2=(("c",), (20.0, 5.0)))
    # per run: [a] = 7.5, 22.5; [b, c] = 2.5 + 20 = 22.5, 7.5 + 5 = 12.5
    assert profile_segment_us([["a"], ["b", "c"]], [first], weights, "min") == [7.5, 12.5]
    assert profile_segment_us([["a"], ["b", "c"]], [first], weights, "median") == [15.0, 17.5]
    # p10 of two runs: 10% of the way from the faster to the slower (linear)
    assert profile_segment_us([["a"], ["b", "c"]], [first], weights, "p10") == pytest.approx([9.0, 13.5])
    # the sum of per-layer minima (2.5 + 5) would be no run's time; a second profile's runs are pooled
    second = _profiled(1, k1=(("a", "b"), (4.0,)), k2=(("c",), (9.0,)))
    assert profile_segment_us([["a"], ["b", "c"], ["gone"]], [first, second], weights, "min") == [3.0, 10.0, 0.0]


def test_a_layout_kernel_counts_in_the_segment_holding_the_layers_it_serves() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    layer_kernels = _profiled(2, ka=(("a",), (10.0, 10.0)), kb=(("b",), (20.0, 20.0)), kc=(("c",), (30.0, 30.0)),
                              kd=(("d",), (40.0, 40.0))).kernels

    def layout(name: str, serves: tuple[str, ...], durations: tuple[float, float]) -> KernelResult:
        return KernelResult(KernelSamples(name, "Reorder", "cpu", durations), summarize(durations), (), "layout",
                            serves)

    kernels = (*layer_kernels,
               layout("into_b", ("b",), (5.0, 7.0)),  # between a and b: work of the segment holding b
               layout("into_c_d", ("c", "d"), (1.0, 1.0)),  # serving layers of one segment
               layout("straddling", ("b", "c"), (100.0, 100.0)),  # serving two segments: in neither
               layout("elsewhere", ("gone",), (100.0, 100.0)),  # serving no segment's layer
               layout("unknown", (), (100.0, 100.0)))  # serving nothing known
    profiled = type("Profiled", (), {"runs": 2, "kernels": kernels})()
    # per run: [a] = 10; [b] = 20 + 5, 20 + 7; [c, d] = 70 + 1
    assert profile_segment_us([["a"], ["b"], ["c", "d"]], [profiled], weights, "min") == [10.0, 25.0, 71.0]
    # an ONNX Runtime profile's layout kernels name no layers they serve: no change
    assert profile_segment_us([["a"], ["b"], ["c", "d"]], [_profiled(2, ka=(("a",), (10.0, 10.0)))], weights,
                              "min") == [10.0, 0.0, 0.0]


def test_bootstrap_is_seeded_and_keeps_rounds_paired() -> None:
    matrix = np.array([[0.0, 0, 0, 0], [10, 20, 30, 40], [15, 25, 35, 45]])
    a = bootstrap_increments(matrix, "median", 500, seed=3)
    assert a.shape == (2, 500) and np.array_equal(a, bootstrap_increments(matrix, "median", 500, seed=3))
    assert not np.array_equal(a, bootstrap_increments(matrix, "median", 500, seed=4))
    np.testing.assert_array_equal(a[1], 5.0)  # paired: the second difference is 5 in every round


def test_round_matrix_needs_enough_rounds() -> None:
    with pytest.raises(ValueError):
        round_matrix([[1.0, 2.0], [1.0]], 2)


# --- the bisect loop with a scripted runner ----------------------------------------------------------------------

class ScriptedRunner:
    """Times a model as ``per_layer_us`` x its layers (a prefix's before its cut, a suffix's from it on; the
    residual model has 8) + ``fixed_us`` + the round's ``drift``; counts calls."""

    def __init__(self, per_layer_us: Mapping[int, float], *, fixed_us: float = 50.0, interrupt_after: int | None = None,
                 tag: str = "scripted") -> None:
        self.per_layer_us = per_layer_us
        self.fixed_us = fixed_us
        self.interrupt_after = interrupt_after
        self.calls: list[int] = []
        self._identity = {"runner": tag}

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def measure(self, job: Job) -> float:
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        assert job.model_path.is_file()
        self.calls.append(job.cut.layers)
        drift = 7.0 * (len(self.calls) // 10)
        layers = range(job.cut.layers) if job.side == "prefix" else range(job.cut.layers, 8)
        return self.fixed_us + drift + sum(self.per_layer_us.get(i, 0.0) for i in layers)

    def close(self) -> None:
        pass


def test_layer_granularity_recovers_each_layer(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = {i: 10.0 * (i + 1) for i in range(8)}
    runner = ScriptedRunner(times)
    config = BisectConfig(granularity="layer", repeats=4)
    result = run_bisect(planner, runner, config, SampleStore(None), workdir=tmp_path)
    assert [s.increment_us for s in result.segments] == pytest.approx([times[i] for i in range(8)], abs=8.0)
    assert result.baseline_us == pytest.approx(50.0, abs=8.0)
    assert result.runs == 9 * 4 == len(runner.calls) and result.runs_measured == result.runs
    # neighbours are timed back to back: rounds alternate direction
    assert runner.calls[:18] == [*range(9), *reversed(range(9))]


def test_refinement_splits_where_the_time_is(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    runner = ScriptedRunner({0: 10.0, 1: 10.0, 2: 1000.0, 3: 10.0, 4: 10.0, 5: 5.0, 6: 5.0, 7: 5.0})
    config = BisectConfig(segments=2, repeats=3, pilot=1, budget_runs=40)
    result = run_bisect(planner, runner, config, SampleStore(None), workdir=tmp_path)
    cuts = [p.cut.layers for p in result.prefixes]
    assert result.refinements >= 1 and len(cuts) > 3
    heavy = next(s for s in result.segments if s.segment.start <= 2 < s.segment.end)
    assert heavy.increment_us == pytest.approx(1000.0, abs=60.0)
    assert result.pilot_runs + len(cuts) * config.repeats <= 40 == result.budget_runs
    assert len(runner.calls) == result.runs


def test_a_fast_model_gets_more_rounds_within_the_budget(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = {i: 10.0 * (i + 1) for i in range(8)}

    def bisect(rounds_s: float, budget: int = 1000) -> Any:
        config = BisectConfig(segments=2, repeats=3, pilot=2, budget_runs=budget, rounds_s=rounds_s, statistic="p10")
        return run_bisect(planner, ScriptedRunner(times), config, SampleStore(None), workdir=tmp_path)

    assert bisect(0.0).rounds == 3 and bisect(1e-6).rounds == 3  # never fewer than repeats
    assert bisect(10.0).rounds == 15  # at most 5 x repeats
    capped = bisect(10.0, budget=60)
    models = len(capped.prefixes)
    assert capped.rounds == max(3, (60 - capped.pilot_runs) // models) < 15  # what the budget leaves
    # in between: as many rounds as fit, by the prefixes' pilot medians (each ~50 µs + its layers)
    middle = bisect(0.01)
    round_us = sum(float(np.median(p.pilot_us)) for p in middle.prefixes)
    assert 3 < middle.rounds == -(-10_000 // round_us) < 15
    assert all(len(p.samples_us) == middle.rounds for p in middle.prefixes)
    assert all(s.samples == middle.rounds for s in middle.segments)


class NoisyRunner(ScriptedRunner):
    """:class:`ScriptedRunner` with each time multiplied by 1 + a seeded normal of ``cv``."""

    def __init__(self, per_layer_us: Mapping[int, float], cv: float, *, interrupt_after: int | None = None,
                 seed: int = 7) -> None:
        super().__init__(per_layer_us, interrupt_after=interrupt_after)
        self.rng, self.cv = np.random.default_rng(seed), cv

    def measure(self, job: Job) -> float:
        return super().measure(job) * (1.0 + self.cv * float(self.rng.standard_normal()))


def test_wide_intervals_get_more_rounds_up_to_five_times_repeats(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = dict.fromkeys(range(8), 100.0)

    def bisect(cv: float, max_ci: float, budget: int | None = None, repeats: int = 4) -> Any:
        config = BisectConfig(segments=2, repeats=repeats, pilot=2, max_ci=max_ci, resolve_share=0.25,
                              budget_runs=budget)
        return run_bisect(planner, NoisyRunner(times, cv), config, SampleStore(None), workdir=tmp_path / f"{cv}")

    quiet, off = bisect(0.0, 0.1), bisect(0.05, 0.0)
    assert quiet.rounds == 4 and quiet.resolve_from == 4 and quiet.resolve_widest == quiet.resolve_from_widest <= 0.1
    assert off.rounds == 4 and off.resolve_from is None and off.resolve_widest is None
    noisy = bisect(0.05, 0.1)
    assert noisy.resolve_from == 4 and noisy.resolve_from_widest is not None and noisy.resolve_from_widest > 0.1
    assert 4 < noisy.rounds <= 20  # at most 5 x repeats
    assert noisy.resolve_widest is not None and (noisy.resolve_widest <= 0.1 or noisy.rounds == 20)
    assert all(len(p.samples_us) == noisy.rounds for p in (*noisy.prefixes, *noisy.suffixes))
    assert all(s.samples == noisy.rounds for s in noisy.segments)
    # the widest interval the result reports is the one its own segments have
    total = sum(s.increment_us for s in noisy.segments)
    large = [s for s in noisy.segments if s.increment_us >= 0.25 * total]
    assert noisy.resolve_widest == pytest.approx(max(max(s.ci_high_us - s.increment_us, s.increment_us - s.ci_low_us)
                                                     / s.increment_us for s in large))
    # the default budget grows by the rounds added; a budget given keeps its word
    assert noisy.runs <= noisy.budget_runs
    tight = bisect(0.05, 0.1, budget=40)
    assert tight.runs <= 40 == tight.budget_runs and 4 <= tight.rounds < 20


def test_a_rerun_bisect_asks_the_same_rounds_of_its_cached_samples(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = dict.fromkeys(range(8), 100.0)
    config = BisectConfig(segments=2, repeats=4, pilot=2, max_ci=0.1, resolve_share=0.25)
    store_dir = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):  # in the final rounds
        run_bisect(planner, NoisyRunner(times, 0.05, interrupt_after=30), config, SampleStore(store_dir),
                   workdir=tmp_path / "w")
    first = run_bisect(planner, NoisyRunner(times, 0.05), config, SampleStore(store_dir), workdir=tmp_path / "w")
    assert first.rounds > 4 and first.runs_measured == first.runs - 30
    again = NoisyRunner(times, 0.05, seed=8)  # other noise: nothing may be measured again
    cached = run_bisect(planner, again, config, SampleStore(store_dir), workdir=tmp_path / "w")
    assert again.calls == [] and cached.rounds == first.rounds
    assert [s.increment_us for s in cached.segments] == [s.increment_us for s in first.segments]


def test_negative_increments_are_reported_not_clipped(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    runner = ScriptedRunner({0: 100.0, 1: -30.0, 2: 50.0})
    result = run_bisect(planner, runner, BisectConfig(granularity="layer", repeats=3), SampleStore(None),
                        workdir=tmp_path)
    second = result.segments[1]
    assert second.negative and second.increment_us == pytest.approx(-30.0, abs=8.0)
    assert result.segments[4].increment_us == pytest.approx(0.0, abs=8.0) and not result.segments[4].negative


def test_an_interrupted_bisect_resumes_from_the_cache(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = dict.fromkeys(range(8), 25.0)
    config = BisectConfig(granularity="layer", repeats=3)
    store_dir = tmp_path / "cache"
    first = ScriptedRunner(times, interrupt_after=11)
    with pytest.raises(KeyboardInterrupt):
        run_bisect(planner, first, config, SampleStore(store_dir), workdir=tmp_path / "w")
    assert len(first.calls) == 11
    second = ScriptedRunner(times)
    result = run_bisect(planner, second, config, SampleStore(store_dir), workdir=tmp_path / "w")
    assert len(second.calls) == 27 - 11 and result.runs_measured == 16
    again = ScriptedRunner(times)
    cached = run_bisect(planner, again, config, SampleStore(store_dir), workdir=tmp_path / "w")
    assert again.calls == [] and cached.runs_measured == 0
    assert [s.increment_us for s in cached.segments] == [s.increment_us for s in result.segments]
    other = ScriptedRunner(times, tag="another device")  # another runner never reuses these samples
    run_bisect(planner, other, config, SampleStore(store_dir), workdir=tmp_path / "w")
    assert len(other.calls) == 27


def test_a_budget_below_the_coarse_plan_is_an_input_error(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    with pytest.raises(InputError, match="--budget 5 runs is too small"):
        run_bisect(planner, ScriptedRunner({}), BisectConfig(segments=4, repeats=3, budget_runs=5),
                   SampleStore(None), workdir=tmp_path)


def test_a_corrupt_cache_entry_counts_as_empty(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    config = BisectConfig(granularity="layer", repeats=2)
    run_bisect(planner, ScriptedRunner({}), config, SampleStore(tmp_path / "c"), workdir=tmp_path / "w")
    entry = next((tmp_path / "c" / "samples").rglob("*.json"))
    entry.write_text("{not json")
    runner = ScriptedRunner({})
    run_bisect(planner, runner, config, SampleStore(tmp_path / "c"), workdir=tmp_path / "w")
    assert len(runner.calls) == 2


@pytest.mark.parametrize(("bad", "why"), [
    ({"pilot_us": [float("nan")]}, "sample 0 is nan"),
    ({"samples_us": [12.0, -1e9]}, "sample 1 is -1000000000.0"),
    ({"samples_us": "123"}, "samples are str"),
    ({"pilot_us": [True]}, "sample 0 is True"),
    ({"key": "another"}, "not an entry for this key"),
])
def test_a_cache_entry_with_bad_samples_is_dropped_with_a_warning_and_measured_again(
        residual: Path, tmp_path: Path, bad: dict[str, Any], why: str) -> None:
    """NaN used to crash the bisect and a negative sample made a segment '1000 s = 52,316,230% of whole'."""
    _, planner = _planner(residual)
    config = BisectConfig(granularity="layer", repeats=2)
    run_bisect(planner, ScriptedRunner({}), config, SampleStore(tmp_path / "c"), workdir=tmp_path / "w")
    entry = sorted((tmp_path / "c" / "samples").rglob("*.json"))[0]
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, **bad}))
    runner = ScriptedRunner({})
    store = SampleStore(tmp_path / "c")
    result = run_bisect(planner, runner, config, store, workdir=tmp_path / "w")
    assert len(runner.calls) == len(data["pilot_us"]) + len(data["samples_us"])  # that entry, measured again
    assert len(store.dropped) == 1 and why in store.dropped[0] and str(entry) in store.dropped[0]
    assert all(math.isfinite(s.increment_us) and abs(s.increment_us) < 1e6 for s in result.segments)


# --- the cut's own cost ---------------------------------------------------------------------------------------------

class CutCostRunner(ScriptedRunner):
    """A scripted device on which some cuts cost extra (``cut_cost_us``, added to every sample of that prefix)
    and which reports that cost as its profiler would; counts the prefixes whose cost it was asked for."""

    def __init__(self, per_layer_us: Mapping[int, float], cut_cost_us: Mapping[tuple[str, int], float]) -> None:
        super().__init__(per_layer_us)
        self.cut_cost_us = cut_cost_us
        self.asked: list[int] = []

    def measure(self, job: Job) -> float:
        return super().measure(job) + self.cut_cost_us.get((job.side, job.cut.layers), 0.0)

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost:
        assert whole.cut.layers == 8 and job.model_path.is_file() and whole.model_path.is_file()
        self.asked.append(job.cut.layers)
        cost = self.cut_cost_us.get((job.side, job.cut.layers), 0.0)
        return BoundaryCost((cost,) * runs, ("ReorderOutput",)) if cost else NO_BOUNDARY_COST


def test_the_cuts_own_cost_is_subtracted_from_its_prefix(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = {i: 10.0 * (i + 1) for i in range(8)}
    raw = run_bisect(planner, CutCostRunner(times, {("prefix", 3): 40.0}), BisectConfig(granularity="layer", repeats=4),
                     SampleStore(None), workdir=tmp_path)
    # as timed, the segment ending at cut 3 holds the cut's 40 µs and the next one lacks them
    assert raw.segments[2].increment_us == pytest.approx(30.0 + 40.0, abs=8.0)
    assert raw.segments[3].increment_us == pytest.approx(40.0 - 40.0, abs=8.0)
    runner = CutCostRunner(times, {("prefix", 3): 40.0})
    # max_cut_share 0: every cut kept, however much it costs (the next test drops such a cut)
    config = BisectConfig(granularity="layer", repeats=4, boundary_runs=3, statistic="p10", max_cut_share=0.0)
    store = SampleStore(tmp_path / "cache")
    result = run_bisect(planner, runner, config, store, workdir=tmp_path)
    assert [s.increment_us for s in result.segments] == pytest.approx([times[i] for i in range(8)], abs=8.0)
    assert [s.boundary_us for s in result.segments] == [0.0, 0.0, 40.0, -40.0, 0.0, 0.0, 0.0, 0.0]
    assert result.sum_segments_us == pytest.approx(result.full_us - (result.baseline_us or 0.0))
    assert sorted(runner.asked) == [1, 2, 3, 4, 5, 6, 7]  # the baseline and the whole model are the reference
    again = CutCostRunner(times, {("prefix", 3): 40.0})
    cached = run_bisect(planner, again, config, SampleStore(tmp_path / "cache"), workdir=tmp_path)
    assert again.asked == [] and cached.prefixes[3].boundary == BoundaryCost((40.0,) * 3, ("ReorderOutput",))


def test_a_cut_costing_more_than_its_share_of_a_segment_beside_it_is_dropped(residual: Path, tmp_path: Path) -> None:
    """Layer i takes 10 (i + 1) µs. Prefix 3 (layers 0-2) costs 40 µs more at its cut: 133% of the 30 µs segment
    before it, so the segments beside cut 3 (layers 2 and 3) become one of 30 + 40 µs; prefix 6's 2 µs are 3% of the
    60 µs segment before it (layer 5), under the 10% share, so cut 6 stays, corrected."""
    _, planner = _planner(residual)
    times = {i: 10.0 * (i + 1) for i in range(8)}
    runner = CutCostRunner(times, {("prefix", 3): 40.0, ("prefix", 6): 2.0})
    config = BisectConfig(granularity="layer", repeats=4, boundary_runs=3, statistic="p10")
    assert config.max_cut_share == 0.1
    result = run_bisect(planner, runner, config, SampleStore(None), workdir=tmp_path)
    assert [(s.segment.start, s.segment.end) for s in result.segments] == [
        (0, 1), (1, 2), (2, 4), (4, 5), (5, 6), (6, 7), (7, 8)]
    assert [s.increment_us for s in result.segments] == pytest.approx([10, 20, 70, 50, 60, 70, 80], abs=8.0)
    assert [s.boundary_us for s in result.segments] == [0.0, 0.0, 0.0, 0.0, 2.0, -2.0, 0.0]
    (dropped,) = result.dropped
    assert dropped.model.cut.layers == 3 and dropped.cost_us == 40.0
    assert dropped.segment_us == pytest.approx(30.0, abs=8.0) and dropped.share == pytest.approx(40 / 30, rel=0.3)
    assert [p.cut.layers for p in result.prefixes] == [0, 1, 2, 4, 5, 6, 7, 8]
    # the dropped cut's model was timed: its samples count, and the segments still add up to whole - baseline
    assert result.runs == 9 * 4 == len(runner.calls)
    assert result.sum_segments_us == pytest.approx(result.full_us - (result.baseline_us or 0.0))
    graph = planner.graph
    profile = load_profile("host")
    run = add_bisect(estimate_run(graph, estimate_graph(graph, profile), profile), result, {}, machine=dict)
    section = as_run(run.to_json()).bisect
    assert section is not None and section.boundary is not None  # the run file's typed reader takes it
    boundary = section.boundary
    assert boundary.max_share == 0.1 and boundary.models == 9
    (entry,) = boundary.dropped
    assert entry.layers == 3 and entry.side == "prefix" and entry.cost_us == 40.0 and len(entry.samples_us) == 4
    view = bisect_view(run)
    assert view is not None
    printed = {row.label: row.value for row in view.context}["cuts dropped"]  # what the terminal prints
    assert printed.startswith("1 cut(s) each cost more than 10% of the smaller segment beside it")
    assert "cut 3 (40.0 µs, 1" in printed


def test_a_costly_suffix_cut_is_dropped_and_the_meeting_cut_never_is(residual: Path, tmp_path: Path) -> None:
    """Suffix 6 costs 40 µs (67% of layer 5's 60 µs): segments 5 and 6 become one. The meeting cut 4 costs 40 µs
    on both sides too, and stays: the prefixes and the suffixes meet there."""
    _, planner = _planner(residual)
    times = {i: 10.0 * (i + 1) for i in range(8)}
    runner = CutCostRunner(times, {("suffix", 6): 40.0, ("prefix", 4): 40.0, ("suffix", 4): 40.0})
    config = BisectConfig(granularity="layer", repeats=4, statistic="p10", suffixes=True, boundary_runs=2)
    result = run_bisect(planner, runner, config, SampleStore(None), workdir=tmp_path)
    assert result.meet == 4 and [d.model.cut.layers for d in result.dropped] == [6]
    assert result.dropped[0].model.side == "suffix"
    assert [(s.segment.start, s.segment.end) for s in result.segments][4:] == [(4, 5), (5, 7), (7, 8)]
    assert [s.increment_us for s in result.segments][5] == pytest.approx(60 + 70, abs=8.0)
    assert [p.cut.layers for p in result.suffixes] == [4, 5, 7, 8]


def test_suffixes_time_the_second_half_and_meet_the_prefixes(residual: Path, tmp_path: Path) -> None:
    _, planner = _planner(residual)
    times = {i: 10.0 * (i + 1) for i in range(8)}
    runner = CutCostRunner(times, {("suffix", 6): 40.0})
    config = BisectConfig(granularity="layer", repeats=4, statistic="p10", suffixes=True, boundary_runs=2,
                          max_cut_share=0.0)
    result = run_bisect(planner, runner, config, SampleStore(None), workdir=tmp_path)
    # equal weights: the middle is cut 4; prefixes up to it and the whole model, suffixes from it on
    assert result.meet == 4
    assert [p.cut.layers for p in result.prefixes] == [0, 1, 2, 3, 4, 8]
    assert [p.cut.layers for p in result.suffixes] == [4, 5, 6, 7, 8]
    assert {p.side for p in result.suffixes} == {"suffix"} and result.suffix_baseline_us == pytest.approx(50, abs=8)
    assert [s.increment_us for s in result.segments] == pytest.approx([times[i] for i in range(8)], abs=8.0)
    # suffix 6 costs 40 µs more: as timed, segment 5 lacks them and segment 6 holds them
    assert [s.boundary_us for s in result.segments] == [0.0] * 5 + [-40.0, 40.0, 0.0]
    assert result.runs == 11 * 4 == len(runner.calls)
    assert sorted(runner.asked) == [1, 2, 3, 4, 4, 5, 6, 7]  # not the baselines, not the whole model


def test_suffix_models_are_fed_by_their_prefix(residual: Path, tmp_path: Path) -> None:
    graph, planner = _planner(residual)
    feeds = make_inputs(graph, (), 0)
    runner = OrtRunner(SessionConfig(threads=1), feeds)
    config = BisectConfig(granularity="layer", repeats=2, statistic="p10", suffixes=True)
    result = run_bisect(planner, runner, config, SampleStore(None), workdir=tmp_path / "w")
    assert [p.cut.layers for p in result.suffixes] == [4, 5, 6, 7, 8]
    assert len(result.segments) == 8 and all(len(p.samples_us) == 2 for p in result.suffixes)
    # what feeds a suffix is what its prefix computes from the model's inputs
    suffix, prefix = tmp_path / "suffix5.onnx", tmp_path / "prefix5.onnx"
    onnx.save(planner.suffix_model(5), str(suffix))  # pool -> flat -> gemm, fed relu1's output
    onnx.save(planner.prefix_model(5), str(prefix))
    job = Job(cut=planner.cut(5), key="s5", model_path=suffix, label="suffix 5", side="suffix", feeds_model=prefix)
    fed = runner.feeds_for(job)
    assert set(fed) == {"r1"} and runner.measure(job) > 0
    np.testing.assert_allclose(fed["r1"], _run(planner.prefix_model(5), feeds)["r1"], rtol=1e-6)


def write_chain(write_model: ModelWriter) -> Path:
    """conv0 -> relu0 -> conv1 -> relu1 -> softmax -> conv2 on 16 channels: ONNX Runtime runs the convolutions
    in its blocked NCHWc layout and converts relu1's output back for the softmax, which has no blocked kernel."""
    nodes = [_conv("conv0", "x", "w0", "c0"), helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             _conv("conv1", "r0", "w1", "c1"), helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Softmax", ["r1"], ["s"], name="soft", axis=1), _conv("conv2", "s", "w2", "y")]
    weights = {f"w{i}": RNG.standard_normal((16, 16, 3, 3)).astype(np.float32) for i in range(3)}
    return write_model(nodes, [("x", F32, [1, 16, 32, 32])], [("y", F32, [1, 16, 32, 32])], weights)


def _jobs(planner: CutPlanner, folder: Path, *cuts: int) -> list[Job]:
    jobs = []
    for cut in cuts:
        path = folder / f"prefix{cut}.onnx"
        onnx.save(planner.prefix_model(cut), str(path))
        jobs.append(Job(cut=planner.cut(cut), key=f"k{cut}", model_path=path, label=f"prefix {cut}"))
    return jobs


@pytest.mark.parametrize("opt_level", ["all", "extended"])
def test_onnxruntime_times_the_layout_conversions_a_cut_adds(write_model: ModelWriter, tmp_path: Path,
                                                            opt_level: str) -> None:
    graph, planner = _planner(write_chain(write_model))
    feeds = make_inputs(graph, (), 0)
    runner = OrtRunner(SessionConfig(threads=1, opt_level=opt_level), feeds)
    after_relu0, after_relu1, whole = _jobs(planner, tmp_path, 2, 4, 6)
    cost = runner.boundary(after_relu0, whole, 5)
    if opt_level == "extended":  # no NCHWc transformer below "all": nothing to convert back
        assert cost == NO_BOUNDARY_COST
        return
    # r0 stays blocked inside the whole model; as the prefix's output it is converted back, in every run
    assert len(cost.kernels) == 1 and cost.kernels[0].startswith("ReorderOutput")
    assert len(cost.samples_us) == 5 and min(cost.samples_us) > 0
    # the whole model converts r1 back itself (for the softmax): that cut adds nothing
    assert runner.boundary(after_relu1, whole, 5) == NO_BOUNDARY_COST


def _record_sessions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runner's sessions made to record, in the list returned, the model file's stem of every run."""
    ran: list[str] = []

    class Recorded:
        def __init__(self, session: Any, name: str) -> None:
            self.session, self.name = session, name

        def get_inputs(self) -> Any:
            return self.session.get_inputs()

        def get_outputs(self) -> Any:
            return self.session.get_outputs()

        def run(self, *args: Any) -> Any:
            ran.append(self.name)
            return self.session.run(*args)

    from layerscope.runtimes.onnxruntime import runner as runners

    real = runners.make_session
    monkeypatch.setattr(runners, "make_session", lambda path, config, **kw: Recorded(real(path, config, **kw),
                                                                                      Path(path).stem))
    return ran


@pytest.mark.parametrize("warm_with", ["whole", "self"])
def test_each_visit_warms_with_the_whole_model_or_itself(residual: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, warm_with: str) -> None:
    graph, planner = _planner(residual)
    prefix, whole = _jobs(planner, tmp_path, 3, 8)
    job = Job(cut=prefix.cut, key=prefix.key, model_path=prefix.model_path, label="prefix 3",
              whole_model=whole.model_path)
    ran = _record_sessions(monkeypatch)
    runner = OrtRunner(SessionConfig(threads=1), make_inputs(graph, (), 0), visit_warmup=1,
                       warm_with=warm_with)  # type: ignore[arg-type]
    runner.measure(job)
    first = list(ran)
    ran.clear()
    runner.measure(job)
    warm = "prefix8" if warm_with == "whole" else "prefix3"
    # a new session is warmed up twice by itself; every visit then runs the warm model once, then the timed run
    assert first == ["prefix3", "prefix3", warm, "prefix3"] and ran == [warm, "prefix3"]
    assert runner.identity["warm_with"] == warm_with


def test_recompile_is_due_after_every_n_visits_of_each_model() -> None:
    from layerscope.measure.runners import Recompile

    every3 = Recompile(3)
    # visits 1..7 of one model: made afresh before the 4th and the 7th; another model counts on its own
    assert [every3.due("a") for _ in range(7)] == [False, False, False, True, False, False, True]
    assert [every3.due("b") for _ in range(4)] == [False, False, False, True]
    never = Recompile(0)
    assert not any(never.due("a") for _ in range(10))
    with pytest.raises(ValueError, match="every >= 0"):
        Recompile(-1)


def test_onnxruntime_opens_a_fresh_session_every_n_visits(residual: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    graph, planner = _planner(residual)
    (job,) = _jobs(planner, tmp_path, 3)
    from layerscope.runtimes.onnxruntime import runner as runners

    opened: list[str] = []
    real = runners.make_session
    monkeypatch.setattr(runners, "make_session", lambda path, config, **kw: opened.append(Path(path).stem)
                        or real(path, config, **kw))
    runner = OrtRunner(SessionConfig(threads=1), make_inputs(graph, (), 0), warm_with="self", recompile_every=2)
    for _ in range(5):
        assert runner.measure(job) > 0
    assert opened == ["prefix3"] * 3  # visits 1-2, 3-4, 5: three sessions, each used for at most two samples
    assert runner.identity["recompile_every"] == 2
    # never: one session, and the identity (the cache key) is the one runners had before the option
    plain = OrtRunner(SessionConfig(threads=1), make_inputs(graph, (), 0), warm_with="self")
    opened.clear()
    for _ in range(5):
        plain.measure(job)
    assert opened == ["prefix3"] and "recompile_every" not in plain.identity


def _suffix_job(planner: CutPlanner, folder: Path, cut: int) -> Job:
    """The suffix of ``cut`` (``suffix{cut}.onnx``) fed by ``prefix{cut}.onnx``, the whole model ``prefix{N}.onnx``."""
    (feeding,) = _jobs(planner, folder, cut)
    (whole,) = _jobs(planner, folder, planner.layer_count)
    path = folder / f"suffix{cut}.onnx"
    onnx.save(planner.suffix_model(cut), str(path))
    return Job(cut=planner.cut(cut), key=f"s{cut}", model_path=path, label=f"suffix {cut}", side="suffix",
               feeds_model=feeding.model_path, whole_model=whole.model_path)


@pytest.mark.parametrize(("side", "warm_with", "visit_warmup", "expected"), [
    ("prefix", "self", 2, ("self", "self")), ("prefix", "whole", 2, ("whole", "whole")),
    ("prefix", "loop", 3, ("self", "self", "self")), ("suffix", "loop", 2, ("self", "self", "feeds")),
    ("suffix", "loop", 0, ()), ("suffix", "whole", 1, ("whole",)), ("whole", "whole", 2, ("self", "self")),
    ("whole", "loop", 1, ("self",))])
def test_warm_sequence_puts_a_suffix_after_the_layers_before_it_in_loop_mode(
        residual: Path, tmp_path: Path, side: str, warm_with: str, visit_warmup: int, *,
        expected: tuple[str, ...]) -> None:
    from layerscope.measure.runners import warm_sequence

    _, planner = _planner(residual)
    suffix = _suffix_job(planner, tmp_path, 3)
    prefix = Job(cut=planner.cut(3), key="p3", model_path=suffix.feeds_model or Path(), label="prefix 3",
                 whole_model=suffix.whole_model)
    whole = Job(cut=planner.cut(8), key="p8", model_path=suffix.whole_model or Path(), label="whole")
    job = {"prefix": prefix, "suffix": suffix, "whole": whole}[side]
    assert warm_sequence(job, warm_with, visit_warmup) == expected  # type: ignore[arg-type]


def test_onnxruntime_loop_mode_runs_a_suffix_then_its_feeding_prefix_before_timing_it(
        residual: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, planner = _planner(residual)
    job = _suffix_job(planner, tmp_path, 3)
    ran = _record_sessions(monkeypatch)
    from layerscope.runtimes.onnxruntime import runner as runners

    opened: list[str] = []
    recorded = runners.make_session
    monkeypatch.setattr(runners, "make_session", lambda path, config, **kw: opened.append(Path(path).stem)
                        or recorded(path, config, **kw))
    runner = OrtRunner(SessionConfig(threads=1), make_inputs(graph, (), 0), visit_warmup=2, warm_with="loop")
    assert runner.measure(job) > 0
    ran.clear()
    runner.measure(job)
    # runs of the suffix itself, one of the layers before its cut (as the whole model's loop ran them), timed
    assert ran == ["suffix3", "suffix3", "prefix3", "suffix3"]
    assert sorted(opened) == ["prefix3", "suffix3"]  # the feeding prefix computed the feeds and warms: one session
