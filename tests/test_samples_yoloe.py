"""``yoloe_segment``: ultralytics YOLOE-11-seg prompt-free as the RDK X5 zoo exports it.

Published figure: D-Robotics/rdk_model_zoo ``samples/vision/YOLOE-11-Seg-Prompt-Free/YOLOE-11-Seg-Prompt-Free_YUV420SP/
README.md`` ("Performance Data", repeated in ``benchmarks/data/board_latency.csv``): YOLOE-11S-Seg, 4585 classes,
13.69 M parameters: the checkpoint's, with the head's visual-prompt encoder ``SAVPE`` (ultralytics
``nn/modules/block.py``), which the prompt-free export does not run. Outputs: the zoo's ``postProcess`` (class 4585,
box 64, mask coefficients 32 per level, then the protos).
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

from layerscope.samples import BOARD_SAMPLES, SAMPLES, parse_spec, resolve_params
from layerscope.samples.yolo import ultralytics_segment, yoloe_segment

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"


@functools.cache
def build(scale: str = "s", size: int = 640, num_classes: int = 4585) -> onnx.ModelProto:
    return yoloe_segment(scale=scale, size=size, num_classes=num_classes)


def conv(cin: int, cout: int, k: int = 1) -> int:
    return cin * cout * k * k + cout


def test_registered_as_a_board_sample() -> None:
    assert BOARD_SAMPLES["yoloe_segment"] is yoloe_segment and SAMPLES["yoloe_segment"] is yoloe_segment


def test_params_match_published_with_the_visual_prompt_encoder() -> None:
    # SAVPE(ch (128, 256, 512), c3 128, embed 512) of the s head, BN folded into each Conv's bias: cv1 per level
    # Conv 3x3 to 128 twice; cv2 per level Conv 1x1 to 128; cv3 1x1 384 -> 512; cv4 3x3 384 -> 16; cv5 3x3 1 -> 16;
    # cv6 Conv 3x3 32 -> 16, Conv2d 3x3 16 -> 16
    ch = (128, 256, 512)
    savpe = (sum(conv(c, 128, 3) + conv(128, 128, 3) + conv(c, 128) for c in ch) + conv(384, 512)
             + conv(384, 16, 3) + conv(1, 16, 3) + conv(32, 16, 3) + conv(16, 16, 3))
    assert savpe == 1_849_936
    # 11.841 M exported + 1.850 M = 13.691 M: the README's 13.69 M
    assert (params(build()) + savpe) / 1e6 == pytest.approx(13.69, abs=0.005)


def test_head_against_yolo11_seg_by_hand() -> None:
    # the same backbone, neck, box, mask and proto branches as YOLO11s-seg; per level the class branch ends in the
    # vocabulary conv (1x1, c3 = 128 -> 4585) where YOLO11s-seg's ends in a 1x1 conv to 80 classes
    small = build(size=64)
    seg = ultralytics_segment(version="11", scale="s", size=64)
    assert params(small) - params(seg) == 3 * (conv(128, 4585) - conv(128, 80))
    names = {n.name for n in small.graph.node}
    for name in ("/model.23/cv3.0/cv3.0.1/cv3.0.1.1/conv/Conv", "/model.23/lrpc.0/vocab/Conv",
                 "/model.23/cv2.2/cv2.2.1/conv/Conv", "/model.23/lrpc.2/loc/Conv", "/model.23/cv5.1/cv5.1.2/Conv",
                 "/model.23/proto/upsample/ConvTranspose", "/model.10/m/m.0/attn/Softmax"):
        assert name in names
    assert not {n for n in names if "/cv3.0.2/" in n or "/cv2.0.2/" in n}  # moved into lrpc


def test_zoo_outputs_as_its_post_processing_reads_them() -> None:
    model = build()
    shapes = static_shapes(weights_as_inputs(model))
    expected = [(80, 4585), (80, 64), (80, 32), (40, 4585), (40, 64), (40, 32), (20, 4585), (20, 64), (20, 32),
                (160, 32)]
    assert [o.name for o in model.graph.output] == [f"output{k}" for k in range(10)]
    assert [shapes[o.name] for o in model.graph.output] == [(1, s, s, c) for s, c in expected]


def test_runs_in_onnxruntime() -> None:
    model = build(size=64, num_classes=100)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, {"images": np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)})
    assert [r.shape for r in results] == [(1, s, s, c) for s, c in [
        (8, 100), (8, 64), (8, 32), (4, 100), (4, 64), (4, 32), (2, 100), (2, 64), (2, 32), (16, 32)]]
    assert all(np.isfinite(r).all() and np.abs(r).max() > 0 for r in results)


def test_board_row_names_this_builder() -> None:
    with DATA.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["sample"].split(":")[0] == "yoloe_segment"]
    # the X5 zoo's YOLOE-11S; the S100 zoo's YOLOE-11 s, m, l on both S boards (its README's params column)
    assert sorted((r["board"], r["model"], r["family"], r["input"], r["params_m"]) for r in rows) == sorted(
        [("rdk-x5", "YOLOE-11S-Seg", "yoloe", "640x640", "13.69")] + [
            (board, f"YOLOE-11{scale}-Seg", "yoloe", "640x640", params) for board in ("rdk-s100", "rdk-s100p")
            for scale, params in (("s", "13.7"), ("m", "31.4"), ("l", "36.7"))])
    for row in rows:
        name, spec = parse_spec(row["sample"])
        assert resolve_params(name, **spec) == {"scale": row["model"][8].lower(), "size": 640, "num_classes": 4585}


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="scale"):
        yoloe_segment(scale="t")
