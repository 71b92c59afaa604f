"""Ultralytics segmentation, pose and classification models and YOLOv10, as the RDK model zoos deploy them.

Published figures: the ultralytics docs tables (tasks/segment, tasks/pose, tasks/classify, models/yolov10),
repeated in the zoo READMEs and in ``benchmarks/data/board_latency.csv``. Ultralytics counts GFLOPs with thop
at a 32x32 input scaled by (size/32)^2, so: 2 x Conv MACs of the fused model; a ConvTranspose counted as
output elements x Cin x k^2 (4x its MACs for Proto's 2x2 stride-2 upsample); the classifier's Gemm scaled by
(640/32)^2 = 400 like a conv; attention MatMuls (``torch.matmul``) not counted.
Output shapes: the zoo's compile logs (D-Robotics/rdk_model_zoo ``samples/vision/ultralytics_yolo/source/
reference_logs/hb_mapper_log_{yolov8n_seg,yolo11n_seg,yolo11n_pose,yolov10n,yolov8n_cls}.txt``, "Graph output").
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import macs_by_op, static_shapes
from tests.test_samples_yolo_zoo import params, weights_as_inputs

from layerscope.samples import BOARD_SAMPLES, SAMPLES, parse_spec, resolve_params
from layerscope.samples.yolo import (
    ultralytics_classify,
    ultralytics_detect,
    ultralytics_pose,
    ultralytics_segment,
    yolov10,
)

BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {
    "ultralytics_segment": ultralytics_segment,
    "ultralytics_pose": ultralytics_pose,
    "ultralytics_classify": ultralytics_classify,
    "yolov10": yolov10,
}
# builder -> version -> scale -> (params M, GFLOPs); classifiers "at 640" in the ultralytics sense above
PUBLISHED: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "ultralytics_segment": {
        # docs.ultralytics.com tasks/segment: YOLOv8m-seg 110.2 (the zoo README prints 100.2)
        "v8": {"n": (3.4, 12.6), "s": (11.8, 42.6), "m": (27.3, 110.2), "l": (46.0, 220.5), "x": (71.8, 344.1)},
        "11": {"n": (2.9, 10.4), "s": (10.1, 35.5), "m": (22.4, 123.3), "l": (27.6, 142.2), "x": (62.1, 319.0)},
    },
    "ultralytics_pose": {
        "v8": {"n": (3.3, 9.2), "s": (11.6, 30.2), "m": (26.4, 81.0), "l": (44.4, 168.6), "x": (69.4, 263.2)},
        "11": {"n": (2.9, 7.6), "s": (9.9, 23.2), "m": (20.9, 71.7), "l": (26.2, 90.7), "x": (58.8, 203.3)},
    },
    "ultralytics_classify": {
        "v8": {"n": (2.7, 4.3), "s": (6.4, 13.5), "m": (17.0, 42.7), "l": (37.5, 99.7), "x": (57.4, 154.8)},
        "11": {"n": (2.8, 4.2), "s": (6.7, 13.0), "m": (11.6, 40.3), "l": (14.1, 50.4), "x": (29.6, 111.3)},
    },
    "yolov10": {"": {"n": (2.3, 6.7), "s": (7.2, 21.6), "m": (15.4, 59.1), "b": (19.1, 92.0), "l": (24.4, 120.3),
                     "x": (29.5, 160.4)}},
}
VARIANTS = [(b, v, s) for b, versions in PUBLISHED.items() for v, scales in versions.items() for s in scales]
DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"
NHWC = [0, 2, 3, 1]


def kwargs(version: str, scale: str) -> dict[str, str]:
    return {"version": version, "scale": scale} if version else {"scale": scale}


@functools.cache
def small(builder: str, version: str, size: int, **extra: str) -> onnx.ModelProto:
    return BUILDERS[builder](**kwargs(version, "n"), size=size, **extra)


def thop_gflops(model: onnx.ModelProto, *, classifier: bool) -> float:
    """GFLOPs as ultralytics prints them (see the module docstring), from ONNX shape inference."""
    shapes = static_shapes(weights_as_inputs(model))
    counted = macs_by_op(weights_as_inputs(model))
    transposed = sum(math.prod(shapes[n.output[0]]) * shapes[n.input[1]][0] * math.prod(shapes[n.input[1]][2:])
                     for n in model.graph.node if n.op_type == "ConvTranspose")
    return 2 * (counted.get("Conv", 0) + transposed + (400 if classifier else 1) * counted.get("Gemm", 0)) / 1e9


def test_registered_as_board_samples() -> None:
    for name, fn in BUILDERS.items():
        assert BOARD_SAMPLES[name] is fn
        assert SAMPLES[name] is fn


@pytest.mark.parametrize(("builder", "version", "scale"), VARIANTS)
def test_params_and_flops_match_published(builder: str, version: str, scale: str) -> None:
    pub_params_m, pub_gflops = PUBLISHED[builder][version][scale]
    model = BUILDERS[builder](**kwargs(version, scale), size=640)  # classifiers too: the figures are "at 640"
    assert params(model) / 1e6 == pytest.approx(pub_params_m, rel=0.03)
    gflops = thop_gflops(model, classifier=builder == "ultralytics_classify")
    if builder == "ultralytics_pose" and version == "11":
        # the YOLO11-pose figures were computed with the yaml's nc=80; the deployed checkpoint has nc=1
        assert gflops == pytest.approx(pub_gflops, rel=0.03)
        nc80 = ultralytics_pose(version="11", scale=scale, num_classes=80)
        assert thop_gflops(nc80, classifier=False) == pytest.approx(pub_gflops, rel=0.006)
    else:  # within 0.5 % for all the others (tables round to 0.1)
        assert gflops == pytest.approx(pub_gflops, rel=0.006)


def test_head_params_by_hand() -> None:
    # YOLOv8n: P3/P4/P5 widths 64/128/256. Segment adds per level cv4 (c4 = max(64 // 4, 32) = 32):
    # 3x3 x->32, 3x3 32->32, 1x1 32->32 (all with bias), and Proto(64, npr = 256 * 0.25 = 64, 32):
    # 3x3 64->64, ConvTranspose 2x2 64->64, 3x3 64->64, 1x1 64->32.
    def conv(cin: int, cout: int, k: int) -> int:
        return cin * cout * k * k + cout

    cv4 = sum(conv(x, 32, 3) + conv(32, 32, 3) + conv(32, 32, 1) for x in (64, 128, 256))
    proto = conv(64, 64, 3) + conv(64, 64, 2) + conv(64, 64, 3) + conv(64, 32, 1)
    detect = params(ultralytics_detect(version="v8", scale="n", size=64))
    assert params(small("ultralytics_segment", "v8", 64)) - detect == cv4 + proto
    # Pose with the detector's 80 classes differs by cv4 only: c4 = max(16, 17 * 3) = 51
    kpt = sum(conv(x, 51, 3) + conv(51, 51, 3) + conv(51, 51, 1) for x in (64, 128, 256))
    assert params(ultralytics_pose(version="v8", scale="n", size=64, num_classes=80)) - detect == kpt
    # YOLOv8n-cls: Classify(256 -> Conv 1x1 1280, pool, Linear 1000) on backbone layers 0-8
    cls = params(small("ultralytics_classify", "v8", 64))
    head = conv(256, 1280, 1) + 1280 * 1000 + 1000
    layers_0_8 = {f"model.{i}" for i in range(9)}
    backbone = sum(math.prod(t.dims) for t in ultralytics_detect(version="v8", scale="n", size=64).graph.initializer
                   if ".".join(t.name.split(".")[:2]) in layers_0_8 and t.data_type == onnx.TensorProto.FLOAT)
    assert cls == backbone + head


@pytest.mark.parametrize(("builder", "version", "expected"), [
    ("ultralytics_segment", "v8", [(80, 80), (80, 64), (80, 32), (40, 80), (40, 64), (40, 32), (20, 80), (20, 64),
                                   (20, 32), (160, 32)]),
    ("ultralytics_segment", "11", [(80, 80), (80, 64), (80, 32), (40, 80), (40, 64), (40, 32), (20, 80), (20, 64),
                                   (20, 32), (160, 32)]),
    ("ultralytics_pose", "11", [(80, 1), (80, 64), (80, 51), (40, 1), (40, 64), (40, 51), (20, 1), (20, 64), (20, 51)]),
    ("yolov10", "", [(80, 80), (80, 64), (40, 80), (40, 64), (20, 80), (20, 64)]),
])
def test_zoo_outputs_as_the_compile_logs_list_them(builder: str, version: str,
                                                   expected: list[tuple[int, int]]) -> None:
    model = small(builder, version, 640)
    shapes = static_shapes(weights_as_inputs(model))
    assert [o.name for o in model.graph.output] == [f"output{k}" for k in range(len(expected))]
    assert [shapes[o.name] for o in model.graph.output] == [(1, s, s, c) for s, c in expected]
    producer = {out: n for n in model.graph.node for out in n.output}
    for o in model.graph.output:  # every output is an NHWC permute of a conv map
        node = producer[o.name]
        assert node.op_type == "Transpose" and list(node.attribute[0].ints) == NHWC
    head = {"ultralytics_segment": {"v8": 22, "11": 23}, "ultralytics_pose": {"11": 23},
            "yolov10": {"": 23}}[builder][version]
    conv_of = [producer[producer[o.name].input[0]].name for o in model.graph.output]
    branches = ["one2one_cv3", "one2one_cv2"] if builder == "yolov10" else ["cv3", "cv2", "cv4"]
    want = [f"/model.{head}/{b}.{i}/{b}.{i}.2/Conv" for i in range(3) for b in branches]
    if builder == "ultralytics_segment":
        want.append(f"/model.{head}/proto/cv3/act/Mul")
    assert conv_of == want
    # no DFL, decode or top-k in the deployed heads
    assert not {n.op_type for n in model.graph.node} & {"TopK", "Sub", "Div", "ReduceMax"}
    assert not any(n.name.startswith(f"/model.{head}/dfl") for n in model.graph.node)


def test_classifier_as_the_x5_zoo_deploys_it() -> None:
    for version, last in (("v8", 9), ("11", 10)):
        model = small("ultralytics_classify", version, 224)
        assert [(o.name, tuple(d.dim_value for d in o.type.tensor_type.shape.dim)) for o in model.graph.output] == [
            ("output0", (1, 1000))]
        tail = [n.name for n in model.graph.node][-4:]
        assert tail == [f"/model.{last}/conv/act/Mul", f"/model.{last}/pool/GlobalAveragePool",
                        f"/model.{last}/Flatten", f"/model.{last}/linear/Gemm"]
    export = ultralytics_classify(version="v8", scale="n", head="export")
    assert export.graph.node[-1].op_type == "Softmax"


def test_yolov10_blocks() -> None:
    model = small("yolov10", "", 640)
    names = {n.name: n for n in model.graph.node}

    def attrs(name: str) -> dict[str, object]:
        return {a.name: onnx.helper.get_attribute_value(a) for a in names[name].attribute}

    # SCDown: 1x1 then a 3x3 stride-2 depthwise conv without activation
    assert attrs("/model.5/cv2/conv/Conv")["group"] == 128 and attrs("/model.5/cv2/conv/Conv")["strides"] == [2, 2]
    assert "/model.5/cv2/act/Mul" not in names
    # n: C2fCIB only at layer 22 (c = 256 / 2, CIB e=1.0: 2c_ = 256), large-kernel (fused RepVGGDW: 7x7
    # depthwise + SiLU); PSA at layer 10
    lk = attrs("/model.22/m.0/cv1/cv1.2/conv/conv/Conv")
    assert lk["kernel_shape"] == [7, 7] and lk["group"] == 256
    assert "/model.22/m.0/cv1/cv1.2/act/Mul" in names and "/model.22/m.0/Add" in names
    assert not any(n.startswith("/model.19/m.0/cv1/cv1.0/") for n in names)  # a C2f Bottleneck there
    assert "/model.10/attn/MatMul" in names and "/model.10/ffn/ffn.1/conv/Conv" in names
    # m: C2fCIB at 8, 19 and 22 with plain 3x3 depthwise; no 7x7
    m = yolov10(scale="m", size=64)
    kernels = {onnx.helper.get_attribute_value(a)[0] for n in m.graph.node if n.op_type == "Conv"
               for a in n.attribute if a.name == "kernel_shape"}
    assert 7 not in kernels
    cib = {n.name.split("/")[1] for n in m.graph.node if "/m.0/cv1/cv1.4/" in n.name}
    assert cib == {"model.8", "model.19", "model.22"}


@pytest.mark.parametrize(("builder", "version"), [("yolov10", ""), ("ultralytics_segment", "11"),
                                                  ("ultralytics_classify", "11")])
def test_decomposed_attention_is_the_same_function(builder: str, version: str) -> None:
    size = 64 if builder == "ultralytics_classify" else 128
    fused, decomposed = small(builder, version, size), small(builder, version, size, attention="decomposed")
    ops = [n.op_type for n in decomposed.graph.node]
    assert "Softmax" not in ops
    assert ops.count("ReduceMax") == ops.count("ReduceSum") == ops.count("Exp") == 1
    assert [n.op_type for n in fused.graph.node].count("Softmax") == 1
    image = np.random.default_rng(0).random((1, 3, size, size), dtype=np.float32)
    outs = []
    for model in (fused, decomposed):
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        outs.append(sess.run(None, {"images": image}))
    for a, b in zip(*outs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("builder", "version", "size", "shapes"), [
    ("ultralytics_segment", "v8", 128, [(1, 16, 16, 80), (1, 16, 16, 64), (1, 16, 16, 32), (1, 8, 8, 80),
                                        (1, 8, 8, 64), (1, 8, 8, 32), (1, 4, 4, 80), (1, 4, 4, 64), (1, 4, 4, 32),
                                        (1, 32, 32, 32)]),
    ("ultralytics_pose", "v8", 128, [(1, 16, 16, 1), (1, 16, 16, 64), (1, 16, 16, 51), (1, 8, 8, 1), (1, 8, 8, 64),
                                     (1, 8, 8, 51), (1, 4, 4, 1), (1, 4, 4, 64), (1, 4, 4, 51)]),
    ("ultralytics_classify", "v8", 64, [(1, 1000)]),
    ("yolov10", "", 128, [(1, 16, 16, 80), (1, 16, 16, 64), (1, 8, 8, 80), (1, 8, 8, 64), (1, 4, 4, 80),
                          (1, 4, 4, 64)]),
])
def test_runs_in_onnxruntime(builder: str, version: str, size: int, shapes: list[tuple[int, ...]]) -> None:
    model = small(builder, version, size)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    image = np.random.default_rng(0).random((1, 3, size, size), dtype=np.float32)
    results = sess.run(None, {"images": image})
    assert [r.shape for r in results] == shapes
    assert all(np.isfinite(r).all() and np.abs(r).max() > 0 for r in results)


def board_rows() -> list[dict[str, str]]:
    with DATA.open(encoding="utf-8", newline="") as handle:
        return [r for r in csv.DictReader(handle) if r["sample"].split(":")[0] in BUILDERS]


def test_board_rows_name_these_builders_at_their_published_input() -> None:
    rows = board_rows()
    counts = {board: sum(r["board"] == board for r in rows) for board in ("rdk-x5", "rdk-s100", "rdk-s100p")}
    assert counts == {"rdk-x5": 36, "rdk-s100": 36, "rdk-s100p": 36}
    for row in rows:
        name, spec = parse_spec(row["sample"])
        resolved = resolve_params(name, **spec)
        assert row["input"] == f"{resolved['size']}x{resolved['size']}", row["model"]
        # the X5 zoo exports attention with its decomposed softmax, the S100 zoo with Softmax
        has_attention = name == "yolov10" or resolved.get("version") == "11"
        assert resolved["attention"] == ("decomposed" if row["board"] == "rdk-x5" and has_attention else "softmax")
        version = str(resolved.get("version", ""))
        pub_params_m, pub_gflops = PUBLISHED[name][version][str(resolved["scale"])]
        assert float(row["params_m"]) == pub_params_m, row["model"]
        typo = row["model"] == "YOLOv8m-Seg" and float(row["gflops"]) == 100.2  # the zoo README's figure
        assert typo or float(row["gflops"]) == pub_gflops, row["model"]


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="version"):
        ultralytics_segment(version="v5u")
    with pytest.raises(ValueError, match="version"):
        ultralytics_classify(version="12")
    with pytest.raises(ValueError, match="scale"):
        yolov10(scale="xl")
    with pytest.raises(ValueError, match="scale"):
        ultralytics_pose(scale="b")
    with pytest.raises(ValueError, match="attention"):
        yolov10(attention="flash")
    with pytest.raises(ValueError, match="head"):
        ultralytics_classify(head="raw")
    with pytest.raises(ValueError, match="multiple of 32"):
        ultralytics_segment(size=100)
