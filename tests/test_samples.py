"""The shipped sample models: valid ONNX, runnable, and faithful to the published figures.

MACs are counted here independently of layerscope, from ONNX shape inference alone:
Conv = output elements x Cin/groups x kH x kW; ConvTranspose = input elements x Cout/groups x kH x
kW; MatMul/Gemm = output elements x K.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper, shape_inference

from layerscope.samples import (
    BENCHMARK_SAMPLE,
    BOARD_SAMPLES,
    DEFAULT_SAMPLE,
    SAMPLES,
    SAMPLES_VERSION,
    resolve_params,
    sample_file_name,
    sample_path,
)
from layerscope.samples.__main__ import main as samples_main

# name -> (node count, trainable params, {output name: shape}) at the default parameters
EXPECTED: dict[str, tuple[int, int, dict[str, tuple[int, ...]]]] = {
    "yolov5s": (244, 7_225_885, {"output0": (1, 25200, 85)}),
    "yolov5s_deep": (687, 20_820_637, {"output0": (1, 25200, 85)}),
    "yolov5": (244, 7_225_885, {"output0": (1, 25200, 85)}),
    "yolov8s": (235, 11_156_528, {"output0": (1, 84, 8400)}),
    "yolov8": (235, 11_156_528, {"output0": (1, 84, 8400)}),
    "crnn": (33, 8_328_741, {"output": (26, 1, 37)}),
    "dbnet": (77, 12_171_649, {"maps": (1, 1, 640, 640)}),
    "bert_tiny": (81, 4_385_920, {"last_hidden_state": (1, 128, 128), "pooler_output": (1, 128)}),
    "vit_tiny": (356, 5_717_416, {"logits": (1, 1000)}),
}

# Published parameter counts (see each builder's docstring for the source), relative tolerance.
PUBLISHED_PARAMS = {
    "yolov5s": 7.2e6,  # ultralytics/yolov5 README
    "yolov8s": 11.2e6,  # docs.ultralytics.com/models/yolov8
    "crnn": 8.3e6,  # Shi et al. 2017
    "bert_tiny": 4.4e6,  # Turc et al. 2019
    "vit_tiny": 5.7e6,  # DeiT-Ti / timm
}

# Smaller inputs for the onnxruntime runs (2 shared cores): builder kwargs and expected outputs.
RUN_AT: dict[str, tuple[dict[str, int], dict[str, tuple[int, ...]]]] = {
    "yolov5s": ({"size": 320}, {"output0": (1, 6300, 85)}),
    "yolov5s_deep": ({"size": 256}, {"output0": (1, 4032, 85)}),
    "yolov5": ({"size": 160}, {"output0": (1, 1575, 85)}),
    "yolov8s": ({"size": 320}, {"output0": (1, 84, 2100)}),
    "yolov8": ({"size": 160}, {"output0": (1, 84, 525)}),
    "crnn": ({"width": 100}, {"output": (26, 1, 37)}),
    "dbnet": ({"size": 256}, {"maps": (1, 1, 256, 256)}),
    "bert_tiny": ({"seq_len": 32}, {"last_hidden_state": (1, 32, 128), "pooler_output": (1, 128)}),
    "vit_tiny": ({"image_size": 224}, {"logits": (1, 1000)}),
}


@functools.cache
def build(name: str, **kw: int) -> onnx.ModelProto:
    return SAMPLES[name](**kw)


def static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Every tensor's static shape after strict ONNX shape inference."""
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    g = inferred.graph
    shapes: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in g.initializer}
    for vi in [*g.input, *g.value_info, *g.output]:
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = tuple(d.dim_value for d in dims)
    for node in g.node:
        if node.op_type == "Constant":
            shapes[node.output[0]] = tuple(node.attribute[0].t.dims)
    return shapes


def macs_by_op(model: onnx.ModelProto, prefix: str = "") -> dict[str, int]:
    """MACs of the tensor-engine ops whose node name starts with ``prefix``."""
    shp = static_shapes(model)
    out: dict[str, int] = {}
    for n in model.graph.node:
        if not n.name.startswith(prefix):
            continue
        if n.op_type in ("Conv", "ConvTranspose"):
            w = shp[n.input[1]]
            if n.op_type == "Conv":  # W: (Cout, Cin/g, kH, kW)
                macs = math.prod(shp[n.output[0]]) * w[1] * w[2] * w[3]
            else:  # W: (Cin, Cout/g, kH, kW)
                macs = math.prod(shp[n.input[0]]) * w[1] * w[2] * w[3]
        elif n.op_type == "MatMul":
            macs = math.prod(shp[n.output[0]]) * shp[n.input[0]][-1]
        elif n.op_type == "Gemm":
            trans_a = next((a.i for a in n.attribute if a.name == "transA"), 0)
            a = shp[n.input[0]]
            macs = math.prod(shp[n.output[0]]) * (a[0] if trans_a else a[1])
        else:
            continue
        out[n.op_type] = out.get(n.op_type, 0) + macs
    return out


def feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    result: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            result[vi.name] = rng.integers(0, 2, size=shape).astype(np.int64)
        else:
            result[vi.name] = rng.random(shape, dtype=np.float32)
    return result


def test_expectations_cover_every_sample() -> None:
    # the board zoos' architectures have test files of their own (tests/test_samples_*.py)
    assert set(EXPECTED) == set(SAMPLES) - set(BOARD_SAMPLES) == set(RUN_AT)
    assert DEFAULT_SAMPLE == "yolov5s"
    assert BENCHMARK_SAMPLE in SAMPLES


CORE = sorted(set(SAMPLES) - set(BOARD_SAMPLES))


@pytest.mark.parametrize("name", CORE)
def test_passes_full_onnx_check(name: str) -> None:
    model = build(name)
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]


@pytest.mark.parametrize("name", CORE)
def test_counts_and_output_shapes_as_documented(name: str) -> None:
    nodes, params, outputs = EXPECTED[name]
    model = build(name)
    assert len(model.graph.node) == nodes
    props = {p.key: p.value for p in model.metadata_props}
    assert int(props["params"]) == params
    # the trainable params are a subset of the stored float initializers
    floats = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    stored = sum(math.prod(t.dims) for t in floats)
    assert params <= stored
    shapes = static_shapes(model)
    assert {o.name: shapes[o.name] for o in model.graph.output} == outputs
    doc = SAMPLES[name].__doc__ or ""
    if name not in ("yolov5", "yolov8"):  # the generic builders document formulas, not counts
        assert f"{nodes} nodes" in doc


@pytest.mark.parametrize("name", CORE)
def test_runs_in_onnxruntime(name: str) -> None:
    kw, outputs = RUN_AT[name]
    model = build(name, **kw)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, feeds(model))
    got = {o.name: r.shape for o, r in zip(sess.get_outputs(), results, strict=True)}
    assert got == outputs
    assert all(np.isfinite(r).all() for r in results)


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_params_match_published(name: str) -> None:
    params = int({p.key: p.value for p in build(name).metadata_props}["params"])
    assert params == pytest.approx(PUBLISHED_PARAMS[name], rel=0.01)


def test_yolov5s_conv_macs_match_published() -> None:
    # 16.5 GFLOPs at 640 (README) = 8.25 GMACs; MMYOLO lists 8.27 G.
    macs = macs_by_op(build("yolov5s"))
    assert set(macs) == {"Conv"}
    assert macs["Conv"] == pytest.approx(8.25e9, rel=0.02)
    assert macs["Conv"] == 8_216_780_800


def test_yolov8s_conv_macs_match_published() -> None:
    macs = macs_by_op(build("yolov8s"))
    assert macs["Conv"] == pytest.approx(28.6e9 / 2, rel=0.02)


def test_vit_tiny_macs_match_published() -> None:
    assert sum(macs_by_op(build("vit_tiny")).values()) == pytest.approx(1.26e9, rel=0.02)


def test_dbnet_backbone_is_resnet18() -> None:
    model = build("dbnet", size=224)
    # torchvision resnet18: 1.81 GFLOPS (MACs) at 224, of which the fc is 0.5 M
    assert macs_by_op(model, "/backbone/")["Conv"] == pytest.approx(1.814e9 - 0.5e6, rel=0.005)
    assert "ConvTranspose" in macs_by_op(model)


def test_bert_tiny_macs() -> None:
    macs = macs_by_op(build("bert_tiny"))
    # 2 layers x (4 H^2 + 2 H I) x S + attention 2 x S^2 x H, plus the pooler
    s, h, i = 128, 128, 512
    assert macs["MatMul"] == 2 * ((4 * h * h + 2 * h * i) * s + 2 * s * s * h)
    assert macs["Gemm"] == h * h


def test_yolov5s_structure_is_the_export_graph() -> None:
    model = build("yolov5s")
    nodes = model.graph.node
    stem = nodes[0]
    assert stem.op_type == "Conv" and stem.name == "/model.0/conv/Conv"
    attrs = {a.name: list(a.ints) for a in stem.attribute if a.ints}
    assert attrs["kernel_shape"] == [6, 6] and attrs["strides"] == [2, 2] and attrs["pads"] == [2, 2, 2, 2]
    ops = [n.op_type for n in nodes]
    assert ops.count("Conv") == 60 and ops.count("Sigmoid") == 60  # 57 SiLU convs + 3 heads
    assert ops.count("MaxPool") == 3 and ops.count("Resize") == 2 and ops.count("Pow") == 3
    # Resize takes its scales from a Constant node: [1, 1, 2, 2]
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in nodes if n.op_type == "Constant"}
    for n in nodes:
        if n.op_type == "Resize":
            assert n.input[1] == ""
            np.testing.assert_array_equal(consts[n.input[2]], [1, 1, 2, 2])
    shapes = static_shapes(model)
    reshaped = [shapes[n.output[0]] for n in nodes if n.op_type == "Reshape"]
    assert reshaped[:2] == [(1, 3, 85, 80, 80), (1, 3 * 80 * 80, 85)]
    perms = [list(n.attribute[0].ints) for n in nodes if n.op_type == "Transpose"]
    assert perms == [[0, 1, 3, 4, 2]] * 3
    assert nodes[-1].op_type == "Concat" and nodes[-1].output[0] == "output0"


def test_focus_stem() -> None:
    model = build("yolov5s_deep")
    first = model.graph.node[:5]
    assert [n.op_type for n in first] == ["Slice"] * 4 + ["Concat"]
    assert len(model.graph.node) >= 650


def test_yolov8s_has_c2f_split_and_dfl() -> None:
    ops = [n.op_type for n in build("yolov8s").graph.node]
    assert ops.count("Split") == 9  # 8 C2f + box/cls
    assert ops.count("Softmax") == 1 and "Sub" in ops and "Div" in ops


def test_ocr_and_transformer_op_mix() -> None:
    crnn_ops = [n.op_type for n in build("crnn").graph.node]
    assert crnn_ops.count("LSTM") == 2
    lstm = next(n for n in build("crnn").graph.node if n.op_type == "LSTM")
    assert {a.name: a.s for a in lstm.attribute if a.name == "direction"} == {"direction": b"bidirectional"}
    assert [n.op_type for n in build("dbnet").graph.node].count("ConvTranspose") == 2
    bert_ops = {n.op_type for n in build("bert_tiny").graph.node}
    assert {"Gather", "LayerNormalization", "Erf", "Softmax", "MatMul", "Transpose", "Reshape"} <= bert_ops
    vit_ops = [n.op_type for n in build("vit_tiny").graph.node]
    assert vit_ops.count("Softmax") == 12 and vit_ops.count("LayerNormalization") == 25


def test_builders_are_deterministic() -> None:
    a = SAMPLES["crnn"](width=40).SerializeToString()
    b = SAMPLES["crnn"](width=40).SerializeToString()
    assert a == b


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(KeyError, match="unknown sample"):
        resolve_params("resnet9000")
    with pytest.raises(TypeError):
        resolve_params("yolov5s", sizes=640)
    with pytest.raises(TypeError, match="must be int"):
        resolve_params("yolov5s", size=640.0)
    with pytest.raises(ValueError, match="multiple of 32"):
        SAMPLES["yolov5s"](size=100)


def test_file_name_carries_every_parameter() -> None:
    assert sample_file_name("yolov5s") == f"yolov5s-size640-v{SAMPLES_VERSION}.onnx"
    assert sample_file_name("yolov5s", size=640) == sample_file_name("yolov5s")
    name = sample_file_name("yolov5", size=320, focus=True)
    assert name == (
        f"yolov5-size320-depth_multiple0.33-width_multiple0.5-focusTrue-num_classes80-zoo_headFalse-v{SAMPLES_VERSION}.onnx"
    )


def test_sample_path_builds_once_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(tmp_path))
    path = sample_path("bert_tiny", seq_len=16)
    assert path == tmp_path / "samples" / f"bert_tiny-seq_len16-v{SAMPLES_VERSION}.onnx"
    stat = path.stat()
    assert sample_path("bert_tiny", seq_len=16).stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp files left
    onnx.checker.check_model(onnx.load(path), full_check=True)
    other = sample_path("bert_tiny", seq_len=8, cache_dir=tmp_path / "elsewhere")
    assert other.parent == tmp_path / "elsewhere" and other.is_file()


def test_cli_prints_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert samples_main(["crnn", "width=40", "--cache-dir", str(tmp_path)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == tmp_path / f"crnn-width40-num_classes37-v{SAMPLES_VERSION}.onnx" and printed.is_file()
    assert samples_main(["nope", "--cache-dir", str(tmp_path)]) == 2
    assert "unknown sample" in capsys.readouterr().err
    assert samples_main(["crnn", "width", "--cache-dir", str(tmp_path)]) == 2


def test_python_m_default_is_yolov5s(tmp_path: Path) -> None:
    env = {**os.environ, "LAYERSCOPE_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "layerscope.samples"], env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    path = Path(out.stdout.strip())
    assert path.name == f"yolov5s-size640-v{SAMPLES_VERSION}.onnx" and path.is_file()
