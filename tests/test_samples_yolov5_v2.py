"""``yolov5_v2``: YOLOv5 tag v2.0 s/m/l/x as the RDK X5 zoo exports it (D-Robotics/rdk_model_zoo
``samples/vision/yolov5/README.md``: the modified ``Detect.forward``, three NHWC outputs of 255 channels).

Published figures: the ultralytics/yolov5 v2.0 README ("Pretrained Checkpoints": 7.5M / 21.8M / 47.8M / 89.0M
params, repeated in the zoo README and ``benchmarks/data/board_latency.csv``), which ``model_info`` counts on the
unfused model (``sum(x.numel() for x in model.parameters())``: every ``Conv``'s BN weight and bias, where the fused
conv has one bias). Its FLOPS column (13.2 / 39.4 / 88.1 / 166.4 B, unchanged from v1.0 to v3.1) is 0.75-0.76x
the 2 x Conv MACs of these yamls at 640x640 at every scale (17.4 / 52.2 / 117.0 / 221.2): not reproduced, not
tested.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import static_shapes
from tests.test_samples_yolo_zoo import params, weights_as_inputs

from layerscope.samples import BOARD_SAMPLES, SAMPLES, parse_spec
from layerscope.samples.yolo import yolov5_v2

PUBLISHED_PARAMS_M = {"s": 7.5, "m": 21.8, "l": 47.8, "x": 89.0}
DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"


@functools.cache
def build(scale: str, size: int = 640) -> onnx.ModelProto:
    return yolov5_v2(scale=scale, size=size)


def conv(cin: int, cout: int, k: int, bias: bool = True) -> int:
    return cin * cout * k * k + (cout if bias else 0)


def test_registered_as_a_board_sample() -> None:
    assert BOARD_SAMPLES["yolov5_v2"] is yolov5_v2 and SAMPLES["yolov5_v2"] is yolov5_v2


@pytest.mark.parametrize("scale", list(PUBLISHED_PARAMS_M))
def test_unfused_params_match_published(scale: str) -> None:
    model = build(scale)
    dims = {t.name: tuple(t.dims) for t in model.graph.initializer}
    # every Conv with a bias except the Detect convs (nn.Conv2d with their own bias) had a BN: one more parameter
    # per output channel before fusing; BottleneckCSP's own BN is unfused and counted already
    folded = sum(dims[n.input[1]][0] for n in model.graph.node
                 if n.op_type == "Conv" and len(n.input) > 2 and not n.name.startswith("/model.24/"))
    assert (params(model) + folded) / 1e6 == pytest.approx(PUBLISHED_PARAMS_M[scale], rel=0.005)


def test_v2_blocks_by_hand() -> None:
    model = build("s", 64)
    nodes = list(model.graph.node)
    dims = {t.name: tuple(t.dims) for t in model.graph.initializer}

    def layer_params(prefix: str) -> int:
        return sum(int(np.prod(dims[i])) for n in nodes if n.name.startswith(prefix)
                   for i in n.input[1:] if i in dims and i.endswith((".weight", ".bias")))

    # LeakyReLU(0.1) everywhere, no SiLU; Focus: four strided Slices, Concat, 3x3 conv 12 -> 32
    assert not any(n.op_type == "Sigmoid" for n in nodes)
    assert {round(a.f, 6) for n in nodes if n.op_type == "LeakyRelu" for a in n.attribute} == {0.1}
    assert [n.op_type for n in nodes[:5]] == ["Slice"] * 4 + ["Concat"] and layer_params("/model.0/") == conv(
        12, 32, 3)
    # BottleneckCSP(64 -> 64, n=1) at layer 2: cv1 1x1 to 32, Bottleneck (1x1, 3x3, Add), cv3 and cv2 bias-free
    # 1x1 convs, Concat, BN over 64 (scale and bias), LeakyReLU, cv4 1x1
    assert layer_params("/model.2/") == (conv(64, 32, 1) + conv(32, 32, 1) + conv(32, 32, 3) + conv(32, 32, 1, False)
                                         + conv(64, 32, 1, False) + 2 * 64 + conv(64, 64, 1))
    assert params(model) - sum(int(np.prod(dims[i])) for n in nodes for i in n.input[1:]
                               if i in dims and i.endswith((".weight", ".bias")) and n.op_type == "Conv") == (
        2 * sum(dims[n.input[1]][0] for n in nodes if n.op_type == "BatchNormalization"))
    csp = [n.name for n in nodes if n.op_type == "BatchNormalization"]
    assert csp == [f"/model.{i}/bn/BatchNormalization" for i in (2, 4, 6, 9, 13, 17, 20, 23)]
    assert "/model.2/m/m.0/Add" in {n.name for n in nodes}
    assert "/model.13/m/m.0/Add" not in {n.name for n in nodes}  # the head's CSPs: no shortcut
    # depth 0.33: the 9-repeat CSPs get 3 bottlenecks
    assert sum(n.name.startswith("/model.4/m/") and n.op_type == "Add" for n in nodes) == 3
    # SPP at layer 8: 5, 9, 13 max pools in parallel on cv1's output
    pools = [n for n in nodes if n.op_type == "MaxPool"]
    assert [a.ints for n in pools for a in n.attribute if a.name == "kernel_shape"] == [[5, 5], [9, 9], [13, 13]]
    assert len({n.input[0] for n in pools}) == 1


def test_zoo_outputs() -> None:
    model = build("m")
    shapes = static_shapes(weights_as_inputs(model))
    assert [(o.name, shapes[o.name]) for o in model.graph.output] == [
        ("output0", (1, 80, 80, 255)), ("output1", (1, 40, 40, 255)), ("output2", (1, 20, 20, 255))]
    producer = {out: n for n in model.graph.node for out in n.output}
    for level, out in enumerate(model.graph.output):
        transpose = producer[out.name]
        assert transpose.op_type == "Transpose" and producer[transpose.input[0]].name == f"/model.24/m.{level}/Conv"


def test_runs_in_onnxruntime() -> None:
    model = build("s", 128)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, {"images": np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32)})
    assert [r.shape for r in results] == [(1, 16, 16, 255), (1, 8, 8, 255), (1, 4, 4, 255)]
    assert all(np.isfinite(r).all() and np.abs(r).max() > 0 for r in results)


def test_board_rows_name_this_builder() -> None:
    with DATA.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["model"].endswith("_v2.0")]
    assert sorted((r["board"], r["model"]) for r in rows) == sorted(
        [("rdk-x5", f"YOLOv5{s}_v2.0") for s in "smlx"] + [("rdk-x3", f"YOLOv5{s}_v2.0") for s in "sx"])
    for row in rows:
        name, spec = parse_spec(row["sample"])
        assert name == "yolov5_v2" and row["family"] == "yolov5"
        assert row["model"] == f"YOLOv5{spec['scale']}_v2.0"
        assert float(row["params_m"]) == PUBLISHED_PARAMS_M[str(spec["scale"])]


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="scale"):
        yolov5_v2(scale="n")  # v2.0 had no n
    with pytest.raises(ValueError, match="multiple of 32"):
        yolov5_v2(size=100)
