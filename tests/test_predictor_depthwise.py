"""Depthwise (and every) Conv kernels described by the Conv ONNX Runtime runs (issue #39): the layers it folds into the
Conv (a BatchNormalization, a bias Add, a scale Mul, the activation, Identities) add no roofline pass of their own,
so that one Conv is predicted alike whichever of them its model wrote; and the depthwise kernels the conv space
adds with the activation class mobile CNNs fuse (HardSigmoid, standing in for HardSwish)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from layerscope.analysis.predictor import FEATURES, Caches, kernel_features, roofline_us, working_layers
from layerscope.estimator import estimate_graph
from layerscope.estimator.types import Estimate
from layerscope.measure.kernels import FUSED_HARDSIGMOID, KernelModel, conv_kernel, family_configs, qdq_conv_kernel
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import kernel_groups
from layerscope.targets import load_profile

PROFILE = load_profile("host")
CACHES = Caches(1 << 20, 32 << 20, "test")
_ACT = FEATURES.index("activation")


def _graph(kernel: KernelModel, tmp_path: Path) -> Graph:
    path = tmp_path / f"{kernel.digest[:12]}.onnx"
    path.write_bytes(kernel.model_bytes)
    return load_model(path)


def _written(nodes: Sequence[onnx.NodeProto], inits: dict[str, np.ndarray], tmp_path: Path, name: str, *,
             channels: int = 32, hw: int = 14) -> Graph:
    """A model of ``nodes`` reading ``x`` [1, channels, hw, hw] and writing ``y`` (float32 initializers)."""
    graph = helper.make_graph(
        list(nodes), name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return load_model(path)


def _described(graph: Graph) -> tuple[np.ndarray, float, Estimate]:
    est = estimate_graph(graph, PROFILE, "fp32")
    layers = [n.id for n in graph.layers]
    return kernel_features(graph, est, layers, CACHES), roofline_us(graph, est, layers), est


def _conv_writing_its_output(graph: Graph, est: Estimate) -> float:
    """The roofline time of ``graph``'s Conv layer as if it wrote the model's output (µs): max(compute, load +
    the store the roofline put on the model's last layer) + overhead."""
    conv = next(e for n, e in zip(graph.layers, est.layers, strict=True) if n.op_type == "Conv")
    return max(conv.compute_us, conv.load_us + est.layers[-1].store_us) + conv.overhead_us


def test_a_conv_is_described_alike_with_or_without_the_layers_it_folds_in(tmp_path: Path) -> None:
    # PP-OCRv4's depthwise Conv alone, PP-LCNet's with BatchNormalization and HardSwish, the space's with
    # BatchNormalization: one Conv to ONNX Runtime (the BN in its weights, the activation on its output blocks)
    alone = _graph(conv_kernel(28, 64, 64, k=3, stride=1, depthwise=True, bn=False, act="none"), tmp_path)
    with_bn = _graph(conv_kernel(28, 64, 64, k=3, stride=1, depthwise=True, bn=True, act="none"), tmp_path)
    hardswish = _graph(conv_kernel(28, 64, 64, k=3, stride=1, depthwise=True, bn=True, act="hardswish"), tmp_path)
    relu = _graph(conv_kernel(28, 64, 64, k=3, stride=1, depthwise=True, bn=True, act="relu"), tmp_path)
    clip = _graph(conv_kernel(28, 64, 64, k=3, stride=1, depthwise=True, bn=True, act="clip"), tmp_path)
    x_alone, roof_alone, est = _described(alone)
    assert working_layers(alone, [n.id for n in alone.layers]) == [alone.layers[0].id]
    assert roof_alone == _conv_writing_its_output(alone, est) == est.layers[0].latency_us > 0
    # a Clip (Relu6) costs a fused HardSwish's, a Relu nothing: the activation class tells them apart
    for graph, act in ((with_bn, 0.0), (hardswish, 2.0), (relu, 1.0), (clip, 2.0)):
        x, roof, est = _described(graph)
        conv = [n.id for n in graph.layers if n.op_type == "Conv"]
        assert working_layers(graph, [n.id for n in graph.layers]) == conv
        assert roof == roof_alone == _conv_writing_its_output(graph, est)
        assert roof < sum(e.latency_us for e in est.layers)  # the BatchNormalization's, the activation's pass gone
        # everything but the activation class is the Conv's: the layer count 1, no normalisation class
        assert x[_ACT] == act
        assert np.array_equal(np.delete(x, _ACT), np.delete(x_alone, _ACT)), graph.name
        assert x[FEATURES.index("layers")] == 1.0 and x[FEATURES.index("norm_kind")] == 0.0


def test_a_bias_add_and_scale_mul_of_constants_fold_a_residual_add_stays(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 1, 3, 3))
    conv = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4, group=32)
    # PP-OCRv6's depthwise Conv with its bias as an Add of a [1, C, 1, 1] constant, then a per-channel scale
    biased = _written([conv, helper.make_node("Add", ["c", "bias"], ["s"]), helper.make_node("Mul", ["s", "k"], ["y"])],
                      {"w": w, "bias": rng.standard_normal((1, 32, 1, 1)), "k": rng.standard_normal((1, 32, 1, 1))},
                      tmp_path, "biased")
    plain = _written([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4, group=32)],
                     {"w": w}, tmp_path, "plain")
    x_biased, roof_biased, _ = _described(biased)
    x_plain, roof_plain, _ = _described(plain)
    assert working_layers(biased, [n.id for n in biased.layers]) == [biased.layers[0].id]
    assert roof_biased == roof_plain and np.array_equal(x_biased, x_plain)
    # a residual: the Conv's output plus the model's input (two activations of one shape) reads a second tensor
    residual = _written([conv, helper.make_node("Add", ["c", "x"], ["y"])], {"w": w}, tmp_path, "residual")
    ids = [n.id for n in residual.layers]
    assert working_layers(residual, ids) == ids
    x_res, roof_res, est = _described(residual)
    assert roof_res == sum(e.latency_us for e in est.layers) > roof_plain
    assert x_res[FEATURES.index("layers")] == 2.0


def test_an_activation_written_out_on_the_convs_output_folds_into_it(tmp_path: Path) -> None:
    # OpenVINO runs a Conv with a HardSwish written as Add(+3), Clip(0, 6), Mul(x, .), Div(/6) -- PP-Layout's --
    # or a GELU written with Erf as one node: every input of those layers is a constant or made in the kernel
    rng = np.random.default_rng(2)
    w = rng.standard_normal((32, 1, 3, 3))
    conv = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4, group=32)
    consts = {"w": w, "three": np.array(3.0), "zero": np.array(0.0), "six": np.array(6.0), "sqrt2": np.array(2 ** 0.5),
              "one": np.array(1.0), "half": np.array(0.5)}
    hardswish = _written([conv, helper.make_node("Add", ["c", "three"], ["a"]),
                          helper.make_node("Clip", ["a", "zero", "six"], ["r"]),
                          helper.make_node("Mul", ["c", "r"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])],
                         consts, tmp_path, "hardswish_written")
    gelu = _written([conv, helper.make_node("Div", ["c", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                     helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["c", "p"], ["m"]),
                     helper.make_node("Mul", ["m", "half"], ["y"])], consts, tmp_path, "gelu_written")
    plain = _written([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4, group=32)],
                     {"w": w}, tmp_path, "plain")
    x_plain, roof_plain, _ = _described(plain)
    for graph, act in ((hardswish, 2.0), (gelu, 4.0)):
        ids = [n.id for n in graph.layers]
        assert working_layers(graph, ids) == [graph.layers[0].id]
        x, roof, _ = _described(graph)
        assert roof == roof_plain and x[_ACT] == act
        assert np.array_equal(np.delete(x, _ACT), np.delete(x_plain, _ACT)), graph.name
    # the same Mul reading the model's input instead (a gate from outside the kernel) reads a tensor: it stays
    gated = _written([conv, helper.make_node("Mul", ["c", "x"], ["y"])], {"w": w}, tmp_path, "gated")
    ids = [n.id for n in gated.layers]
    assert working_layers(gated, ids) == ids


def test_kernels_that_are_not_one_float_conv_keep_every_layer(tmp_path: Path) -> None:
    qdq = _graph(qdq_conv_kernel(14, 16, 16, k=3, stride=1), tmp_path)  # int8: runs as a QLinearConv and its Q/DQ
    ids = [n.id for n in qdq.layers]
    assert working_layers(qdq, ids) == ids
    rng = np.random.default_rng(1)
    matmul = _written([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
                      {"w": rng.standard_normal((14, 14)), "b": rng.standard_normal(14)}, tmp_path, "matmul")
    ids = [n.id for n in matmul.layers]
    assert working_layers(matmul, ids) == ids
    relu = _written([helper.make_node("Relu", ["x"], ["y"])], {}, tmp_path, "relu")
    assert working_layers(relu, [relu.layers[0].id]) == [relu.layers[0].id]


def test_the_conv_space_adds_convs_with_a_fused_hardsigmoid(tmp_path: Path) -> None:
    configs = [dict(c.params) for c in family_configs("conv")]
    added = [p for p in configs if p.get("act") == FUSED_HARDSIGMOID]
    depthwise = [p for p in added if p["depthwise"]]
    assert len(depthwise) == 5 * 5 * 3 * 2 and {p["k"] for p in depthwise} == {3, 5, 7}
    assert len(added) - len(depthwise) == 5 * 5 * 2 * 2 and all(p["bn"] for p in added)
    # spread through the family's order, the earlier configurations in theirs (a cache is walked as before)
    first_half = sum(1 for p in configs[:len(configs) // 2] if p.get("act") == FUSED_HARDSIGMOID)
    assert abs(first_half - len(added) / 2) <= max(2, len(added) / 20)  # spread through the order
    # ONNX Runtime runs it as one Conv with the HardSigmoid fused, as it runs a HardSwish inside a model
    graph = _graph(conv_kernel(14, 16, 16, k=3, stride=1, depthwise=True, bn=True, act=FUSED_HARDSIGMOID), tmp_path)
    groups = kernel_groups(graph, SessionConfig(threads=1))
    assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}
    assert _described(graph)[0][_ACT] == 2.0  # HardSwish's class


def test_onnx_runtime_fuses_a_hardswish_into_the_conv_inside_a_model_only(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4, group=16),
             helper.make_node("HardSwish", ["c"], ["h"]),
             helper.make_node("Conv", ["h", "w2"], ["y"], kernel_shape=[1, 1])]
    inside = _written(nodes, {"w": rng.standard_normal((16, 1, 3, 3)), "w2": rng.standard_normal((16, 16, 1, 1))},
                      tmp_path, "inside", channels=16)
    by_op = {n.id: n.op_type for n in inside.layers}
    groups = sorted(sorted(by_op[i] for i in layers) for _, layers in kernel_groups(inside, SessionConfig(threads=1)))
    assert groups == [["Conv"], ["Conv", "HardSwish"]]
    # alone, the HardSwish the model's output: a Conv, then HardSigmoid and Mul (the space cannot time it fused)
    alone = _graph(conv_kernel(14, 16, 16, k=3, stride=1, depthwise=True, bn=False, act="hardswish"), tmp_path)
    assert len(kernel_groups(alone, SessionConfig(threads=1))) == 2
