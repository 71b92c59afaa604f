"""The predictor's in-model context is applied only to models inside the calibration models' range (issue #39).

No timing: the predictor is a constant model (every kernel predicted alone at its roofline time on the ``host``
profile), kernels are one per layer, and the calibration models' whole P50 is synthetic (a known factor and
per-kernel term), so each number below follows from the roofline and the fit."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerscope.workflows.calibrate as calibrate_workflow
from layerscope.analysis.predictor import (
    FEATURES,
    FamilyFit,
    ModelPrediction,
    Predictor,
    fit_context,
    load_predictor,
    predict_model,
    prediction_section,
    transfers,
)
from layerscope.analysis.trees import Ensemble, Tree
from layerscope.estimator import estimate_graph
from layerscope.estimator.types import Estimate
from layerscope.measure.kernels import FAMILIES, kernel_family
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.targets import load_profile

FACTOR, PER_KERNEL_US, OVERHEAD_US = 1.3, 40.0, 10.0


def _cnn(path: Path, channels: int, size: int, depth: int) -> Path:
    """``depth`` 3x3 convolutions of ``channels`` channels on a ``size`` x ``size`` map: kernels of 10s-100s µs."""
    rng = np.random.default_rng(channels + size + depth)
    nodes, inits, prev = [], [], "x"
    for i in range(depth):
        w = numpy_helper.from_array(rng.standard_normal((channels, channels, 3, 3)).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"))
        prev = f"c{i}"
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [1, channels, size, size])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _tiny_mlp(path: Path, layers: int = 6) -> Path:
    """``layers`` 16x16 MatMul + Relu pairs on one row: kernels well under a µs."""
    rng = np.random.default_rng(1)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _constant_predictor() -> Predictor:
    """A predictor whose every kernel alone is its roofline time: log ratio 0 in every leaf."""
    leaf = Tree(np.array([0]), np.array([0.0]), np.array([-1]), np.array([-1]), np.array([0.0]))
    model = Ensemble(0.0, 1.0, "sum", len(FEATURES) + len(FAMILIES), (leaf,))
    return Predictor({"runner": "test"}, "host", OVERHEAD_US, {"all": FamilyFit("all", 50, 0.0, 1.0, 5, -0.1, 0.1,
                                                                                  model)})


def _predict(predictor: Predictor, graph: Graph, estimate: Estimate) -> ModelPrediction:
    """One kernel per layer (as where no grouping runtime is installed)."""
    kernels = [(n.id, kernel_family([n.op_type]), (n.id,)) for n in graph.layers]
    return predict_model(predictor, graph, estimate, kernels, "none")


def _load(path: Path) -> tuple[Graph, Estimate]:
    graph = load_model(path)
    return graph, estimate_graph(graph, load_profile("host"), "fp32")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Predictor, Path]:
    """A predictor whose context was fitted by ``calibrate``'s :func:`model_context` on four CNNs whose whole P50
    is exactly ``FACTOR`` x their kernels alone + ``PER_KERNEL_US`` per kernel + the overhead."""
    tmp = tmp_path_factory.mktemp("context")
    cnns = [_cnn(tmp / f"cnn{i}.onnx", c, s, d) for i, (c, s, d) in enumerate(((32, 28, 4), (64, 28, 8),
                                                                                (64, 56, 6), (128, 28, 10)))]
    bare = _constant_predictor()
    wholes = []
    for path in cnns:
        pred = _predict(bare, *_load(path))
        alone = sum(k.isolated_us for k in pred.kernels)
        wholes.append((path, FACTOR * alone + PER_KERNEL_US * len(pred.kernels) + OVERHEAD_US))
    patch = pytest.MonkeyPatch()
    patch.setattr(calibrate_workflow, "predict_path", _predict)
    try:
        context = calibrate_workflow.model_context(bare, wholes, {}, load_profile("host"))
    finally:
        patch.undo()
    return dataclasses.replace(bare, context=context), tmp


def test_the_context_fitted_on_cnns_records_their_range(fitted: tuple[Predictor, Path]) -> None:
    predictor, _ = fitted
    ctx = predictor.context
    assert ctx.applied and ctx.models == 4
    assert ctx.factor == pytest.approx(FACTOR) and ctx.per_kernel_us == pytest.approx(PER_KERNEL_US)
    support = {name: (low, high) for name, low, high in ctx.support}
    assert support["kernels"] == (4.0, 10.0)  # the CNNs' depths
    assert set(support) == {"kernels", "median_kernel_us", "kernels_us"}
    assert support["median_kernel_us"][0] > 10.0  # the smallest CNN's convolutions: tens of µs each


def test_a_model_of_us_kernels_is_not_taken_into_a_cnn_context(fitted: tuple[Predictor, Path]) -> None:
    predictor, tmp = fitted
    graph, est = _load(_tiny_mlp(tmp / "mlp.onnx"))
    pred = _predict(predictor, graph, est)
    alone = [k.isolated_us for k in pred.kernels]
    assert len(alone) == 12 and max(alone) < 1.0
    # the kernels summed as predicted alone, plus the overhead: the context is not applied
    assert not pred.context_applied and "outside the calibration models' range" in pred.context_why
    assert pred.latency_us == pytest.approx(sum(alone) + OVERHEAD_US)
    assert [k.latency_us for k in pred.kernels] == alone
    # a small model runs as its kernels alone (no per-kernel term): with the context it would be 40 us x 12 over
    truth = sum(alone) + OVERHEAD_US
    everywhere = sum(predictor.context.apply(v) for v in alone) + OVERHEAD_US
    assert abs(pred.latency_us / truth - 1) < 1e-9 and everywhere / truth - 1 > 10
    section = prediction_section(pred, "p.json", predictor)
    assert section["context"]["applied"] is False and section["context"]["transfers"] is True
    assert "median kernel alone" in section["context"]["why"]


def test_a_cnn_inside_the_range_is_taken_into_the_context(fitted: tuple[Predictor, Path]) -> None:
    predictor, tmp = fitted
    graph, est = _load(_cnn(tmp / "like.onnx", 64, 28, 6))
    pred = _predict(predictor, graph, est)
    alone = [k.isolated_us for k in pred.kernels]
    assert pred.context_applied and "inside the calibration models' range" in pred.context_why
    assert pred.latency_us == pytest.approx(FACTOR * sum(alone) + PER_KERNEL_US * 6 + OVERHEAD_US)
    assert prediction_section(pred, "p.json", predictor)["context"]["applied"] is True


def test_the_range_round_trips_and_a_file_without_it_applies_to_no_model(fitted: tuple[Predictor, Path]) -> None:
    predictor, tmp = fitted
    path = predictor.save(tmp / "p.json")
    assert load_predictor(path).context == predictor.context
    data = json.loads(path.read_text())
    bare = tmp / "no-range.json"
    bare.write_text(json.dumps(dict(data, context={k: v for k, v in data["context"].items() if k != "support"})))
    ctx = load_predictor(bare).context
    assert ctx.applied and not ctx.support
    assert ctx.applies_to([500.0] * 6) == (False, "the predictor file records no range of calibration models to "
                                                  "check this model against")
    assert "NOT applied" in ctx.describe()
    bad = tmp / "bad-range.json"
    bad.write_text(json.dumps(dict(data, context=dict(data["context"], support={"kernels": [10, 4]}))))
    with pytest.raises(Exception, match="malformed"):
        load_predictor(bad)


def test_the_range_check_reads_each_measure() -> None:
    # three models, exact factor 1.1: the fit transfers; range kernels 10..80, median 20..50 us, sum 600..2000 us
    ctx = fit_context([(1100.0, 1000.0, 50), (2200.0, 2000.0, 80), (660.0, 600.0, 10)], 0.0,
                      medians_us=[20.0, 25.0, 50.0])
    assert ctx.applied and ctx.support == (("kernels", 10.0, 80.0), ("median_kernel_us", 20.0, 50.0),
                                           ("kernels_us", 600.0, 2000.0))
    assert ctx.applies_to([30.0] * 40)[0]  # 40 kernels, median 30, sum 1200: inside on all three
    few, why = ctx.applies_to([300.0] * 3)  # 3 kernels of 300 us: too few, too large a median
    assert not few and "kernels 3 (calibration models 10 to 80)" in why and "median kernel alone 300 us" in why
    assert not ctx.applies_to([30.0] * 100)[0]  # 100 kernels: more than any calibration model had
    assert not ctx.applies_to([])[0]
    with pytest.raises(ValueError, match="median"):
        fit_context([(1100.0, 1000.0, 50)], 0.0, medians_us=[1.0, 2.0])


def test_a_context_better_by_its_median_alone_does_not_transfer() -> None:
    # nine calibration models: held out, the context is better on 5 and worse on 4, its median error 5% against
    # 8%: a lower median within the models' own noise, not a context shown to hold for other models
    alone = [0.10, 0.02, 0.09, 0.03, 0.07, 0.08, 0.12, 0.071, 0.11]
    held = [0.03, 0.122, 0.032, 0.123, 0.105, 0.034, 0.05, 0.08, 0.048]
    assert float(np.median(held)) == 0.05 and float(np.median(alone)) == 0.08
    applied, why = transfers(held, alone)
    assert not applied and "better on 5 of them" in why and "6 models better" in why
    # the same with one more model better (6 of 9, two thirds): it transfers
    held[7] = 0.06
    applied, why = transfers(held, alone)
    assert applied and "better on 6 of them" in why and "does not transfer" not in why
