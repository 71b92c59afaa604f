"""Recurrent layers and int8 matrix products in the kernel predictor (issue #39): the ``recurrent`` family
(LSTM, GRU, RNN, ONNX Runtime's DynamicQuantizeLSTM) and the int8 forms of the ``matmul`` family build, run as
one ONNX Runtime kernel each, classify to their family, and their features say what the generic ones do not
(the steps a recurrent layer takes one after another, int8 against fp32)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.analysis.predictor import FEATURES, Caches, kernel_features, recurrent_shape
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import (
    FAMILIES,
    QUANT_MATMUL_FORMS,
    KernelModel,
    TimingConfig,
    _configs,
    family_configs,
    kernel_family,
    matmul_kernel,
    qdq_batched_matmul_kernel,
    quant_matmul_kernel,
    recurrent_kernel,
    recurrent_macs,
    time_kernels,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import OrtKernels, kernel_groups, optimized_graph
from layerscope.targets import load_profile

FAST = TimingConfig(visits=3, runs_per_visit=1, visit_warmup=0)
CACHES = Caches(1 << 20, 32 << 20, "test")


def _graph(kernel: KernelModel, tmp_path: Path) -> Graph:
    path = tmp_path / f"{kernel.digest[:12]}.onnx"
    path.write_bytes(kernel.model_bytes)
    return load_model(path)


def _features(graph: Graph, layers: list[str] | None = None) -> dict[str, float]:
    est = estimate_graph(graph, load_profile("host"), "fp32")
    values = kernel_features(graph, est, layers or [n.id for n in graph.layers], CACHES)
    return dict(zip(FEATURES, values.tolist(), strict=True))


def _one_kernel_of(kernel: KernelModel, tmp_path: Path) -> tuple[Graph, list[str]]:
    """The kernel's graph and the op types of ONNX Runtime's optimized graph, asserting that the runtime runs
    all the kernel's layers as one group (one kernel)."""
    graph = _graph(kernel, tmp_path)
    groups = kernel_groups(graph, SessionConfig(threads=1))
    assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}, kernel.label
    assert kernel_family([n.op_type for n in graph.layers]) == kernel.family, kernel.label
    runs = [n.op_type for n in optimized_graph(Path(graph.path), SessionConfig(threads=1)).node]
    return graph, runs


# ------------------------------------------------------------------------------------------- recurrent
@pytest.mark.parametrize(("cell", "dtype", "runs"), [("LSTM", "fp32", "LSTM"), ("GRU", "fp32", "GRU"),
                                                     ("RNN", "fp32", "RNN"), ("LSTM", "int8", "DynamicQuantizeLSTM")])
def test_recurrent_kernels_are_one_onnx_runtime_kernel_of_the_recurrent_family(cell: str, dtype: str, runs: str,
                                                                              tmp_path: Path) -> None:
    kernel = recurrent_kernel(4, 8, 16, cell=cell, bidirectional=True, dtype=dtype)
    assert kernel.family == "recurrent" and "recurrent" in FAMILIES
    graph, optimized = _one_kernel_of(kernel, tmp_path)
    assert optimized == [runs]
    assert graph.tensor("y") is not None and graph.tensor("y").shape == (4, 2, 1, 16)  # type: ignore[union-attr]
    node = graph.layers[0]
    assert recurrent_shape(graph, node) == (4, 2, 8, 16)
    # the roofline's MACs: gates·H·(I + H) per step and direction: 16·(8 + 16) = 384 per gate row block
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[cell]
    macs = gates * 384 * 4 * 2
    assert recurrent_macs(4, 8, 16, cell=cell, bidirectional=True) == macs
    est = estimate_graph(graph, load_profile("host"), "fp32")
    assert est.costs[0].macs == macs
    timed, _, _ = time_kernels([kernel], SampleStore(tmp_path / "cache"), FAST, runner=OrtKernels())
    assert len(timed) == 1 and timed[0].latency_us > 0  # ONNX Runtime loads and runs it


def test_the_features_of_a_recurrent_layer_say_its_sizes_steps_and_dtype(tmp_path: Path) -> None:
    # LSTM seq 4, I 8, H 16, both directions: MACs 4·16·(8+16)·4·2 = 12,288; 8 steps one after another;
    # channels are its input and hidden sizes (X's dim 1 is the batch, Y's the directions)
    fp32 = _features(_graph(recurrent_kernel(4, 8, 16, cell="LSTM", bidirectional=True), tmp_path))
    assert fp32["log_macs"] == pytest.approx(math.log1p(12_288))
    assert fp32["log_steps"] == pytest.approx(math.log(8))
    assert fp32["log_in_channels"] == pytest.approx(math.log(8))
    assert fp32["log_out_channels"] == pytest.approx(math.log(16))
    assert fp32["elem_bytes"] == 4.0
    forward = _features(_graph(recurrent_kernel(4, 8, 16, cell="LSTM", bidirectional=False), tmp_path))
    assert forward["log_steps"] == pytest.approx(math.log(4))
    int8 = _features(_graph(recurrent_kernel(4, 8, 16, cell="LSTM", bidirectional=True, dtype="int8"), tmp_path))
    assert int8["log_macs"] == fp32["log_macs"] and int8["log_steps"] == fp32["log_steps"]
    assert int8["elem_bytes"] == 1.0  # int8 W and R
    plain = _features(_graph(matmul_kernel(1, 16, 64, 64, bias=True, weights=True), tmp_path))
    assert plain["log_steps"] == 0.0  # one step: every kernel that is not recurrent


def test_a_kernel_holding_a_recurrent_layer_and_its_initial_state_is_recurrent_by_the_layer(tmp_path: Path) -> None:
    # ONNX Runtime folds the Concat building an LSTM's initial state into the LSTM's kernel (ddddocr-rec): the
    # kernel is the LSTM's family, and its main node (channels, steps) the LSTM, not the Concat
    hidden, size, seq = 16, 8, 6
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Concat", ["h", "h"], ["h0"], axis=0),
             helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0"], ["y"], hidden_size=hidden,
                              direction="bidirectional")]
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
             (("w", (2, 4 * hidden, size)), ("r", (2, 4 * hidden, hidden)), ("b", (2, 8 * hidden)))]
    model = helper.make_model(helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, size]),
                        helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 1, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, 2, 1, hidden])], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "lstm-state.onnx"
    onnx.save(model, path)
    graph = load_model(path)
    assert kernel_family([n.op_type for n in graph.layers]) == "recurrent"
    assert kernel_family(["Unsqueeze", "Concat", "ConstantOfShape", "LSTM"]) == "recurrent"
    features = _features(graph)
    assert features["log_in_channels"] == pytest.approx(math.log(size))
    assert features["log_out_channels"] == pytest.approx(math.log(hidden))
    assert features["log_steps"] == pytest.approx(math.log(2 * seq))


def test_the_recurrent_space_spans_cells_directions_steps_and_stays_within_its_cost_cap() -> None:
    params = [dict(c.params) for c in family_configs("recurrent")]
    assert {(p["cell"], p["dtype"]) for p in params} == {("LSTM", "fp32"), ("GRU", "fp32"), ("RNN", "fp32"),
                                                         ("LSTM", "int8")}
    assert {p["bidirectional"] for p in params} == {False, True}
    assert {p["_0"] for p in params} >= {1, 16, 512}  # one step (streaming) to long sequences
    macs = [recurrent_macs(p["_0"], p["_1"], p["_2"], cell=p["cell"], bidirectional=p["bidirectional"])
            for p in params]
    assert max(macs) <= 400_000_000
    # the first configurations of the order (what a small budget times) hold every cell
    assert {(p["cell"], p["dtype"]) for p in params[:40]} == {(p["cell"], p["dtype"]) for p in params}
    with pytest.raises(ValueError, match="int8 LSTM"):
        recurrent_kernel(4, 8, 16, cell="GRU", bidirectional=False, dtype="int8")


# ------------------------------------------------------------------------------------------ int8 matmul
@pytest.mark.parametrize(("form", "bias", "runs"), [
    ("dynamic", False, ["DynamicQuantizeMatMul"]), ("dynamic", True, ["DynamicQuantizeMatMul"]),
    ("integer", False, ["MatMulIntegerToFloat"]), ("integer", True, ["MatMulIntegerToFloat"]),
    ("qdq", False, ["QLinearMatMul"]), ("qdq", True, ["QGemm"])])
def test_int8_matmuls_are_one_onnx_runtime_kernel_of_the_matmul_family(form: str, bias: bool, runs: list[str],
                                                                      tmp_path: Path) -> None:
    kernel = quant_matmul_kernel(16, 64, 32, form=form, bias=bias)
    assert kernel.family == "matmul" and kernel.label.endswith(f"dtype=int8 form={form}")
    graph, optimized = _one_kernel_of(kernel, tmp_path)
    assert optimized == runs
    features = _features(graph)
    assert features["elem_bytes"] == 1.0
    # the product's MACs: m·k·n = 16·64·32, whatever the form
    est = estimate_graph(graph, load_profile("host"), "fp32")
    assert max(c.macs for c in est.costs) == 16 * 64 * 32


def test_int8_and_fp32_matmuls_of_one_size_differ_in_their_dtype_feature(tmp_path: Path) -> None:
    fp32 = _features(_graph(matmul_kernel(1, 16, 64, 32, bias=True, weights=True), tmp_path))
    fp16 = _features(_graph(matmul_kernel(1, 16, 64, 32, bias=True, weights=True, dtype="fp16"), tmp_path))
    int8 = [_features(_graph(quant_matmul_kernel(16, 64, 32, form=form, bias=True), tmp_path))
            for form in QUANT_MATMUL_FORMS]
    assert (fp32["elem_bytes"], fp16["elem_bytes"]) == (4.0, 2.0)
    assert [f["elem_bytes"] for f in int8] == [1.0, 1.0, 1.0]
    assert all(f["log_macs"] == fp32["log_macs"] for f in int8)
    timed, _, _ = time_kernels([quant_matmul_kernel(16, 64, 32, form=form, bias=True) for form in QUANT_MATMUL_FORMS],
                               SampleStore(tmp_path / "cache"), FAST, runner=OrtKernels())
    assert len(timed) == 3


def test_int8_matmuls_join_the_matmul_order_without_moving_its_earlier_configurations() -> None:
    # a cache timed before walks the same fp32 / fp16 kernels in the same order: the int8 ones fall between them
    order = family_configs("matmul")
    earlier = _configs("matmul")
    random.Random("18:matmul").shuffle(earlier)
    added = (quant_matmul_kernel, qdq_batched_matmul_kernel)  # predictor 5's int8 products, 6's QDQ attention ones
    kept = [c for c in order if c.builder not in added]
    assert [(c.builder, tuple(v for k, v in c.params if k.startswith("_"))) for c in kept] == [
        (f.func, f.args) for f in earlier]  # type: ignore[attr-defined]
    # spread evenly from the start: the first 100 hold the int8 share of the whole order (±1)
    share = (len(order) - len(earlier)) / len(order)
    forms = [dict(c.params).get("form", "qdq") for c in order[:100] if c.builder in added]
    assert abs(len(forms) - 100 * share) <= 1 and set(forms) == set(QUANT_MATMUL_FORMS)
