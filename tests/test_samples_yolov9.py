"""``yolov9``: ultralytics YOLOv9 t/s/m/c/e and c/e-seg as the RDK X5 zoo deploys them.

Published figures: the zoo README (D-Robotics/rdk_model_zoo ``samples/vision/ultralytics_yolo/README.md``,
"BenchMark - Performance", RDK X5 detection and instance segmentation tables; repeated in
``benchmarks/data/board_latency.csv``): params M and GFLOPs at 640, ultralytics' fused-model figures (thop:
2 x Conv MACs, a ConvTranspose as output elements x Cin x k^2). The unfused parameter counts are the header
comments of ultralytics ``cfg/models/v9/yolov9{t,s,m,c,e}.yaml`` / ``yolov9{c,e}-seg.yaml`` ("917 layers,
2128720 parameters, 8.5 GFLOPs" for t): BN weight and bias per folded conv, RepConv's 1x1 branch and its BN, the
DFL conv's 16 fixed weights. Structure: the zoo's compile logs ``source/reference_logs/hb_mapper_log_yolov9t.txt``
and ``hb_mapper_log_yolov9c_seg.txt`` (layer names, 185 and 156 Conv layers, "Graph output").
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import static_shapes
from tests.test_samples_yolo_tasks import thop_gflops
from tests.test_samples_yolo_zoo import params, weights_as_inputs

from layerscope.samples import BOARD_SAMPLES, SAMPLES, parse_spec, resolve_params
from layerscope.samples.yolo import yolov9

# (scale, task) -> (params M, GFLOPs) at 640, the zoo README
PUBLISHED: dict[tuple[str, str], tuple[float, float]] = {
    ("t", "detect"): (2.1, 8.2), ("s", "detect"): (7.2, 26.9), ("m", "detect"): (20.1, 76.8),
    ("c", "detect"): (25.3, 102.7), ("e", "detect"): (57.4, 189.5),
    ("c", "segment"): (27.7, 158.0), ("e", "segment"): (59.7, 244.8),
}
# (scale, task) -> the unfused parameter count in the yaml's header comment
YAML_PARAMS: dict[tuple[str, str], int] = {
    ("t", "detect"): 2_128_720, ("s", "detect"): 7_318_368, ("m", "detect"): 20_216_160,
    ("c", "detect"): 25_590_912, ("e", "detect"): 58_206_592,
    ("c", "segment"): 27_897_120, ("e", "segment"): 60_512_800,
}
DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"
REPCONV = re.compile(r"/m/m\.\d+/cv1/conv/Conv$")


@functools.cache
def build(scale: str, task: str = "detect", size: int = 640) -> onnx.ModelProto:
    return yolov9(scale=scale, task=task, size=size)


def unfused_params(model: onnx.ModelProto) -> int:
    """The parameter count of the model before ``fuse()``: each conv followed by an activation had a BN (weight and
    bias, where the fused conv has one bias); a RepBottleneck's cv1 (a RepConv) also a 1x1 conv and its BN; plus the
    DFL conv's 16 weights, which the zoo head does not export."""
    dims = {t.name: tuple(t.dims) for t in model.graph.initializer}
    readers: dict[str, set[str]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, set()).add(node.op_type)
    extra = 16
    for node in model.graph.node:
        if node.op_type != "Conv" or "Sigmoid" not in readers.get(node.output[0], set()):
            continue
        cout, cin = dims[node.input[1]][:2]
        extra += cout
        if REPCONV.search(node.name):
            extra += cout * cin + 2 * cout
    return params(model) + extra


def test_registered_as_a_board_sample() -> None:
    assert BOARD_SAMPLES["yolov9"] is yolov9 and SAMPLES["yolov9"] is yolov9


@pytest.mark.parametrize(("scale", "task"), list(PUBLISHED))
def test_params_and_flops_match_published(scale: str, task: str) -> None:
    pub_params_m, pub_gflops = PUBLISHED[scale, task]
    model = build(scale, task)
    assert params(model) / 1e6 == pytest.approx(pub_params_m, rel=0.004)  # c: 25.38 M for the README's 25.3
    # the README rounds to 0.1: t's 8.23 prints as 8.2
    assert thop_gflops(model, classifier=False) == pytest.approx(pub_gflops, rel=0.004)
    # exact: the architecture before fusing has the yaml's parameter count to the last weight
    assert unfused_params(model) == YAML_PARAMS[scale, task]


def test_blocks_by_hand() -> None:
    def conv(cin: int, cout: int, k: int) -> int:
        return cin * cout * k * k + cout

    model = build("c", size=64)
    dims = {t.name: tuple(t.dims) for t in model.graph.initializer}
    names = {n.name: n for n in model.graph.node}

    def layer_params(prefix: str) -> int:
        return sum(int(np.prod(dims[i])) for n in model.graph.node if n.name.startswith(prefix)
                   for i in n.input[1:] if i in dims and i.endswith((".weight", ".bias")))

    # ADown(256 -> 256) at layer 3: AveragePool 2x2/1, two channel Slices, 3x3/2 conv 128 -> 128 on the first,
    # MaxPool 3x3/2 then a 1x1 conv 128 -> 128 on the second
    assert layer_params("/model.3/") == conv(128, 128, 3) + conv(128, 128, 1)
    assert [n.op_type for n in model.graph.node if n.name.startswith("/model.3/")] == [
        "AveragePool", "Slice", "Slice", "Conv", "Sigmoid", "Mul", "MaxPool", "Conv", "Sigmoid", "Mul", "Concat"]
    # RepNCSPELAN4(128 -> 256, c3 128, c4 64, n 1) at layer 2: cv1 1x1 to 128; cv2 = RepCSP(64, 64) (C3 of hidden
    # 32: two 1x1, one RepBottleneck of two 3x3, 1x1 back to 64) + 3x3; cv3 the same on 64; cv4 1x1 from 256
    rep_csp = 2 * conv(64, 32, 1) + 2 * conv(32, 32, 3) + conv(64, 64, 1)
    assert layer_params("/model.2/") == conv(128, 128, 1) + 2 * (rep_csp + conv(64, 64, 3)) + conv(256, 256, 1)
    assert "/model.2/cv2/cv2.0/m/m.0/Add" in names and "/model.2/cv3/cv3.1/conv/Conv" in names
    # SPPELAN(512 -> 512, c3 256): 1x1, three chained 5x5 MaxPools, 1x1 from 4 x 256
    assert layer_params("/model.9/") == conv(512, 256, 1) + conv(1024, 512, 1)
    assert [names[f"/model.9/{m}/MaxPool"].input[0] for m in ("cv3", "cv4")] == [
        names["/model.9/cv2/MaxPool"].output[0], names["/model.9/cv3/MaxPool"].output[0]]


def test_layer_names_as_the_x5_compile_logs_list_them() -> None:
    t = build("t", size=64)
    names = {n.name for n in t.graph.node}
    assert sum(n.op_type == "Conv" for n in t.graph.node) == 185
    for name in ("/model.2/Slice_1", "/model.2/cv2/conv/Conv", "/model.2/cv4/act/Mul",  # ELAN1
                 "/model.3/AveragePool", "/model.3/cv1/conv/Conv",  # AConv
                 "/model.4/cv2/cv2.0/m/m.2/cv1/conv/Conv", "/model.4/cv3/cv3.0/cv3/conv/Conv",  # RepNCSPELAN4 n=3
                 "/model.9/cv4/MaxPool", "/model.9/cv5/conv/Conv", "/model.10/Resize",
                 "/model.22/cv3.0/cv3.0.0/conv/Conv", "/model.22/cv2.2/cv2.2.2/Conv"):  # legacy 3x3 class branch
        assert name in names
    seg = build("c", "segment", size=64)
    seg_names = {n.name for n in seg.graph.node}
    assert sum(n.op_type == "Conv" for n in seg.graph.node) == 156
    for name in ("/model.3/MaxPool", "/model.3/cv2/conv/Conv", "/model.22/cv4.2/cv4.2.2/Conv",
                 "/model.22/proto/upsample/ConvTranspose", "/model.22/proto/cv3/act/Mul"):
        assert name in seg_names
    # m: parse_model rounds the first head AConv's 180 up to a multiple of 8
    m = build("m", size=64)
    out = {o for n in m.graph.node if n.name == "/model.16/cv1/conv/Conv" for o in n.output}
    assert static_shapes(weights_as_inputs(m))[out.pop()][1] == 184


@pytest.mark.parametrize(("task", "expected"), [
    ("detect", [(80, 80), (80, 64), (40, 80), (40, 64), (20, 80), (20, 64)]),
    ("segment", [(80, 80), (80, 64), (80, 32), (40, 80), (40, 64), (40, 32), (20, 80), (20, 64), (20, 32),
                 (160, 32)]),
])
def test_zoo_outputs_as_the_compile_logs_list_them(task: str, expected: list[tuple[int, int]]) -> None:
    model = build("c", task)
    shapes = static_shapes(weights_as_inputs(model))
    assert [o.name for o in model.graph.output] == [f"output{k}" for k in range(len(expected))]
    assert [shapes[o.name] for o in model.graph.output] == [(1, s, s, c) for s, c in expected]
    producer = {out: n for n in model.graph.node for out in n.output}
    assert all(producer[o.name].op_type == "Transpose" for o in model.graph.output)
    assert not {n.op_type for n in model.graph.node} & {"Softmax", "Sub", "Div", "TopK"}  # no DFL or decode


def test_yolov9e_cb_fusion() -> None:
    model = build("e", size=64)
    nodes = list(model.graph.node)
    # CBLinear at 10..14: one 1x1 conv with bias, no activation, split into the listed widths
    splits = [n for n in nodes if n.op_type == "Split"]
    assert [n.name.split("/")[1] for n in splits] == [f"model.{i}" for i in range(10, 15)]
    assert [len(n.output) for n in splits] == [1, 2, 3, 4, 5]
    # CBFuse at 16, 18, 21, 24, 27 sums 5, 4, 3, 2, 1 resized pieces with the main branch's map
    reduce = [n for n in nodes if n.op_type == "ReduceSum"]
    assert [n.name.split("/")[1] for n in reduce] == [f"model.{i}" for i in (16, 18, 21, 24, 27)]
    resizes = [n for n in nodes if n.op_type == "Resize"]
    assert sum(n.name.startswith("/model.16/") for n in resizes) == 5
    assert len(resizes) == 5 + 4 + 3 + 2 + 1 + 2  # + the head's two upsamples
    # the main backbone starts from the image (layer 0 is an Identity)
    first = next(n for n in nodes if n.name == "/model.15/conv/Conv")
    assert first.input[0] == "images"


@pytest.mark.parametrize(("scale", "task"), [("t", "detect"), ("e", "detect"), ("c", "segment")])
def test_runs_in_onnxruntime(scale: str, task: str) -> None:
    model = build(scale, task, 64)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, {"images": np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)})
    per_level = [(8, 80), (8, 64), (4, 80), (4, 64), (2, 80), (2, 64)]
    if task == "segment":
        per_level = [(8, 80), (8, 64), (8, 32), (4, 80), (4, 64), (4, 32), (2, 80), (2, 64), (2, 32), (16, 32)]
    assert [r.shape for r in results] == [(1, s, s, c) for s, c in per_level]
    assert all(np.isfinite(r).all() and np.abs(r).max() > 0 for r in results)


def test_board_rows_name_this_builder_with_the_published_figures() -> None:
    with DATA.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["sample"].split(":")[0] == "yolov9"]
    models = ["YOLOv9t", "YOLOv9s", "YOLOv9m", "YOLOv9c", "YOLOv9e", "YOLOv9c-Seg", "YOLOv9e-Seg"]
    assert sorted((r["board"], r["model"]) for r in rows) == sorted(
        (board, model) for board in ("rdk-x5", "rdk-s100", "rdk-s100p") for model in models)
    for row in rows:
        name, spec = parse_spec(row["sample"])
        resolved = resolve_params(name, **spec)
        assert row["input"] == f"{resolved['size']}x{resolved['size']}"
        assert row["family"] == ("yolov9_seg" if resolved["task"] == "segment" else "yolov9")
        assert (float(row["params_m"]), float(row["gflops"])) == PUBLISHED[str(resolved["scale"]),
                                                                           str(resolved["task"])]


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="scale"):
        yolov9(scale="n")
    with pytest.raises(ValueError, match="task"):
        yolov9(task="pose")
    with pytest.raises(ValueError, match="segmentation scale"):
        yolov9(scale="t", task="segment")
    with pytest.raises(ValueError, match="multiple of 32"):
        yolov9(size=100)
