"""``fcos_efficientnet``: Horizon HAT's FCOS-EfficientNet-B0 (BiFPN neck) as the RDK X5 zoo deploys it.

Structure: HAT ``configs/detection/fcos/fcos_efficientnetb0_mscoco.py`` (EfficientNet-B0 with ReLU and no SE, BiFPN
``bifpn_sum`` 64 wide, 3 cells, FCOSHead 64 wide with 4 stacked convs) and the zoo's ``hb_perf`` graph
(``samples/vision/FCOS/imgs/fcos_efficientnetb0_512x512_nv12.png``: fifteen NHWC outputs). No published parameter
count or FLOPs.
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
from tests.test_samples_yolo_zoo import weights_as_inputs

from layerscope.samples import BOARD_SAMPLES, SAMPLES, parse_spec, resolve_params
from layerscope.samples.fcos import fcos_efficientnet

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"


@functools.cache
def build(size: int = 512) -> onnx.ModelProto:
    return fcos_efficientnet(size=size)


def test_registered_as_a_board_sample() -> None:
    assert BOARD_SAMPLES["fcos_efficientnet"] is fcos_efficientnet and SAMPLES["fcos_efficientnet"] is fcos_efficientnet


def test_outputs_as_the_zoo_hb_perf_graph_lists_them() -> None:
    model = build()
    shapes = static_shapes(weights_as_inputs(model))
    sides = (64, 32, 16, 8, 4)
    expected = [(1, s, s, c) for c in (80, 4, 1) for s in sides]
    assert [o.name for o in model.graph.output] == [f"output{k}" for k in range(15)]
    assert [shapes[o.name] for o in model.graph.output] == expected


def test_structure_by_hand() -> None:
    model = build(128)
    nodes = list(model.graph.node)
    ops = [n.op_type for n in nodes]
    # backbone: ReLU, no squeeze-excite (no pooling, no sigmoid anywhere)
    assert "Sigmoid" not in ops and "ReduceMean" not in ops and "GlobalAveragePool" not in ops
    # neck: P6, P7 by 2x2 max pools, then per cell four bilinear upsamples and four max pools, three cells
    assert ops.count("MaxPool") == 2 + 3 * 4
    assert sum(n.op_type == "Resize" and n.name.startswith("/neck/") for n in nodes) == 3 * 4
    # width-changing 1x1 convs: P5 -> P6 (320), then in the first cell P5 twice (320), P4 twice (112), P3 (40)
    laterals = [n for n in nodes if "/lateral_conv/" in n.name]
    dims = {t.name: tuple(t.dims) for t in model.graph.initializer}
    assert sorted(dims[n.input[1]][1] for n in laterals) == [40, 112, 112, 320, 320, 320]
    # a later cell: 8 nodes of a 3x3 depthwise conv (no bias) and a 1x1 conv (with bias) at width 64
    cell = sum(math.prod(t.dims) for t in model.graph.initializer
               if t.name.startswith("neck.bifpn_layers.2.") and t.name.rsplit(".", 1)[-1] in ("weight", "bias"))
    assert cell == 8 * (64 * 9 + 64 * 64 + 64)
    # head: per level 2 towers x 4 separable convs (2 convs each) + 3 predictors
    assert sum(n.op_type == "Conv" and n.name.startswith("/head/") for n in nodes) == 5 * (2 * 4 * 2 + 3)
    # centerness reads the box tower
    producer = {o: n.name for n in nodes for o in n.output}
    ctr = next(n for n in nodes if n.name == "/head/level0/conv_centerness/Conv")
    assert "/reg_convs.3/" in producer[ctr.input[0]]


def test_runs_in_onnxruntime() -> None:
    model = build(128)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, {"img": np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32)})
    assert [r.shape for r in results] == [(1, s, s, c) for c in (80, 4, 1) for s in (16, 8, 4, 2, 1)]
    assert all(np.isfinite(r).all() and np.abs(r).max() > 0 for r in results)


def test_board_row_names_this_builder() -> None:
    with DATA.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["sample"].split(":")[0] == "fcos_efficientnet"]
    assert [(r["board"], r["model"], r["family"], r["input"]) for r in rows] == [
        ("rdk-x5", "fcos_efficientnetb0", "fcos", "512x512")]
    name, spec = parse_spec(rows[0]["sample"])
    assert resolve_params(name, **spec) == {"variant": "b0", "size": 512, "num_classes": 80}


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="variant"):
        fcos_efficientnet(variant="b2")
    with pytest.raises(ValueError, match="size"):
        fcos_efficientnet(size=96)
