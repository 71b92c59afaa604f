"""The RDK X5 zoo's convolutional classifiers (``layerscope.samples.cnn``) against the published figures.

Parameters are checked twice: the ONNX initializer elements against the zoo's "Parameter" column (the zoo's
export scripts count exactly that), and the trainable count against the paper / official repo / timm figure.
MACs are tensor-engine MACs (Conv + Gemm, counted by ``macs_by_op`` from ONNX shape inference) against the
published multiply-adds: the papers' "FLOPs" columns (RepVGG, MobileOne, FasterNet, RepGhost README, ResNet,
MobileNet) are multiply-adds, and timm's ``results/benchmark-infer-*.csv`` ``infer_gmacs`` are MACs;
1 MAC = 2 FLOPs in the other convention, which none of these sources uses.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import macs_by_op, static_shapes

from layerscope.samples import BOARD_SAMPLES, SAMPLES, cnn, parse_value, resolve_params

M = 1e6
G = 1e9

# (family, variant) -> (zoo "Parameter" in M, published trainable params, published MACs).
# Sources: RepVGG paper Table 4 (params) and timm infer_gmacs of the deploy models (paper rounds to 0.1 B;
# B1g2 only in the paper: 8.8 B); MobileOne paper Table 8; ResNet-18 torchvision (11,689,512 with BN) and
# timm 1.82 GMACs; ResNeXt-50 32x4d timm 25.03M / 4.26 GMACs; MobileNetV1 paper Tables 1/6 (569 M / 4.2M,
# 0.5 width 149 M; 1.34M in tensorflow/models research/slim/nets/mobilenet_v1.md); MobileNetV2 torchvision
# 3,504,872 and paper 300 M; FasterNet paper / README; ConvNeXt timm convnext_* rows; RepGhostNet official
# README (ChengpengChen/RepGhost); GoogLeNet BVLC bvlc_googlenet (6,998,552, no BatchNorm), paper "1.5 billion
# multiply-adds", torchvision googlenet 6,624,904 params and 1.50 GFLOPS (multiply-adds).
CASES: dict[tuple[str, str], tuple[float | None, float, float]] = {
    ("repvgg", "a0"): (8.30, 8.30 * M, 1.36 * G),
    ("repvgg", "a1"): (12.78, 12.78 * M, 2.36 * G),
    ("repvgg", "a2"): (25.49, 25.49 * M, 5.12 * G),
    ("repvgg", "b0"): (14.33, 14.33 * M, 3.06 * G),
    ("repvgg", "b1g2"): (41.36, 41.36 * M, 8.8 * G),
    ("repvgg", "b1g4"): (36.12, 36.12 * M, 7.31 * G),
    ("mobileone", "s0"): (2.15, 2.1 * M, 275 * M),
    ("mobileone", "s1"): (4.83, 4.8 * M, 825 * M),
    ("mobileone", "s2"): (7.87, 7.8 * M, 1299 * M),
    ("mobileone", "s3"): (10.19, 10.1 * M, 1896 * M),
    ("mobileone", "s4"): (14.82, 14.8 * M, 2978 * M),
    ("resnet", "resnet18"): (11.27, 11.69 * M, 1.82 * G),
    ("resnet", "resnext50_32x4d"): (24.99, 25.03 * M, 4.26 * G),
    ("resnet", "resnet152"): (None, 60.19 * M, 11.51 * G),  # the S100 zoo's row prints no parameter count
    ("mobilenet", "v1"): (1.33, 4.2 * M, 569 * M),
    ("mobilenet", "v1_050"): (1.33, 1.34 * M, 149 * M),
    ("mobilenet", "v2"): (3.44, 3.50 * M, 300 * M),
    ("fasternet", "t0"): (3.96, 3.9 * M, 0.34 * G),
    ("fasternet", "t1"): (7.65, 7.6 * M, 0.85 * G),
    ("fasternet", "t2"): (15.04, 15.0 * M, 1.91 * G),
    ("fasternet", "s"): (31.18, 31.1 * M, 4.56 * G),
    ("convnext", "atto"): (3.69, 3.70 * M, 0.55 * G),
    ("convnext", "femto"): (5.22, 5.22 * M, 0.79 * G),
    ("convnext", "pico"): (9.04, 9.05 * M, 1.37 * G),
    ("convnext", "nano"): (15.59, 15.59 * M, 2.46 * G),
    ("repghost", "1.0x"): (4.07, 4.1 * M, 142 * M),
    ("repghost", "1.11x"): (4.54, 4.5 * M, 170 * M),
    ("repghost", "1.3x"): (5.48, 5.5 * M, 231 * M),
    ("repghost", "1.5x"): (6.57, 6.6 * M, 301 * M),
    ("repghost", "2.0x"): (9.79, 9.8 * M, 516 * M),
    # the paper's Table 1 "ops" column sums to 1,502 M with conv1 listed as 34 M; 3*64*49*112*112 = 118 M
    ("googlenet", "bvlc"): (6.81, 6_998_552, (1502 - 34 + 118) * M),
    ("googlenet", "torchvision"): (6.81, 6_624_904, 1.50 * G),
}

# Zoo rows whose figure is not this architecture's count (explained in the builders' docstrings):
# (family, variant) -> our initializer count / zoo figure, to 2 decimals.
ZOO_MISMATCH: dict[tuple[str, str], float] = {
    ("mobileone", "s0"): 0.97,  # the zoo's MobileOne README says the paper's 2.1, its overview 2.15
    ("resnet", "resnet18"): 1.04,  # Horizon reference model, no ONNX published; standard ResNet-18 is 11.68M
    ("mobilenet", "v1"): 3.17,  # 1.33 is the 0.5-width count (v1_050); the row's accuracy/latency are width 1.0
    ("googlenet", "bvlc"): 1.03,  # Horizon reference model, no ONNX; 6.81 is neither BVLC's 7.00M nor torchvision's
    ("googlenet", "torchvision"): 0.97,  # 6.62M (its 5x5 branch is 3x3)
}

# The smallest variant of each family, run in onnxruntime at 64x64.
SMALLEST = {"repvgg": "a0", "mobileone": "s0", "resnet": "resnet18", "mobilenet": "v1_050", "fasternet": "t0",
            "convnext": "atto", "repghost": "1.0x", "googlenet": "bvlc"}

IDS = [f"{f}-{v}" for f, v in CASES]


@functools.cache
def build(family: str, variant: str, **kw: int | bool) -> onnx.ModelProto:
    return cnn.SAMPLES[family](variant=variant, **kw)


def initializer_elements(model: onnx.ModelProto) -> int:
    return sum(math.prod(t.dims) for t in model.graph.initializer)


def trainable_params(model: onnx.ModelProto) -> int:
    return int({p.key: p.value for p in model.metadata_props}["params"])


def test_cases_cover_every_family_and_the_merged_table() -> None:
    assert {f for f, _ in CASES} == set(cnn.SAMPLES) == set(SMALLEST)
    for name, fn in cnn.SAMPLES.items():
        assert BOARD_SAMPLES[name] is fn
        assert SAMPLES[name] is fn


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_valid_onnx(family: str, variant: str) -> None:
    model = build(family, variant)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["data"]
    out = model.graph.output[0]
    assert out.name == "output"
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 1000]


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_params_match_the_zoo_and_the_published_count(family: str, variant: str) -> None:
    zoo_m, published, _ = CASES[family, variant]
    model = build(family, variant)
    if zoo_m is not None:
        ratio = initializer_elements(model) / (zoo_m * M)
        if (family, variant) in ZOO_MISMATCH:
            assert round(ratio, 2) == ZOO_MISMATCH[family, variant]
        else:
            assert ratio == pytest.approx(1.0, abs=0.02)
    assert trainable_params(model) == pytest.approx(published, rel=0.02)


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_macs_match_the_published_multiply_adds(family: str, variant: str) -> None:
    model = build(family, variant)
    macs = macs_by_op(model)
    assert set(macs) == {"Conv", "Gemm"}
    head = model.graph.node[-1]
    assert head.op_type == "Gemm"
    weight = next(t for t in model.graph.initializer if t.name == head.input[1])
    assert macs["Gemm"] == math.prod(weight.dims)  # one FC at batch 1
    assert sum(macs.values()) == pytest.approx(CASES[family, variant][2], rel=0.03)


@pytest.mark.parametrize("family", sorted(SMALLEST))
def test_smallest_variant_runs_at_64(family: str) -> None:
    model = build(family, SMALLEST[family], size=64, num_classes=10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)
    (y,) = sess.run(None, {"data": x})
    assert y.shape == (1, 10)
    assert np.isfinite(y).all()


def ops(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def group(node: onnx.NodeProto) -> int:
    return next(a.i for a in node.attribute if a.name == "group")


def test_repvgg_deploy_blocks_and_grouped_layers() -> None:
    a0, b1g4 = build("repvgg", "a0"), build("repvgg", "b1g4")
    # 22 blocks (stage0 + 2 + 4 + 14 + 1), each one 3x3 Conv + Relu, nothing else but the head
    assert len(ops(a0, "Conv")) == len(ops(a0, "Relu")) == 22
    assert {n.op_type for n in a0.graph.node} == {"Conv", "Relu", "GlobalAveragePool", "Reshape", "Gemm"}
    assert a0.graph.node[2].name == "/stage1.0/rbr_reparam/Conv"
    assert "stage1.0.rbr_reparam.weight" in {t.name for t in a0.graph.initializer}
    # B1g4: layers 2, 4, ..., 26 (stage0 = layer 0, stage1 = layers 1-4) grouped by 4: stage1.1, stage1.3,
    # stage2.1, ...
    groups = {n.name: group(n) for n in ops(b1g4, "Conv")}
    assert groups["/stage1.0/rbr_reparam/Conv"] == 1
    assert groups["/stage1.1/rbr_reparam/Conv"] == 4
    assert groups["/stage2.0/rbr_reparam/Conv"] == 1
    assert groups["/stage2.1/rbr_reparam/Conv"] == 4
    assert sum(g == 4 for g in groups.values()) == 13


def test_mobileone_depthwise_pointwise_pairs_and_s4_squeeze_excitation() -> None:
    s0, s4 = build("mobileone", "s0"), build("mobileone", "s4")
    convs = ops(s0, "Conv")
    assert len(convs) == 1 + 2 * (2 + 8 + 10 + 1)
    assert [group(n) > 1 for n in convs[1:5]] == [True, False, True, False]
    # S4: SE on both modules of the last 5 blocks of stage 3 and the one block of stage 4
    assert len(ops(s4, "AveragePool")) == len(ops(s4, "Sigmoid")) == 2 * (5 + 1)
    assert not ops(s0, "AveragePool")


def test_fasternet_partial_conv_on_a_quarter_of_the_channels() -> None:
    t0, t2 = build("fasternet", "t0"), build("fasternet", "t2")
    assert len(ops(t0, "Split")) == len(ops(t0, "Concat")) == 1 + 2 + 8 + 2
    pconv = next(n for n in ops(t0, "Conv") if n.name.endswith("partial_conv3/Conv"))
    weight = next(t for t in t0.graph.initializer if t.name == pconv.input[1])
    assert list(weight.dims) == [10, 10, 3, 3]  # 40 / 4 channels, no bias
    assert len(pconv.input) == 2
    assert ops(t0, "Erf") and not ops(t2, "Erf")  # T0/T1 GELU, T2/S ReLU


def test_repghost_keeps_the_fusion_batchnorm_unless_deployed() -> None:
    exported, deployed = build("repghost", "1.0x"), build("repghost", "1.0x", deploy=True)
    assert len(ops(exported, "BatchNormalization")) == 2 * 16  # two ghost modules in each of 16 bottlenecks
    assert not ops(deployed, "BatchNormalization")
    assert macs_by_op(exported) == macs_by_op(deployed)
    dims = {t.name: t.dims[0] for t in exported.graph.initializer}
    bn_channels = sum(dims[n.input[1]] for n in ops(exported, "BatchNormalization"))
    assert bn_channels == 3456 + 1488  # ghost1 widths 8+24+...+480, ghost2 widths 16+24+...+160 (cfgs at 1.0x)
    assert trainable_params(exported) - trainable_params(deployed) == 2 * bn_channels  # BN scale and shift


def test_convnext_is_v1_without_grn() -> None:
    atto = build("convnext", "atto")
    assert len(ops(atto, "LayerNormalization")) == 1 + 3 + 12 + 1  # stem, downsamples, blocks, head
    assert not ops(atto, "ReduceMean")  # GRN (ConvNeXt V2) would need a spatial norm


def test_googlenet_inception_branches_and_the_bvlc_differences() -> None:
    bvlc, tv = build("googlenet", "bvlc"), build("googlenet", "torchvision")
    assert len(ops(bvlc, "Concat")) == len(ops(tv, "Concat")) == 9
    assert len(ops(bvlc, "Conv")) == 3 + 9 * 6
    assert len(ops(bvlc, "LRN")) == 2 and not ops(tv, "LRN")
    kernels = {n.name: next(a.ints for a in n.attribute if a.name == "kernel_shape") for n in ops(bvlc, "Conv")}
    assert list(kernels["/inception3a/branch3/1/conv/Conv"]) == [5, 5]
    tv_kernels = {n.name: next(a.ints for a in n.attribute if a.name == "kernel_shape") for n in ops(tv, "Conv")}
    assert list(tv_kernels["/inception3a/branch3/1/conv/Conv"]) == [3, 3]
    # ceil-mode pools: 112 -> 56 -> 28 -> 14 -> 7; the last inception is 1024 channels at 7x7
    shapes = static_shapes(bvlc)
    last = ops(bvlc, "Concat")[-1]
    assert shapes[last.output[0]] == (1, 1024, 7, 7)
    # 16 extra weights per (5x5 reduce x 5x5 output) pair over the 9 modules
    assert initializer_elements(bvlc) - initializer_elements(tv) == 16 * 23808


def test_unknown_variant_and_bad_size_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        cnn.repvgg(variant="b3")
    with pytest.raises(ValueError, match="multiple of 32"):
        cnn.mobileone(size=100)


@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=IDS)
def test_variant_names_survive_the_command_line(family: str, variant: str) -> None:
    # ``python -m layerscope.samples repghost variant=1.0x`` parses values as int/float where it can
    assert resolve_params(family, variant=parse_value(variant))["variant"] == variant
