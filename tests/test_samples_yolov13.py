"""``yolov13``: iMoonLab YOLOv13 n/s/l/x as the RDK X5 zoo deploys it.

Published figures: the iMoonLab/yolov13 README (repeated in D-Robotics/rdk_model_zoo
``samples/vision/ultralytics_yolo/README.md`` and ``benchmarks/data/board_latency.csv``): params M and GFLOPs at 640.
Ultralytics prints them from the fused model, whose ``fuse()`` folds the BatchNorm of ``Conv`` but not of YOLOv13's
``DSConv`` (weight and bias kept: one more parameter per pointwise output channel than the export's folded bias), and
counts GFLOPs with thop (``utils/torch_utils.get_flops``: the model at a 32x32 input, x (640 / 32)^2): 2 x (Conv and
Linear multiply-adds, the per-image ``context_net`` Linear scaled 400x with everything else, 4 ops per element of each
unfused BatchNorm); thop counts no MatMul, softmax or activation. Structure: the zoo's compile log
``source/reference_logs/hb_mapper_log_yolo13n.txt`` (its 171 Conv layers by name, six outputs).
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import static_shapes
from tests.test_samples_yolo_zoo import params, weights_as_inputs

from layerscope.samples import BOARD_SAMPLES, SAMPLES, parse_spec, resolve_params
from layerscope.samples.yolo import yolov13

# scale -> (params M, GFLOPs) at 640, the iMoonLab/yolov13 README
PUBLISHED: dict[str, tuple[float, float]] = {"n": (2.5, 6.4), "s": (9.0, 20.8), "l": (27.6, 88.4), "x": (64.0, 199.2)}
DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"


@functools.cache
def build(scale: str, size: int = 640) -> onnx.ModelProto:
    return yolov13(scale=scale, size=size)


def thop_gflops(model: onnx.ModelProto) -> float:
    """GFLOPs as ultralytics prints them for YOLOv13 (module docstring), from ONNX shape inference."""
    shapes = static_shapes(weights_as_inputs(model))
    weights = {t.name for t in model.graph.initializer}
    ops = 0
    for node in model.graph.node:
        out = math.prod(shapes[node.output[0]])
        if node.op_type == "Conv":
            ops += out * math.prod(shapes[node.input[1]][1:])
            if "/pw/" in node.name:  # DSConv's BatchNorm, unfused
                ops += 4 * out
        elif node.op_type == "MatMul" and node.input[1] in weights:  # a Linear on tokens
            ops += out * shapes[node.input[1]][0]
        elif node.op_type == "Gemm":  # context_net: once per image at 32x32, then scaled
            ops += 400 * out * shapes[node.input[1]][1]
    return 2 * ops / 1e9


def test_registered_as_a_board_sample() -> None:
    assert BOARD_SAMPLES["yolov13"] is yolov13 and SAMPLES["yolov13"] is yolov13


@pytest.mark.parametrize("scale", list(PUBLISHED))
def test_params_and_flops_match_published(scale: str) -> None:
    pub_params_m, pub_gflops = PUBLISHED[scale]
    model = build(scale)
    # 2.480 / 9.028 / 27.56 / 63.96 M: the README's 2.5 / 9.0 / 27.6 / 64.0 to its rounding (n: 0.8% under)
    assert params(model) / 1e6 == pytest.approx(pub_params_m, rel=0.009)
    # 6.34 / 20.61 / 87.58 / 196.4: 0.9-1.4% under the README (the rest unexplained: thop's count of a module
    # this graph does not separate, or a different thop version)
    assert thop_gflops(model) == pytest.approx(pub_gflops, rel=0.015)
    assert thop_gflops(model) < pub_gflops


def test_hyperace_by_hand() -> None:
    def conv(cin: int, cout: int, k: int = 1, g: int = 1) -> int:
        return cin // g * cout * k * k + cout

    def dsconv(cin: int, cout: int, k: int) -> int:  # depthwise without bias, pointwise with the folded BN's bias
        return cin * k * k + conv(cin, cout)

    def layer_params(model: onnx.ModelProto, prefix: str) -> int:  # trainable tensors only, not shapes or scalars
        leaves = ("weight", "bias", "prototype_base", "gate", "gamma")
        return sum(math.prod(t.dims) for t in model.graph.initializer
                   if t.name.startswith(prefix) and t.name.rsplit(".", 1)[-1] in leaves)

    # n: HyperACE(c1 128, c2 128, n 1, 4 hyperedges), c = 64; C3AH(64, 64) with 64 // 16 = 4 heads
    model = build("n", 64)
    linear = conv(64, 64)  # a Linear(64, 64) has the parameters of a 1x1 conv
    hypergraph = conv(128, 4 * 64) + 4 * 64 + 3 * linear  # context_net, prototype_base, pre_head/edge/node_proj
    c3ah = 2 * conv(64, 64) + hypergraph + conv(128, 64)
    ds_c3k = 2 * conv(64, 32) + 2 * (dsconv(32, 32, 3) + dsconv(32, 32, 7)) + conv(64, 64)
    fuse = conv(4 * 128, 128)  # P3 (128, pooled) + P4 (128) + P5 (256, upsampled): channel_adjust
    assert layer_params(model, "model.9.") == fuse + conv(128, 192) + 2 * c3ah + ds_c3k + conv(5 * 64, 128)
    # FullPAD_Tunnel: one gate each; DownsampleConv n: a 1x1 conv 128 -> 256 after the pool
    assert [layer_params(model, f"model.{i}.") for i in (12, 13, 14, 18, 23, 27, 31)] == [1] * 7
    assert layer_params(model, "model.11.") == conv(128, 256)
    # l: 8 hyperedges, no channel adjust (fuse from 3 x 512), DownsampleConv a bare pool, A2C2f with gamma
    large = build("l", 64)
    assert layer_params(large, "model.11.") == 0
    assert layer_params(large, "model.9.fuse.") == conv(3 * 512, 512)
    assert layer_params(large, "model.9.branch1.m.hgnn.edge_generator.prototype_base") == 8 * 256
    assert layer_params(large, "model.6.gamma") == 512


def test_layer_names_as_the_x5_compile_log_lists_them() -> None:
    model = build("n", 64)
    nodes = {n.name: n for n in model.graph.node}
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 171

    def attr(name: str, key: str) -> object:
        return next(onnx.helper.get_attribute_value(a) for a in nodes[name].attribute if a.name == key)

    assert attr("/model.1/conv/Conv", "group") == 2 and attr("/model.3/conv/Conv", "group") == 4
    assert attr("/model.2/m.0/cv2/dw/Conv", "kernel_shape") == [7, 7]  # DSBottleneck: 3x3 then 7x7
    assert attr("/model.5/dw/Conv", "strides") == [2, 2]
    assert attr("/model.6/m.0/m.0.0/attn/pe/conv/Conv", "kernel_shape") == [5, 5]
    for name in ("/model.6/m.1/m.1.1/attn/qk/conv/Conv", "/model.6/m.1/m.1.1/attn/v/conv/Conv",
                 "/model.8/m.0/m.0.1/mlp/mlp.1/conv/Conv", "/model.9/fuse/downsample/AveragePool",
                 "/model.9/branch1/m/hgnn/edge_generator/context_net/Gemm",
                 "/model.9/branch2/m/hgnn/node_proj/node_proj.0/MatMul", "/model.9/m.0/m/m.1/cv2/pw/Conv",
                 "/model.11/channel_adjust/conv/Conv", "/model.12/Mul", "/model.17/m.0/m/m.1/cv2/dw/Conv",
                 "/model.32/cv3.0/cv3.0.0/cv3.0.0.0/conv/Conv", "/model.32/cv2.2/cv2.2.2/Conv"):
        assert name in nodes
    # HyperACE: the two hypergraph branches read the same (second) third of cv1's output
    slices = [nodes[f"/model.9/{s}"].output[0] for s in ("Slice", "Slice_1", "Slice_2")]
    assert nodes["/model.9/branch1/cv1/conv/Conv"].input[0] == slices[1]
    assert nodes["/model.9/branch2/cv1/conv/Conv"].input[0] == slices[1]
    assert nodes["/model.9/m.0/cv1/conv/Conv"].input[0] == slices[2]


def test_zoo_outputs_as_the_compile_log_lists_them() -> None:
    model = build("n")
    shapes = static_shapes(weights_as_inputs(model))
    expected = [(80, 80), (80, 64), (40, 80), (40, 64), (20, 80), (20, 64)]
    assert [o.name for o in model.graph.output] == [f"output{k}" for k in range(6)]
    assert [shapes[o.name] for o in model.graph.output] == [(1, s, s, c) for s, c in expected]
    # the hypergraph runs on P4's 40 x 40 = 1600 tokens: participation (1, 1600, 4), hyperedges (1, 4, 64)
    edges = next(n for n in model.graph.node if n.name == "/model.9/branch1/m/hgnn/MatMul")
    assert shapes[edges.output[0]] == (1, 4, 64)
    # area attention at P4 in 4 bands of 400 tokens: scores (4, heads 2, 400, 400)
    scores = next(n for n in model.graph.node if n.name == "/model.6/m.0/m.0.0/attn/MatMul")
    assert shapes[scores.output[0]] == (4, 2, 400, 400)


@pytest.mark.parametrize("scale", ["n", "l"])
def test_runs_in_onnxruntime(scale: str) -> None:
    model = build(scale, 64)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, {"images": np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)})
    assert [r.shape for r in results] == [(1, s, s, c) for s, c in [(8, 80), (8, 64), (4, 80), (4, 64), (2, 80),
                                                                      (2, 64)]]
    assert all(np.isfinite(r).all() and np.abs(r).max() > 0 for r in results)


def test_board_rows_name_this_builder_with_the_published_figures() -> None:
    with DATA.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["sample"].split(":")[0] == "yolov13"]
    assert sorted((r["board"], r["model"]) for r in rows) == [
        (board, f"YOLOv13{scale}") for board in ("rdk-s100", "rdk-s100p", "rdk-x5") for scale in "lnsx"]
    for row in rows:
        name, spec = parse_spec(row["sample"])
        resolved = resolve_params(name, **spec)
        assert row["family"] == "yolov13" and row["input"] == "640x640"
        assert row["model"] == f"YOLOv13{resolved['scale']}"
        assert (float(row["params_m"]), float(row["gflops"])) == PUBLISHED[str(resolved["scale"])]


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="scale"):
        yolov13(scale="m")
    with pytest.raises(ValueError, match="size"):
        yolov13(size=100)
