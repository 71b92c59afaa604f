"""The predictor's normalisation features and a model's fixed costs (issue #39): a normalisation's class and shape
tell a 40 x 18,710 Softmax from an LRN; a model's call costs are timed as ``profile`` times a model, and a kernel is
taken from its time alone to its time in its model (its own inputs and outputs bound there, a dispatch here)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from _predictors import FakeKernels, roofline_predictor
from layerscope.analysis.predictor import (
    FEATURES,
    Caches,
    kernel_features,
    kernel_io,
    load_predictor,
    norm_shape,
    predict_model,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import (
    CALL_MODELS,
    CallCosts,
    KernelModel,
    TimingConfig,
    attention_softmax_kernel,
    call_costs,
    call_model,
    elementwise_kernel,
    family_configs,
    fit_call_costs,
    kernel_family,
    norm_kernel,
    spatial_reduce_kernel,
    time_kernels,
)
from layerscope.measure.runners import Job, Runner
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.targets import load_profile

F32 = TensorProto.FLOAT


def _graph(model_bytes: bytes, tmp_path: Path, name: str = "k") -> Graph:
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model_bytes)
    return load_model(path)


def _norm(kernel: KernelModel, tmp_path: Path) -> tuple[float, float, float]:
    graph = _graph(kernel.model_bytes, tmp_path)
    return norm_shape(graph, graph.layers)


# ----------------------------------------------------------------------------------------- norm features
def test_a_normalisation_kernel_states_its_class_and_what_it_reduces_over(tmp_path: Path) -> None:
    assert _norm(norm_kernel(40, 512, "softmax"), tmp_path) == (4.0, 512.0, 40.0)
    assert _norm(norm_kernel(64, 384, "layernorm"), tmp_path) == (2.0, 384.0, 64.0)
    # the residual Add of two activations before the LayerNorm: ONNX Runtime's SkipLayerNormalization
    assert _norm(norm_kernel(64, 384, "skiplayernorm"), tmp_path) == (3.0, 384.0, 64.0)
    assert _norm(norm_kernel(16, 128, "reducemean"), tmp_path) == (5.0, 128.0, 16.0)
    # attention scores [1, 12, 64, 64]: each row of 64 normalised, 12 x 64 rows
    assert _norm(attention_softmax_kernel(12, 64), tmp_path) == (4.0, 64.0, 768.0)
    # an SE block's squeeze: [1, 32, 14, 14] over H and W: 196 each, 32 rows
    assert _norm(spatial_reduce_kernel(14, 32, "ReduceMean"), tmp_path) == (5.0, 196.0, 32.0)


def test_lrn_and_a_decomposed_layernorm_are_classes_of_their_own(tmp_path: Path) -> None:
    lrn = helper.make_node("LRN", ["x"], ["y"], size=5)
    model = helper.make_model(helper.make_graph([lrn], "lrn", [helper.make_tensor_value_info("x", F32, [1, 8, 4, 4])],
                                                [helper.make_tensor_value_info("y", F32, [1, 8, 4, 4])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = _graph(model.SerializeToString(), tmp_path, "lrn")
    assert norm_shape(graph, graph.layers) == (6.0, 5.0, 128.0)  # a window of 5 channels around each of 128
    # LayerNorm written out over the last axis of [1, 10, 32]: ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]), helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["p"]), helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(1e-5, np.float32), "eps")]
    model = helper.make_model(helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", F32, [1, 10, 32])],
                                                [helper.make_tensor_value_info("y", F32, [1, 10, 32])], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = _graph(model.SerializeToString(), tmp_path, "ln")
    # a row normalisation (2), not a reduction (5); its eps Add reads a constant: not a residual (3)
    assert norm_shape(graph, graph.layers) == (2.0, 32.0, 10.0)
    assert norm_shape(graph, graph.layers[:1]) == (5.0, 32.0, 10.0)  # the ReduceMean alone is a reduction


def test_the_norm_features_are_the_last_features(tmp_path: Path) -> None:
    graph = _graph(norm_kernel(40, 2048, "softmax").model_bytes, tmp_path)
    values = kernel_features(graph, estimate_graph(graph, load_profile("host"), "fp32"), [n.id for n in graph.layers],
                             Caches(1 << 20, 32 << 20, "test"))
    named = dict(zip(FEATURES, values.tolist(), strict=True))
    assert named["norm_kind"] == 4.0
    assert named["log_reduced"] == pytest.approx(math.log(2048))
    assert named["log_rows"] == pytest.approx(math.log(40))


def test_contrib_normalisations_and_every_reduction_are_norm_kernels() -> None:
    for op in ("SkipLayerNormalization", "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization",
               "ReduceL2", "ReduceMin", "ReduceLogSumExp"):
        assert kernel_family([op]) == "norm", op
    assert kernel_family(["Add", "LayerNormalization"]) == "norm"


def test_the_norm_space_holds_what_real_models_run() -> None:
    labels = [c.build().label for c in family_configs("norm")]
    assert len(labels) == len(set(labels))
    # 7 rows x 7 cols x (softmax, layernorm) x (fp32, fp16) as before, + 7 x 7 x (skip, reducemean) fp32, + 5 head
    # counts x 6 token counts, + 4 x 5 vocabulary softmaxes, + 5 sizes x 6 channel counts x (ReduceMean, ReduceMax),
    # + 3 x 2 x 2 inner runs x (ReduceL2, ReduceSum) short reductions, + 7 x 6 QDQ softmaxes (predictor 6)
    assert len(labels) == 196 + 98 + 30 + 20 + 60 + 24 + 42
    assert sum("skiplayernorm" in label for label in labels) == 49
    assert "norm rows=40 cols=16384 softmax" in labels  # a recogniser's classes, past the 1024 of before
    assert "norm heads=12 tokens=64 attention-softmax" in labels
    assert "norm hw=7 c=512 ReduceMean axes=hw" in labels


# ------------------------------------------------------------------------------------------- call costs
def test_call_costs_recover_the_input_output_and_node_slopes() -> None:
    # P50s built by hand: 4 us per call + 1.0 per input + 0.5 per output + 0.25 per node
    def p50(kind: str, n: int) -> float:
        inputs, outputs, nodes = {"fan": (n, n, n), "chain": (1, 1, n), "sum": (n, 1, 1)}[kind]
        return 4.0 + 1.0 * inputs + 0.5 * outputs + 0.25 * nodes

    costs = fit_call_costs({model: p50(*model) for model in CALL_MODELS})
    assert costs.empty_us == pytest.approx(5.75)
    assert costs.input_us == pytest.approx(1.0)
    assert costs.output_us == pytest.approx(0.5)
    assert costs.node_us == pytest.approx(0.25)
    # a 3-input, 2-output kernel timed alone at 10 us (the empty model's call taken off): 2 further inputs and 1
    # further output were the call's, not the kernel's: 10 - 2 - 0.5, plus the dispatch the subtraction took off
    assert costs.in_model(10.0, 3, 2) == pytest.approx(7.75)
    assert costs.in_model(0.5, 3, 2) == pytest.approx(0.25)  # never below a dispatch
    # a model of 2 inputs and 3 outputs: the empty call less its node, + 1 input + 2 outputs
    assert costs.model_us(2, 3) == pytest.approx(5.75 - 0.25 + 1.0 + 1.0)
    with pytest.raises(ValueError, match="empty model"):
        fit_call_costs({("chain", 2): 1.0})


def test_call_costs_are_refused_when_negative_and_round_trip() -> None:
    costs = CallCosts(6.0, 0.5, 0.25, 0.125, "test")
    assert CallCosts.from_json(costs.to_json()) == costs
    with pytest.raises(ValueError):
        CallCosts.from_json({**costs.to_json(), "input_us": -1.0})


class _CountingRunner:
    """A fake runner: each call of a model takes 3 us + 2 per input + 1 per output + 0.5 per node, + ``drift_us``
    for every call made before it on the machine (``clock``: the calls so far, shared by the runners)."""

    def __init__(self, graph: Graph, clock: list[int] | None = None, drift_us: float = 0.0) -> None:
        self.graph, self.clock, self.drift_us = graph, clock if clock is not None else [0], drift_us

    @property
    def identity(self) -> Mapping[str, Any]:
        return {"runner": "fake"}

    def measure(self, job: Job) -> float:
        self.clock[0] += 1
        return (3.0 + 2.0 * len(self.graph.inputs) + 1.0 * len(self.graph.outputs) + 0.5 * len(self.graph.layers)
                + self.drift_us * self.clock[0])

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        return None

    def close(self) -> None:
        pass


class _FakeKernels(FakeKernels):
    def __init__(self, drift_us: float = 0.0) -> None:
        self.clock, self.drift_us = [0], drift_us

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> _CountingRunner:
        assert timing.visit_warmup == 0  # back to back, as profile runs a model
        return _CountingRunner(graph, self.clock, self.drift_us)


def test_call_costs_time_the_call_models_on_the_runner() -> None:
    costs = call_costs(_FakeKernels(), runs=3)
    assert costs.empty_us == pytest.approx(6.5)
    assert (costs.input_us, costs.output_us, costs.node_us) == pytest.approx((2.0, 1.0, 0.5))
    assert "call models" in costs.source


def test_call_costs_read_every_model_over_the_same_minutes_of_a_drifting_machine() -> None:
    # each call 0.01 us slower than the one before: timed one model after the other, the 12 models' P50s would lie
    # ~2 us apart in time order (fan x1 first, sum x8 last) and tilt every slope; taken in turns (one order, then
    # the reverse), each P50 is read over the whole timing and the slopes stand
    runner = _FakeKernels(drift_us=0.01)
    costs = call_costs(runner, runs=200)
    assert runner.clock[0] == 200 * len(CALL_MODELS)
    assert (costs.input_us, costs.output_us, costs.node_us) == pytest.approx((2.0, 1.0, 0.5), abs=0.05)


def test_call_models_are_what_they_say(tmp_path: Path) -> None:
    fan = _graph(call_model("fan", 4), tmp_path, "fan")
    chain = _graph(call_model("chain", 4), tmp_path, "chain")
    total = _graph(call_model("sum", 4), tmp_path, "sum")
    assert (len(fan.inputs), len(fan.outputs), len(fan.layers)) == (4, 4, 4)
    assert (len(chain.inputs), len(chain.outputs), len(chain.layers)) == (1, 1, 4)
    assert (len(total.inputs), len(total.outputs), len(total.layers)) == (4, 1, 1)


# ------------------------------------------------------------------------------------------- prediction
def _two_input_model(tmp_path: Path) -> Graph:
    """x, y -> Add -> Relu -> z, and z -> Neg -> w: two model inputs and two model outputs."""
    nodes = [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["z"], name="relu"), helper.make_node("Neg", ["z"], ["w"], name="neg")]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info(n, F32, [1, 8]) for n in ("x", "y")],
                              [helper.make_tensor_value_info(n, F32, [1, 8]) for n in ("z", "w")])
    return _graph(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(),
                  tmp_path, "two")


def test_kernel_io_counts_what_a_kernel_is_fed_and_gives(tmp_path: Path) -> None:
    graph = _two_input_model(tmp_path)
    assert kernel_io(graph, ["add"]) == (2, 1)
    assert kernel_io(graph, ["add", "relu"]) == (2, 1)  # z: read by neg and a model output
    assert kernel_io(graph, ["relu", "neg"]) == (1, 2)  # z and w both leave it


def test_a_prediction_with_call_costs_adds_the_model_call_and_moves_each_kernel(tmp_path: Path) -> None:
    graph = _two_input_model(tmp_path)
    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    kernels: Sequence[tuple[str, str, tuple[str, ...]]] = [("k0", "elementwise", ("add", "relu")),
                                                            ("k1", "elementwise", ("neg",))]
    bare = predict_model(roofline_predictor(9.0, calls=CallCosts()), graph, estimate, kernels, "test")
    assert bare.overhead_us == 9.0  # not measured: the runner's per-call overhead, the kernels as timed
    assert bare.latency_us == pytest.approx(9.0 + sum(k.isolated_us for k in bare.kernels))
    calls = CallCosts(empty_us=6.0, input_us=0.5, output_us=0.25, node_us=0.125, source="test")
    pred = predict_model(roofline_predictor(9.0, calls=calls), graph, estimate, kernels, "test")
    # the model: 6 - 0.125 (the empty model's node) + 1 further input (0.5) + 1 further output (0.25)
    assert pred.overhead_us == pytest.approx(6.625)
    k0, k1 = pred.kernels
    # k0 alone was fed 2 inputs: one more than the empty model, whose cost is the model's now; + a dispatch
    assert k0.latency_us == pytest.approx(max(0.0, k0.isolated_us - 0.5) + 0.125)
    assert k1.latency_us == pytest.approx(k1.isolated_us + 0.125)  # one input, one output: as the empty model
    assert pred.latency_us == pytest.approx(6.625 + k0.latency_us + k1.latency_us)
    assert sum(pred.layers_us.values()) + pred.overhead_us == pytest.approx(pred.latency_us)


def test_a_predictor_file_keeps_its_call_costs(tmp_path: Path) -> None:
    calls = CallCosts(6.0, 0.5, 0.25, 0.125, "test")
    path = roofline_predictor(9.0, calls=calls).save(tmp_path / "p.json")
    assert load_predictor(path).calls == calls


# ------------------------------------------------------------------------------- the overhead beside a kernel
class _DriftingRunner:
    """A machine whose per-call overhead grows by 1 µs at every run (its speed drifting while kernels are timed):
    the empty (overhead) model costs the overhead alone, a kernel its ``work_us`` on top."""

    def __init__(self, clock: list[float], work_us: float) -> None:
        self.clock, self.work_us = clock, work_us

    @property
    def identity(self) -> Mapping[str, Any]:
        return {"runner": "drifting"}

    def measure(self, job: Job) -> float:
        self.clock[0] += 1.0
        return self.clock[0] + (0.0 if job.label == "empty" else self.work_us)

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        return None

    def close(self) -> None:
        pass


class _DriftingKernels(FakeKernels):
    def __init__(self) -> None:
        self.clock = [0.0]

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        return _DriftingRunner(self.clock, 0.0 if len(graph.layers) == 1 and graph.layers[0].op_type == "Relu"
                               and graph.inputs[0].shape == (1, 1) else 3.0)


def test_each_kernel_is_timed_net_of_the_overhead_timed_beside_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = [elementwise_kernel(n, "Add", True) for n in (256, 512, 1024)]
    runner = _DriftingKernels()
    written: list[str] = []
    write = SampleStore._write
    monkeypatch.setattr(SampleStore, "_write", lambda self, key, *a: (written.append(key), write(self, key, *a)))
    timings, first_us, _ = time_kernels(kernels, SampleStore(tmp_path / "cache"), TimingConfig(visits=5),
                                        runner=runner)
    # a kernel's five visits and the five overhead samples beside them are written once each, after the visits
    assert len([k for k in written if k.endswith(":paired-overhead")]) == 3 and len(written) == 1 + 3 + 3
    # the overhead timed first (runs 1-5: median 3) is long gone by the kernels' turn: each kernel's own is taken
    assert first_us == 3.0
    assert [t.overhead_us for t in timings] == sorted({t.overhead_us for t in timings}) and timings[0].overhead_us > 3
    # each visit: one overhead sample, then the kernel one run later (+1 µs of drift): 3 µs of work + 1
    assert [t.latency_us for t in timings] == pytest.approx([4.0, 4.0, 4.0])
    # the overhead samples are cached with the kernel's: read again, nothing is timed and nothing moves
    runs = runner.clock[0]
    again, _, _ = time_kernels(kernels, SampleStore(tmp_path / "cache"), TimingConfig(visits=5), runner=runner)
    assert [t.latency_us for t in again] == [t.latency_us for t in timings] and all(t.cached for t in again)
    assert runner.clock[0] == runs
