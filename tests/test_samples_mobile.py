"""timm's MobileNetV3 / V4 / EfficientNet samples (``layerscope.samples.mobile``) against the published figures.

Three counts per model: the ONNX initializer elements (BatchNorm folded) against the RDK X5 zoo's "Parameter"
column (its export script counts exactly that), the count with BatchNorm unfolded (initializers plus one value per
folded BatchNorm channel) against timm's ``param_count``, and Conv + Gemm MACs against timm's ``infer_gmacs``
(``results/benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv``; MACs, and they include the elementwise layers, so
ours are 1.5-3.5 % lower) at the size timm benchmarks.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import macs_by_op

from layerscope.samples import BOARD_SAMPLES, SAMPLES, mobile

M = 1e6
G = 1e9

# (family, variant) -> (zoo "Parameter" in M, timm param_count in M, timm infer_gmacs, timm's size).
CASES: dict[tuple[str, str], tuple[float, float, float, int]] = {
    ("mobilenetv3", "large_100"): (5.47, 5.48, 0.23, 224),
    ("mobilenetv4", "conv_small"): (3.76, 3.77, 0.19, 224),
    ("mobilenetv4", "conv_medium"): (9.68, 9.72, 0.84, 224),
    ("efficientnet", "b2"): (9.07, 9.11, 0.89, 256),
    ("efficientnet", "b3"): (12.19, 12.23, 1.63, 288),
    ("efficientnet", "b4"): (19.27, 19.34, 3.13, 320),
}
IDS = [f"{f}-{v}" for f, v in CASES]


@functools.cache
def build(family: str, variant: str, **kw: int) -> onnx.ModelProto:
    return mobile.SAMPLES[family](variant=variant, **kw)


def ops(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def dims(model: onnx.ModelProto) -> dict[str, list[int]]:
    return {t.name: list(t.dims) for t in model.graph.initializer}


def folded_bn_channels(model: onnx.ModelProto) -> int:
    """Output channels of the Convs that had a BatchNorm: all but the SE convs and MobileNetV3's ``conv_head``
    (both have their own bias and no BatchNorm)."""
    d = dims(model)
    return sum(d[n.input[1]][0] for n in ops(model, "Conv")
               if "/se/" not in n.name and not (n.name == "/conv_head/Conv" and "mobilenetv3" in model.graph.name))


def test_registered_as_board_samples() -> None:
    # EfficientNet-Lite's counts are checked against the S100 zoo's compiler in test_samples_compiler_ops
    assert {f for f, _ in CASES} | {"efficientnet_lite"} == set(mobile.SAMPLES)
    for name, fn in mobile.SAMPLES.items():
        assert BOARD_SAMPLES[name] is fn
        assert SAMPLES[name] is fn


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_valid_onnx_with_the_zoo_io_names(family: str, variant: str) -> None:
    model = build(family, variant)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["data"]
    out = model.graph.output[0]
    assert out.name == "output"
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 1000]
    assert not ops(model, "BatchNormalization")


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_params_match_the_zoo_and_timm(family: str, variant: str) -> None:
    zoo_m, timm_m, _, _ = CASES[family, variant]
    model = build(family, variant)
    folded = sum(math.prod(t.dims) for t in model.graph.initializer)
    assert abs(folded / M - zoo_m) <= 0.01  # the zoo truncates some counts (B2 9.076 -> 9.07), rounds others
    assert round((folded + folded_bn_channels(model)) / M, 2) == timm_m


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_macs_match_timm_at_its_benchmark_size(family: str, variant: str) -> None:
    _, _, gmacs, size = CASES[family, variant]
    macs = macs_by_op(build(family, variant, size=size))
    assert set(macs) == {"Conv", "Gemm"}
    ratio = sum(macs.values()) / (gmacs * G)
    assert 0.93 < ratio <= 1.0  # timm also counts the activations, BatchNorms and SE multiplies


def test_exact_totals_hand_checked() -> None:
    # timm's exact counts (unfolded): mobilenetv3_large_100 5,483,032; efficientnet_b0 5,288,548
    mnv3 = build("mobilenetv3", "large_100")
    folded = sum(math.prod(t.dims) for t in mnv3.graph.initializer)
    assert folded + folded_bn_channels(mnv3) == 5_483_032
    assert sum(macs_by_op(mnv3).values()) == pytest.approx(219 * M, rel=0.02)  # paper Table 3: 219 M MAdds
    b0 = mobile.efficientnet("b0")
    folded = sum(math.prod(t.dims) for t in b0.graph.initializer)
    assert folded + folded_bn_channels(b0) == 5_288_548
    assert sum(macs_by_op(b0).values()) == pytest.approx(0.39 * G, rel=0.02)  # paper Table 2: 0.39 B FLOPs


def test_zoo_int16_node_names_exist() -> None:
    # the zoo's yaml node_info names these nodes; the export names them so
    mnv3 = {n.name for n in build("mobilenetv3", "large_100").graph.node}
    assert {"/blocks/blocks.0/blocks.0.0/conv_dw/Conv", "/blocks/blocks.0/blocks.0.0/Add",
            "/blocks/blocks.3/blocks.3.1/conv_pwl/Conv", "/bn1/act/Mul"} <= mnv3
    b2 = {n.name for n in build("efficientnet", "b2").graph.node}
    assert {"/blocks/blocks.5/blocks.5.0/conv_pwl/Conv", "/blocks/blocks.6/blocks.6.0/se/Mul",
            "/blocks/blocks.6/blocks.6.0/se/ReduceMean", "/blocks/blocks.6/blocks.6.0/conv_dw/Conv"} <= b2


def test_mobilenetv3_activations_and_squeeze_excite() -> None:
    model = build("mobilenetv3", "large_100")
    # SE in 3 + 2 + 3 blocks: ReduceMean, ReLU, hard-sigmoid gate; SE widths round_channels(mid / 4)
    assert len(ops(model, "ReduceMean")) == 8
    se_reduce = [dims(model)[n.input[1]][0] for n in ops(model, "Conv") if n.name.endswith("se/conv_reduce/Conv")]
    assert se_reduce == [24, 32, 32, 120, 168, 168, 240, 240]
    # hard-swish = HardSigmoid + Mul: stem, 9 hard-swish IR blocks x 2, cn 960, conv_head
    gates = len(ops(model, "HardSigmoid"))
    assert gates == 8 + 1 + 2 * 9 + 1 + 1
    assert not ops(model, "Sigmoid")


def test_mobilenetv4_conv_small_uir_blocks() -> None:
    model = build("mobilenetv4", "conv_small")
    assert {n.op_type for n in model.graph.node} == {"Conv", "Relu", "Add", "GlobalAveragePool", "Flatten",
                                                    "Gemm"}
    names = [n.name for n in ops(model, "Conv")]
    # the first UIR: 5x5 dw_start (stride 1), pw_exp 64 -> 192, 5x5 dw_mid stride 2, pw_proj to 96
    first = [n for n in names if n.startswith("/blocks/blocks.2/blocks.2.0/")]
    assert first == [f"/blocks/blocks.2/blocks.2.0/{p}/conv/Conv" for p in ("dw_start", "pw_exp", "dw_mid", "pw_proj")]
    strides = {n.name: list(next(a.ints for a in n.attribute if a.name == "strides")) for n in ops(model, "Conv")}
    assert strides["/blocks/blocks.2/blocks.2.0/dw_start/conv/Conv"] == [1, 1]
    assert strides["/blocks/blocks.2/blocks.2.0/dw_mid/conv/Conv"] == [2, 2]
    assert dims(model)["blocks.blocks.2.blocks.2.0.pw_exp.conv.weight"] == [192, 64, 1, 1]
    # residual Adds on every block but a stage's first: 6 - 1 in stage 2, 6 - 1 in stage 3 (cn blocks have none)
    assert len(ops(model, "Add")) == 5 + 5


def test_efficientnet_depth_and_width_scaling() -> None:
    model = build("efficientnet", "b2")
    # B2 (w 1.1, d 1.2): repeats ceil(1.2 n) = 2, 3, 3, 4, 4, 5, 2 -> 23 blocks, all with SE
    assert len(ops(model, "ReduceMean")) == 23
    blocks = {n.name.split("/")[3] for n in ops(model, "Conv") if n.name.startswith("/blocks/")}
    assert len(blocks) == 23
    d = dims(model)
    assert d["conv_stem.weight"] == [32, 3, 3, 3]  # round_channels(35.2) = 32
    assert d["conv_head.weight"] == [1408, 352, 1, 1]  # 1280 * 1.1; last stage round_channels(352) = 352
    # SE of the first IR block (input 16): round(96 * 0.25 / 6) = 4
    assert d["blocks.blocks.1.blocks.1.0.se.conv_reduce.weight"] == [4, 96, 1, 1]
    # SiLU = Sigmoid + Mul: stem; DS blocks: dw act, SE act, gate; IR blocks: pw act, dw act, SE act, gate; head
    assert len(ops(model, "Sigmoid")) == 1 + 2 * 3 + 21 * 4 + 1


def test_smallest_runs_in_onnxruntime_at_64() -> None:
    for family, variant in (("mobilenetv3", "large_100"), ("mobilenetv4", "conv_small"), ("efficientnet", "b0")):
        model = mobile.SAMPLES[family](variant=variant, size=64, num_classes=10)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        x = np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)
        (y,) = sess.run(None, {"data": x})
        assert y.shape == (1, 10)
        assert np.isfinite(y).all()


def test_unknown_variant_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        mobile.efficientnet(variant="b7")
    with pytest.raises(ValueError, match="multiple of 32"):
        mobile.mobilenetv4(size=100)
