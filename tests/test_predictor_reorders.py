"""A kernel timed alone pays the layout kernels ONNX Runtime puts at its own boundary (the NCHWc ReorderInput /
ReorderOutput around a blocked convolution); a chain of blocked kernels in a model shares one pair. Kernels are
timed net of theirs, and a model's prediction adds the reorders its optimized graph runs, once."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from _predictors import FakeKernels, relu_kernel, roofline_predictor
from layerscope.analysis.predictor import (
    REORDER_FAMILY,
    KernelSample,
    ReorderFit,
    fit_reorders,
    load_predictor,
    predict_model,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import (
    TimingConfig,
    conv_kernel,
    kernel_family,
    model_kernels,
    time_kernels,
)
from layerscope.measure.runners import NO_BOUNDARY_COST, BoundaryCost, Job, Runner
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import OrtKernels, kernel_groups, layout_kernels, optimized_graph
from layerscope.targets import load_profile

MIB = 1 << 20


# ------------------------------------------------------------------------ timing alone, with a fake runtime
class _FakeRunner:
    """Every sample of a kernel model 100 µs, of the empty (overhead) model 5 µs; a kernel's boundary: 30 µs a
    run of a ReorderInput of ``x`` and a ReorderOutput of ``c`` (the conv's input and output), read as 2 µs for
    the profiler's floor probe (1 µs each)."""

    def __init__(self, log: list[tuple[str, str]]) -> None:
        self.log = log

    @property
    def identity(self) -> Mapping[str, Any]:
        return {"runner": "fake"}

    def measure(self, job: Job) -> float:
        return 5.0 if job.label == "empty" else 100.0

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost:
        self.log.append((job.label, str(whole.model_path)))
        whole_ops = {n.op_type for n in onnx.load(str(whole.model_path)).graph.node}
        assert not whole_ops & {"ReorderInput", "ReorderOutput"}  # judged against a model without layout kernels
        if job.label == "empty":
            return NO_BOUNDARY_COST
        if job.label == "profiler floor":
            return BoundaryCost((2.0,), ("ReorderInput", "ReorderOutput"), ("x", "c"))
        return BoundaryCost((28.0, 30.0, 32.0)[: max(1, min(runs, 3))], ("ReorderInput", "ReorderOutput"), ("x", "c"))

    def close(self) -> None:
        pass


class _FakeKernels(FakeKernels):
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        return _FakeRunner(self.log)


def test_a_kernel_alone_is_timed_net_of_its_boundary_layout_kernels(tmp_path: Path) -> None:
    kernel = conv_kernel(8, 16, 32, k=3, stride=1, depthwise=False, bn=False, act="none")
    runner = _FakeKernels()
    store = SampleStore(tmp_path / "cache")
    timings, overhead_us, _ = time_kernels([kernel], store, TimingConfig(visits=3), runner=runner)
    (timing,) = timings
    assert overhead_us == 5.0
    # 30 µs read by the profiler for 2 layout kernels, less its floor of 1 µs for each
    assert timing.boundary_us == 28.0 and timing.boundary_kernels == 2
    assert timing.latency_us == pytest.approx(100.0 - 5.0 - 28.0)
    assert timing.boundary_bytes == (16 + 32) * 8 * 8 * 4  # x [1,16,8,8] and c [1,32,8,8], fp32
    asked = [label for label, _ in runner.log if label != "empty"]
    assert asked == ["profiler floor", kernel.label]
    # the boundary is cached with the samples: a second timing asks for neither
    again, _, _ = time_kernels([kernel], SampleStore(tmp_path / "cache"), TimingConfig(visits=3), runner=runner)
    assert [label for label, _ in runner.log if label != "empty"] == asked
    assert again[0].cached and again[0].latency_us == timing.latency_us and again[0].boundary_bytes == 12288
    assert again[0].boundary_us == 28.0


# ------------------------------------------------------------------------ the reorders' fit
def _sample(kernels: int, nbytes: int, us: float) -> KernelSample:
    return KernelSample("conv", f"k{nbytes}", (0.0,), 1.0, 10.0, boundary_kernels=kernels, boundary_bytes=nbytes,
                        boundary_us=us)


def test_the_reorder_fit_recovers_a_per_kernel_cost_and_a_cost_per_byte() -> None:
    samples = [_sample(n, b, 3.0 * n + 40.0 * b / MIB) for n, b in ((1, MIB // 4), (2, MIB), (2, 4 * MIB),
                                                                     (1, 8 * MIB), (2, MIB // 16))]
    fit = fit_reorders([*samples, _sample(0, 0, 0.0), _sample(2, 0, 5.0)])  # no layout kernel, unknown bytes: left out
    assert fit.samples == 5
    assert fit.per_kernel_us == pytest.approx(3.0) and fit.us_per_mib == pytest.approx(40.0)
    assert fit.predict_us(2 * MIB) == pytest.approx(83.0) and fit.median_abs_error == pytest.approx(0.0, abs=1e-9)
    assert fit_reorders(samples[:2]).samples == 0  # fewer than 3: nothing predicted


def test_the_reorder_fit_keeps_both_terms_non_negative() -> None:
    # time falling with size would need a negative cost per byte: the per-kernel term alone is kept
    samples = [_sample(1, b, us) for b, us in ((MIB, 12.0), (2 * MIB, 10.0), (4 * MIB, 8.0))]
    fit = fit_reorders(samples)
    assert fit.us_per_mib == 0.0 and 8.0 < fit.per_kernel_us < 12.0


# ------------------------------------------------------------------------ a conv chain on ONNX Runtime
def _chain(path: Path, channels: int = 16, size: int = 16, depth: int = 3) -> Path:
    """``depth`` 3x3 Convs + Relu on [1, channels, size, size], each node named ``conv{i}`` / ``relu{i}``."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(depth):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((channels, channels, 3, 3)) * 0.1).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1] * 4, name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, channels, size, size])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, channels, size, size])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _reorders_or_skip(path: Path, config: SessionConfig) -> list[onnx.NodeProto]:
    """The layout kernels of the chain's optimized graph; skip where ONNX Runtime inserts none on this CPU (the
    NCHWc transformer needs a blocked-convolution kernel for it)."""
    pytest.importorskip("onnxruntime")
    nodes = [n for n in optimized_graph(path, config).node if n.op_type in ("ReorderInput", "ReorderOutput")]
    if not nodes:
        pytest.skip("ONNX Runtime inserts no NCHWc reorders on this CPU")
    return nodes


def test_a_conv_chain_runs_one_pair_of_reorders_and_its_prediction_adds_them_once(tmp_path: Path) -> None:
    config = SessionConfig(threads=1)
    path = _chain(tmp_path / "chain.onnx")
    in_graph = _reorders_or_skip(path, config)
    graph = load_model(path)
    found = layout_kernels(graph, config)
    assert len(found) == len(in_graph) == 2  # the chain stays blocked: one ReorderInput, one ReorderOutput
    by_op = {node.op_type: node.name for node in in_graph}
    groups = dict(kernel_groups(graph, config))
    first = next(layers for layers in groups.values() if "conv0" in layers)
    last = next(layers for layers in groups.values() if "conv2" in layers)
    assert {name: (nbytes, layers) for name, nbytes, layers in found} == {
        by_op["ReorderInput"]: (16 * 16 * 16 * 4, first), by_op["ReorderOutput"]: (16 * 16 * 16 * 4, last)}

    predictor = roofline_predictor(3.0, reorders=ReorderFit(per_kernel_us=10.0, us_per_mib=0.0, samples=5))
    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    kernels = [(name, kernel_family([n.op_type for n in graph.layers if n.id in layers]), layers)
               for name, layers in groups.items()]
    without = predict_model(predictor, graph, estimate, kernels, "onnxruntime")
    pred = predict_model(predictor, graph, estimate, kernels, "onnxruntime", reorders=found)
    reorders = [k for k in pred.kernels if k.family == REORDER_FAMILY]
    assert len(reorders) == 2 and all(k.latency_us == 10.0 for k in reorders)
    assert pred.latency_us == pytest.approx(without.latency_us + 20.0)
    assert sum(pred.layers_us.values()) == pytest.approx(pred.latency_us - pred.overhead_us)
    # a predictor fitted without boundary timings predicts no reorder rather than 0-µs ones
    empty = predict_model(roofline_predictor(3.0, reorders=ReorderFit()), graph, estimate, kernels, "onnxruntime",
                          reorders=found)
    assert empty.latency_us == without.latency_us and len(empty.kernels) == len(without.kernels)


def test_each_conv_of_the_chain_is_timed_without_the_reorders_it_pays_alone(tmp_path: Path) -> None:
    config = SessionConfig(threads=1)
    path = _chain(tmp_path / "chain.onnx")
    _reorders_or_skip(path, config)
    _, kernels, _ = model_kernels(path, None, config, OrtKernels())
    convs = [k for k in kernels if k.family == "conv"]
    assert len(convs) == 3
    timings, _, _ = time_kernels(convs, SampleStore(None), TimingConfig(visits=3), runner=OrtKernels())
    assert len(timings) == 3
    for t in timings:
        # alone each blocked conv reads x through a ReorderInput and writes through a ReorderOutput
        assert t.boundary_kernels == 2 and t.boundary_bytes == 2 * 16 * 16 * 16 * 4
        assert t.boundary_us >= 0.0  # less the profiler floor: a 16 KiB pair may read as little as the floor
        # net of the per-call overhead timed beside it
        assert t.latency_us == pytest.approx(max(float(np.median(t.samples_us)) - t.overhead_us - t.boundary_us, 0.05))


def test_the_predictor_file_keeps_the_reorder_fit(tmp_path: Path) -> None:
    fit = ReorderFit(per_kernel_us=1.5, us_per_mib=42.0, samples=7, median_abs_error=0.1, residual_low=-0.2,
                     residual_high=0.3)
    loaded = load_predictor(roofline_predictor(3.0, reorders=fit).save(tmp_path / "p.json"))
    assert loaded.reorders == fit
    assert math.isclose(loaded.reorders.predict_us(MIB // 2), 1.5 + 21.0)


def test_a_kernel_model_of_no_layout_kernels_costs_nothing_at_its_boundary(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    (timing,), _, _ = time_kernels([relu_kernel()], SampleStore(None), TimingConfig(visits=3), runner=OrtKernels())
    assert (timing.boundary_us, timing.boundary_kernels, timing.boundary_bytes) == (0.0, 0, 0)
    assert timing.latency_us == pytest.approx(max(float(np.median(timing.samples_us)) - timing.overhead_us, 0.05))


def test_a_pool_the_model_runs_unblocked_but_alone_blocked_keeps_the_reorders_it_paid_alone(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    config = SessionConfig(threads=1)
    nodes = [helper.make_node("Div", ["x", "six"], ["d"], name="div"),
             helper.make_node("GlobalAveragePool", ["d"], ["y"], name="gap")]
    graph_proto = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 8, 8])],
                                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])],
                                    [numpy_helper.from_array(np.array(6.0, dtype=np.float32), "six")])
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "se.onnx"
    onnx.save(model, path)
    in_model = {n.op_type: n.domain for n in optimized_graph(path, config).node}
    alone = tmp_path / "gap.onnx"
    gap = helper.make_graph([nodes[1]], "gap", [helper.make_tensor_value_info("d", TensorProto.FLOAT, [1, 64, 8, 8])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])])
    onnx.save(helper.make_model(gap, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), alone)
    alone_layout = [n for n in optimized_graph(alone, config).node if n.op_type in ("ReorderInput", "ReorderOutput")]
    if in_model.get("GlobalAveragePool") != "" or not alone_layout:
        pytest.skip("ONNX Runtime does not block this pool alone while leaving it unblocked in its model here")
    found = layout_kernels(load_model(path), config)
    assert sorted((nbytes, layers) for _, nbytes, layers in found) == [(64 * 4, ("gap",)), (64 * 8 * 8 * 4, ("gap",))]
    assert all(":alone" in name for name, _, _ in found)


def test_an_interval_holds_its_own_prediction_when_the_residuals_lie_on_one_side(tmp_path: Path) -> None:
    # held-out residuals all above 0 (every kernel measured slower than fitted): the interval still holds the value
    graph = load_model(_chain(tmp_path / "chain.onnx"))
    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    kernels = [(n.id, "conv", (n.id,)) for n in graph.layers]
    one_sided = ReorderFit(per_kernel_us=10.0, us_per_mib=0.0, samples=5, residual_low=0.2, residual_high=0.6)
    predictor = roofline_predictor(3.0, residuals=(0.2, 0.6), reorders=one_sided)
    pred = predict_model(predictor, graph, estimate, kernels, "test", reorders=[("r0", 4096, (graph.layers[0].id,))])
    assert {k.family for k in pred.kernels} == {"all", "reorder"}  # the fit used, and the layout kernel
    for k in pred.kernels:
        assert k.low_us == pytest.approx(k.latency_us)  # widened to the prediction itself
        assert k.high_us > k.latency_us
    assert pred.low_us <= pred.latency_us <= pred.high_us
