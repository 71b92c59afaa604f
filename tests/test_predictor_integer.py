"""Integer (quantized) kernels in the kernel predictor (issue #39): ConvInteger, uint8-weight products and QDQ
element-wise / Softmax / Transpose kernels build as quantization tools write them, run as the ONNX Runtime kernel
the models' ones do, join their family's order without moving what was timed before, and are told from float
kernels of the same shape by ``quant_form`` and ``unsigned_weights``, which the fits use."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from _predictors import CACHES, feature_map, kernel_graph
from layerscope.analysis.predictor import (
    FEATURES,
    KernelSample,
    fit_predictor,
    quant_form,
    refine_family,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.kernels import (
    FAMILIES,
    INT8_WEIGHTS,
    QDQ_ELEMENTWISE_OPS,
    KernelModel,
    _added_configs_6,
    conv_integer_kernel,
    conv_kernel,
    elementwise_kernel,
    family_configs,
    kernel_family,
    norm_kernel,
    power_kernel,
    qdq_batched_matmul_kernel,
    qdq_elementwise_kernel,
    qdq_transpose_kernel,
    quant_matmul_kernel,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import kernel_groups, optimized_graph
from layerscope.targets import load_profile


def _runs(kernel: KernelModel, tmp_path: Path) -> list[str]:
    """The op types ONNX Runtime's optimized graph runs for ``kernel``, asserting its layers are one kernel."""
    graph = kernel_graph(kernel, tmp_path)
    groups = kernel_groups(graph, SessionConfig(threads=1))
    assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}, kernel.label
    path = tmp_path / f"{kernel.digest[:12]}.onnx"
    return [n.op_type for n in optimized_graph(path, SessionConfig(threads=1)).node]


# ------------------------------------------------------------------------------ what ONNX Runtime runs
@pytest.mark.parametrize("weights", INT8_WEIGHTS)
def test_a_conv_integer_is_one_conv_integer_kernel_of_the_conv_family(weights: str, tmp_path: Path) -> None:
    kernel = conv_integer_kernel(14, 16, 32, k=3, stride=2, weights=weights)
    assert kernel.family == kernel_family(["ConvInteger"]) == "conv"
    assert kernel.label.endswith(f"dtype=int8 form=integer wtype={weights}")
    assert _runs(kernel, tmp_path) == ["ConvInteger"]
    graph = kernel_graph(kernel, tmp_path)
    # by hand: 7x7 outputs (stride 2, pad 1) x 32 channels x 16·3·3 MACs each
    est = estimate_graph(graph, load_profile("host"), "fp32")
    assert est.costs[0].macs == 7 * 7 * 32 * 16 * 9
    f = feature_map(graph)
    assert (f["quant_form"], f["unsigned_weights"]) == (2.0, 1.0 if weights == "uint8" else 0.0)
    assert f["kernel_area"] == 9.0 and f["stride"] == 2.0 and f["elem_bytes"] == 1.0
    assert f["log_in_channels"] == pytest.approx(math.log(16)) and f["log_out_channels"] == pytest.approx(math.log(32))


@pytest.mark.parametrize(("op", "operand", "runs"), [
    ("Add", "tensor", "QLinearAdd"), ("Add", "const", "QLinearAdd"), ("Mul", "tensor", "QLinearMul"),
    ("Mul", "const", "QLinearMul"), ("Sigmoid", "tensor", "QLinearSigmoid"),
    ("LeakyRelu", "tensor", "QLinearLeakyRelu")])
def test_qdq_elementwise_ops_run_as_one_qlinear_kernel(op: str, operand: str, runs: str, tmp_path: Path) -> None:
    kernel = qdq_elementwise_kernel(4096, op, operand=operand)
    assert kernel.family == "elementwise" and "dtype=int8 form=qdq" in kernel.label
    assert _runs(kernel, tmp_path) == [runs]
    f = feature_map(kernel_graph(kernel, tmp_path))
    assert (f["quant_form"], f["unsigned_weights"], f["elem_bytes"]) == (1.0, 0.0, 1.0)


def test_the_qdq_softmax_and_transposes_run_on_the_uint8_data(tmp_path: Path) -> None:
    softmax = norm_kernel(64, 128, "softmax", "int8")
    assert softmax.family == "norm" and softmax.label == "norm rows=64 cols=128 softmax dtype=int8 form=qdq"
    assert _runs(softmax, tmp_path) == ["QLinearSoftmax"]
    assert feature_map(kernel_graph(softmax, tmp_path))["quant_form"] == 1.0
    with pytest.raises(ValueError, match="only softmax"):
        norm_kernel(64, 128, "layernorm", "int8")
    for kind in ("heads", "keys"):
        transpose = qdq_transpose_kernel(64, 12, 32, kind=kind)
        assert transpose.family == "layout" and _runs(transpose, tmp_path) == ["Transpose"]  # the Q/DQ pair dropped


def test_attention_products_of_two_uint8_activations_run_as_one_qlinear_matmul(tmp_path: Path) -> None:
    kernel = qdq_batched_matmul_kernel(4, 16, 32, 0)  # Q·Kᵀ: [1, 4, 16, 32] by [1, 4, 32, 16]
    assert kernel.family == "matmul" and kernel.label == "matmul b=4 m=16 k=32 n=16 bias=0 w=0 dtype=int8 form=qdq"
    assert _runs(kernel, tmp_path) == ["QLinearMatMul"]
    graph = kernel_graph(kernel, tmp_path)
    est = estimate_graph(graph, load_profile("host"), "fp32")
    assert max(c.macs for c in est.costs) == 4 * 16 * 32 * 16
    f = feature_map(graph)
    assert (f["quant_form"], f["unsigned_weights"]) == (1.0, 0.0)
    assert refine_family("matmul", list(f.values())) == "matmul"  # QDQ: quantized data, no integer product


def test_a_float_pow_by_a_constant_is_one_elementwise_kernel(tmp_path: Path) -> None:
    kernel = power_kernel(4096, 3.0)
    assert kernel.family == "elementwise" and kernel.label == "elementwise n=4096 Pow exponent=3"
    assert _runs(kernel, tmp_path) == ["Pow"]
    assert feature_map(kernel_graph(kernel, tmp_path))["quant_form"] == 0.0


def test_uint8_weight_products_run_as_the_int8_ones_do_and_keep_the_int8_kernels_bytes(tmp_path: Path) -> None:
    for form, runs in (("dynamic", "DynamicQuantizeMatMul"), ("integer", "MatMulIntegerToFloat")):
        kernel = quant_matmul_kernel(16, 64, 32, form=form, bias=True, weights="uint8")
        assert kernel.label.endswith(f"form={form} wtype=uint8") and _runs(kernel, tmp_path) == [runs]
        f = feature_map(kernel_graph(kernel, tmp_path))
        assert (f["quant_form"], f["unsigned_weights"]) == (2.0, 1.0)
        # the product's channels (k = 64 in, n = 32 out), not the DynamicQuantizeLinear's before it
        assert f["log_in_channels"] == pytest.approx(math.log(64)) and f["log_out_channels"] == pytest.approx(
            math.log(32))
    # the int8-weight kernels' bytes are those the cache keyed before the weight type was a choice (predictor 5)
    assert quant_matmul_kernel(16, 256, 256, form="dynamic", bias=True).digest == (
        "6df3f8054ebf8b7c2473c69713cf8aec2a90bc7de008f20d07c5992f7e2c5dc1")
    assert quant_matmul_kernel(16, 256, 256, form="integer", bias=False, weights="int8").digest == (
        "775719f314c2363859c14e396a759c627246f55243f29c00aad0d1d8c7bd5aa0")
    with pytest.raises(ValueError, match="weight type"):
        quant_matmul_kernel(16, 64, 32, form="dynamic", bias=True, weights="int4")


# ------------------------------------------------------------------------------------------ features
def _node_graph(tmp_path: Path, op: str, weight: np.ndarray) -> Graph:
    """One ``op`` (ConvInteger / MatMulInteger) of a uint8 activation by ``weight`` (an initializer)."""
    conv = op == "ConvInteger"
    x_shape = [1, 4, 6, 6] if conv else [3, weight.shape[0]]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)], [numpy_helper.from_array(weight, "w")])
    path = tmp_path / f"{op}-{weight.dtype}.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return load_model(path)


def test_quant_form_and_unsigned_weights_by_hand(tmp_path: Path) -> None:
    u8 = _node_graph(tmp_path, "MatMulInteger", np.ones((8, 5), dtype=np.uint8))
    s8 = _node_graph(tmp_path, "ConvInteger", np.ones((2, 4, 3, 3), dtype=np.int8))
    assert quant_form(u8, u8.layers) == (2.0, 1.0)
    assert quant_form(s8, s8.layers) == (2.0, 0.0)
    f = feature_map(u8)
    assert (f["quant_form"], f["unsigned_weights"]) == (2.0, 1.0)
    assert f["log_in_channels"] == pytest.approx(math.log(8)) and f["log_out_channels"] == pytest.approx(math.log(5))
    # float kernels: 0, whatever their shape
    for kernel in (elementwise_kernel(4096, "Add", True), conv_kernel(14, 16, 16, k=3, stride=1, depthwise=False,
                                                                      bn=False, act="none")):
        f = feature_map(kernel_graph(kernel, tmp_path))
        assert (f["quant_form"], f["unsigned_weights"]) == (0.0, 0.0), kernel.label


def test_integer_products_are_their_own_sub_family_and_predictions_use_it(tmp_path: Path) -> None:
    conv = feature_map(kernel_graph(conv_integer_kernel(14, 16, 32, k=3, stride=1, weights="uint8"), tmp_path))
    matmul = feature_map(kernel_graph(quant_matmul_kernel(16, 64, 32, form="dynamic", bias=True), tmp_path))
    qdq = feature_map(kernel_graph(quant_matmul_kernel(16, 64, 32, form="qdq", bias=True), tmp_path))
    assert refine_family("conv", list(conv.values())) == "conv_int"
    assert refine_family("matmul", list(matmul.values())) == "matmul_int"
    assert refine_family("matmul", list(qdq.values())) == "matmul"
    # twelve integer and twelve float conv samples: the sub-family is fitted on the twelve, the family on all
    column = FEATURES.index("quant_form")
    integer = [0.0] * len(FEATURES)
    integer[column] = 2.0
    samples = ([KernelSample("conv", f"i{i}", (*integer[:-1], float(i)), 10.0, 30.0) for i in range(12)]
               + [KernelSample("conv", f"f{i}", (*[0.0] * (len(FEATURES) - 1), float(i)), 10.0, 10.0)
                  for i in range(12)])
    predictor = fit_predictor(samples, {"runner": "onnxruntime"}, "host", 0.0, caches=CACHES)
    assert predictor.fit_for("conv", integer).family == "conv_int" and predictor.fit_for("conv", integer).samples == 12
    assert predictor.families["conv"].samples == 24


def test_the_fit_tells_an_integer_kernel_from_a_float_one_of_the_same_shape() -> None:
    # twelve float and twelve QDQ conv kernels of identical features but quant_form, the QDQ ones 3x slower
    # (measured 30 µs against a roofline of 10): the conv fit predicts each at its own ratio
    column = FEATURES.index("quant_form")
    base = [0.0] * len(FEATURES)

    def sample(i: int, form: float, us: float) -> KernelSample:
        values = list(base)
        values[column], values[0] = form, float(i % 3)
        return KernelSample("conv", f"k{form}{i}", tuple(values), 10.0, us)

    samples = [sample(i, 0.0, 10.0) for i in range(12)] + [sample(i, 1.0, 30.0) for i in range(12)]
    predictor = fit_predictor(samples, {"runner": "onnxruntime"}, "host", 0.0, caches=CACHES)
    fit = predictor.fit_for("conv", base)
    floating, quantized = list(base), list(base)
    quantized[column] = 1.0
    assert predictor.fit_for("conv", quantized) is fit
    ratio = fit.model.predict(np.asarray([quantized]))[0] - fit.model.predict(np.asarray([floating]))[0]
    # the target is log((us + 2) / (roofline + 2)): log(32 / 12) against log(12 / 12)
    assert ratio == pytest.approx(math.log(32 / 12), abs=0.1)


# ------------------------------------------------------------------------------------ the sampled space
def test_the_integer_kernels_join_their_family_order_without_moving_earlier_configurations() -> None:
    for family in FAMILIES:
        added = [p for p in _added_configs_6(family) if isinstance(p, partial)]
        assert len(added) == len(_added_configs_6(family))
        order = family_configs(family)
        keys = {(tuple((f"_{i}", v) for i, v in enumerate(p.args)) + tuple(sorted(p.keywords.items())), p.func)
                for p in added}
        new = [c for c in order if (c.params, c.builder) in keys]
        assert len(new) == len(added), family
        earlier = {c.params for c in order if c not in new}
        assert not any(c.params in earlier for c in new), family  # no configuration mistaken for one timed before
        if added:  # spread from the start: the first quarter holds about a quarter of them
            first = [c for c in order[:len(order) // 4] if c in new]
            assert abs(len(first) - len(added) / 4) <= max(2, len(added) / 20), family
    convs = [dict(c.params) for c in family_configs("conv") if c.builder is conv_integer_kernel]
    assert {p["weights"] for p in convs} == set(INT8_WEIGHTS) and {p["k"] for p in convs} == {1, 3}
    assert all((p["_0"] // p["stride"]) ** 2 * p["_1"] * p["_2"] * p["k"] ** 2 <= 1_000_000_000 for p in convs)
    ops = {dict(c.params)["_1"] for c in family_configs("elementwise") if c.builder is qdq_elementwise_kernel}
    assert ops == set(QDQ_ELEMENTWISE_OPS)
