"""``ultralytics_detect``: the RDK model zoos' YOLOv5u / YOLOv8 / YOLO11 / YOLO12 detectors.

Published figures: the params (M) / FLOPs (B) columns of D-Robotics/rdk_model_zoo_s
``samples/Vision/ultralytics_YOLO_Detect/README.md`` ("BenchMark - Performance", 640x640), which repeat
the ultralytics docs. Ultralytics counts FLOPs as 2 x the MACs of the fused model's ``nn.Module`` layers
(thop), so the attention products (``torch.matmul`` in ``Attention`` / ``AAttn``) are not in them.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from tests.test_samples import macs_by_op, static_shapes

from layerscope.samples import BOARD_SAMPLES, SAMPLES
from layerscope.samples.yolo import ultralytics_detect

# version -> scale -> (params M, GFLOPs) at 640
PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {
    "v5u": {"n": (2.6, 7.7), "s": (9.1, 24.0), "m": (25.1, 64.2), "l": (53.2, 135.0), "x": (97.2, 246.4)},
    "v8": {"n": (3.2, 8.7), "s": (11.2, 28.6), "m": (25.9, 78.9), "l": (43.7, 165.2), "x": (68.2, 257.8)},
    "11": {"n": (2.6, 6.5), "s": (9.4, 21.5), "m": (20.1, 68.0), "l": (25.3, 86.9), "x": (56.9, 194.9)},
    "12": {"n": (2.6, 6.5), "s": (9.3, 21.4), "m": (20.2, 67.5), "l": (26.4, 88.9), "x": (59.1, 199.0)},
}
VARIANTS = [(v, s) for v, scales in PUBLISHED.items() for s in scales]
VERSIONS = list(PUBLISHED)

# hb_model_info_{yolov5nu,yolov8n,yolo11n,yolo12n}.txt in rdk_model_zoo_s
# samples/Vision/ultralytics_YOLO_Detect/source/reference_logs ("Model input/output info"): class map then
# box map per level, NHWC; the first is named output0, the rest carry torch's numeric names (330, 338, ...).
ZOO_OUTPUTS = [(1, 80, 80, 80), (1, 80, 80, 64), (1, 40, 40, 80), (1, 40, 40, 64), (1, 20, 20, 80), (1, 20, 20, 64)]
# the Detect layer's index per version: the README's remove_node_name references (/model.22/cv2.0/cv2.0.2/Conv...)
DETECT_INDEX = {"v5u": 24, "v8": 22, "11": 23, "12": 21}


@functools.cache
def build(version: str, scale: str, head: str = "export", size: int = 640) -> onnx.ModelProto:
    return ultralytics_detect(version=version, scale=scale, head=head, size=size)


def weights_as_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with its float initializers declared as typed inputs (same shapes), so that shape
    inference does not serialize hundreds of MB of weights; int64 shape constants stay initializers."""
    g = model.graph
    floats = [t for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT]
    typed = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in floats]
    rest = [t for t in g.initializer if t.data_type != onnx.TensorProto.FLOAT]
    graph = helper.make_graph(g.node, g.name, [*g.input, *typed], g.output, initializer=rest)
    return helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)


@functools.cache
def macs(version: str, scale: str, head: str = "export") -> dict[str, int]:
    return macs_by_op(weights_as_inputs(build(version, scale, head)))


def params(model: onnx.ModelProto) -> int:
    return int({p.key: p.value for p in model.metadata_props}["params"])


def test_registered_as_a_board_sample() -> None:
    assert BOARD_SAMPLES["ultralytics_detect"] is ultralytics_detect
    assert SAMPLES["ultralytics_detect"] is ultralytics_detect


@pytest.mark.parametrize(("version", "scale"), VARIANTS)
def test_params_and_macs_match_published(version: str, scale: str) -> None:
    pub_params_m, pub_gflops = PUBLISHED[version][scale]
    model = ultralytics_detect(version=version, scale=scale, head="export")  # not cached: up to 390 MB
    assert params(model) / 1e6 == pytest.approx(pub_params_m, rel=0.02)
    counted = macs_by_op(weights_as_inputs(model))
    assert set(counted) <= {"Conv", "MatMul"}
    # the layers ultralytics counts: within 0.6 % for all 20 (the table rounds to 0.1 B: 8.74 -> 8.7)
    assert 2 * counted["Conv"] / 1e9 == pytest.approx(pub_gflops, rel=0.01)
    total = 2 * (counted["Conv"] + counted.get("MatMul", 0)) / 1e9
    if version == "12":  # area attention at P4/P5 adds 5-15 % that the published figure leaves out
        assert total > 1.04 * pub_gflops
    else:  # v5u/v8 have no MatMul; YOLO11's one C2PSA at P5 adds under 1 %
        assert total == pytest.approx(pub_gflops, rel=0.01)


def test_mac_count_ignores_where_weights_are_stored() -> None:
    assert macs_by_op(build("12", "n")) == macs("12", "n")


def test_exact_counts_of_the_n_models() -> None:
    # ultralytics' fused summaries print these + 16 (the fixed DFL conv weights, not counted here):
    # yolov8n 3,151,904, yolo11n 2,616,248 parameters.
    assert params(build("v8", "n")) == 3_151_904 - 16
    assert params(build("11", "n")) == 2_616_248 - 16
    # attention MatMuls by hand. YOLO11n C2PSA at 20x20 (N=400), c=128: q^T k N^2 c/2 + v attn^T N^2 c.
    assert macs("11", "n")["MatMul"] == 400**2 * 128 * 3 // 2
    # YOLO12n: per ABlock 2 N^2 c_ / area; model.6 four ABlocks (c_=64, N=1600, area 4), model.8 four (128, 400, 1)
    assert macs("12", "n")["MatMul"] == 4 * 2 * 1600**2 * 64 // 4 + 4 * 2 * 400**2 * 128


@pytest.mark.parametrize("version", VERSIONS)
def test_zoo_head_differs_only_by_the_dfl_tail(version: str) -> None:
    zoo, export = build(version, "n", "zoo"), build(version, "n", "export")
    assert params(zoo) == params(export)
    # the DFL's fixed 1x1 conv, 16 bins x 4 sides x 8400 anchors
    assert macs(version, "n", "export")["Conv"] - macs(version, "n", "zoo")["Conv"] == 16 * 4 * 8400
    zoo_ops = {n.op_type for n in zoo.graph.node}
    assert "Sub" not in zoo_ops and "Div" not in zoo_ops


@pytest.mark.parametrize("version", VERSIONS)
def test_zoo_outputs_as_the_board_tool_lists_them(version: str) -> None:
    model = build(version, "n", "zoo")
    shapes = static_shapes(model)
    assert [o.name for o in model.graph.output] == [f"output{k}" for k in range(6)]
    assert [shapes[o.name] for o in model.graph.output] == ZOO_OUTPUTS
    # each box output is the NHWC transpose of the conv the zoo's config names in remove_node_name
    producer = {out: n for n in model.graph.node for out in n.output}
    by_name = {n.name: n for n in model.graph.node}
    d = DETECT_INDEX[version]
    for level in range(3):
        box = producer[f"output{2 * level + 1}"]
        assert box.op_type == "Transpose" and list(box.attribute[0].ints) == [0, 2, 3, 1]
        assert producer[box.input[0]] is by_name[f"/model.{d}/cv2.{level}/cv2.{level}.2/Conv"]
        cls = producer[f"output{2 * level}"]
        assert producer[cls.input[0]] is by_name[f"/model.{d}/cv3.{level}/cv3.{level}.2/Conv"]


@pytest.mark.parametrize("version", VERSIONS)
def test_full_onnx_check(version: str) -> None:
    for head in ("zoo", "export"):
        model = build(version, "n", head)
        onnx.checker.check_model(model, full_check=True)
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]


@pytest.mark.parametrize("version", VERSIONS)
def test_runs_in_onnxruntime_at_128(version: str) -> None:
    image = np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32)
    expected = {
        "zoo": [(1, 16, 16, 80), (1, 16, 16, 64), (1, 8, 8, 80), (1, 8, 8, 64), (1, 4, 4, 80), (1, 4, 4, 64)],
        "export": [(1, 84, 16 * 16 + 8 * 8 + 4 * 4)],
    }
    for head, shapes in expected.items():
        model = build(version, "n", head, 128)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        results = sess.run(None, {"images": image})
        assert [r.shape for r in results] == shapes
        assert all(np.isfinite(r).all() for r in results)


def test_version_specific_blocks() -> None:
    def ops(version: str, scale: str = "n") -> list[onnx.NodeProto]:
        return list(build(version, scale).graph.node)

    def depthwise(node: onnx.NodeProto, k: int) -> bool:
        attrs = {a.name: a for a in node.attribute}
        return node.op_type == "Conv" and attrs["group"].i > 1 and list(attrs["kernel_shape"].ints) == [k, k]

    # v5u: 6x6/2 stem, C3 (Sequential m), v8 Detect; v8: C2f; neither has attention nor depthwise convs
    v5u = ops("v5u")
    assert v5u[0].name == "/model.0/conv/Conv" and "/model.2/m/m.0/cv1/conv/Conv" in {n.name for n in v5u}
    for version in ("v5u", "v8"):
        assert [n.name for n in ops(version) if n.op_type in ("MatMul", "Softmax")] == [
            f"/model.{DETECT_INDEX[version]}/dfl/Softmax"
        ]
        assert not any(depthwise(n, 3) for n in ops(version))
    # YOLO11: one C2PSA at n (softmax + the 3x3 depthwise pe), depthwise 3x3 in the class branch (2 x 3 levels)
    v11 = ops("11")
    assert sum(n.op_type == "Softmax" for n in v11) == 1 + 1  # C2PSA + DFL
    assert sum(depthwise(n, 3) for n in v11 if n.name.startswith("/model.23/cv3.")) == 6
    assert sum(n.op_type == "Softmax" for n in ops("11", "l")) == 2 + 1  # C2PSA n=2 at l
    # YOLO12: 2 + 2 A2C2f repeats of two ABlocks each at n, each with a 7x7 depthwise pe; layer scale at l
    v12 = ops("12")
    assert sum(n.op_type == "Softmax" for n in v12) == 8 + 1
    assert sum(depthwise(n, 7) for n in v12) == 8
    gammas = {n.input[0] for n in ops("12", "l") if n.op_type == "Mul" and "gamma" in n.input[0]}
    assert gammas == {"model.6.gamma", "model.8.gamma"}


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="version"):
        ultralytics_detect(version="v10")
    with pytest.raises(ValueError, match="scale"):
        ultralytics_detect(scale="xl")
    with pytest.raises(ValueError, match="head"):
        ultralytics_detect(head="raw")
    with pytest.raises(ValueError, match="multiple of 32"):
        ultralytics_detect(size=100)
