"""EfficientFormerV2 (``layerscope.samples.efficientformer_v2``), the RDK X5 zoo's EfficientFormerv2_s0/s1/s2.

Params against the zoo's "Parameter" column (``D-Robotics/rdk_model_zoo``, ``samples/vision/classification/
README.md``: 3.57 / 6.12 / 12.6 M, both classifier heads, as the timm model the zoo exports keeps them) and MACs
against the paper's GMACs (arXiv:2212.08059, Table: S0 0.40, S1 0.65, S2 1.25), counted as Conv + MatMul + Gemm
multiply-accumulates (``macs_by_op``).
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import macs_by_op

from layerscope.samples import BOARD_SAMPLES, SAMPLES, efficientformer_v2, parse_spec

ZOO_PARAMS_M = {"s0": 3.57, "s1": 6.12, "s2": 12.6}
PAPER_GMACS = {"s0": 0.40, "s1": 0.65, "s2": 1.25}
#: One classifier head's parameters at 1000 classes (weight + bias): the distillation head the zoo's count includes.
HEAD_PARAMS = {"s0": 176 * 1000 + 1000, "s1": 224 * 1000 + 1000, "s2": 288 * 1000 + 1000}


@functools.cache
def build(variant: str, size: int = 224) -> onnx.ModelProto:
    return efficientformer_v2.efficientformerv2(variant=variant, size=size)


def params(model: onnx.ModelProto) -> int:
    return int({p.key: p.value for p in model.metadata_props}["params"])


def count(model: onnx.ModelProto, op: str) -> int:
    return sum(n.op_type == op for n in model.graph.node)


def test_registered_as_a_board_sample() -> None:
    assert SAMPLES["efficientformerv2"] is BOARD_SAMPLES["efficientformerv2"] is efficientformer_v2.efficientformerv2
    assert parse_spec("efficientformerv2:variant=s1") == ("efficientformerv2", {"variant": "s1"})


@pytest.mark.parametrize("variant", sorted(ZOO_PARAMS_M))
def test_passes_full_onnx_check(variant: str) -> None:
    model = build(variant)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["data"]
    assert [o.name for o in model.graph.output] == ["output"]


@pytest.mark.parametrize("variant", sorted(ZOO_PARAMS_M))
def test_params_match_the_zoo_with_both_heads(variant: str) -> None:
    n = params(build(variant))
    assert n / (ZOO_PARAMS_M[variant] * 1e6) == pytest.approx(1.0, abs=0.01)
    # without the distillation head the count falls 2.4-5.5% short: the zoo's figure includes it
    assert (n - HEAD_PARAMS[variant]) / (ZOO_PARAMS_M[variant] * 1e6) < 0.98


@pytest.mark.parametrize("variant", sorted(PAPER_GMACS))
def test_macs_match_the_paper(variant: str) -> None:
    macs = macs_by_op(build(variant))
    assert sum(macs.values()) / (PAPER_GMACS[variant] * 1e9) == pytest.approx(1.0, abs=0.02)


def test_s0_hand_counted() -> None:
    # stem: 3x3/2 3->16 at 112x112, 3x3/2 16->32 at 56x56; head: 176 -> 1000 twice (Gemm)
    macs = macs_by_op(build("s0"))
    assert macs["Gemm"] == 2 * 176 * 1000
    model = build("s0")
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert convs[0].name == "/stem/conv1/Conv" and convs[1].name == "/stem/conv2/Conv"
    inits = {i.name: i for i in model.graph.initializer}
    assert list(inits[convs[0].input[1]].dims) == [16, 3, 3, 3]
    assert list(inits[convs[1].input[1]].dims) == [32, 16, 3, 3]


def test_attention_where_the_zoo_config_places_its_softmax_nodes() -> None:
    # the zoo's yaml moves each attention Softmax to the BPU by name: s0/s1 five, s2 nine (its list names blocks.4
    # of stage 4 twice); stage 3's last num_vit blocks, stage 4's downsample and its last num_vit blocks
    mixer = "/stages/stages.{}/blocks/blocks.{}/token_mixer/Softmax"
    downsample = "/stages/stages.3/downsample/attn/Softmax"
    expected = {"s0": {mixer.format(2, 4), mixer.format(2, 5), downsample, mixer.format(3, 2), mixer.format(3, 3)},
                "s1": {mixer.format(2, 7), mixer.format(2, 8), downsample, mixer.format(3, 4), mixer.format(3, 5)}}
    for variant, names in expected.items():
        assert {n.name for n in build(variant).graph.node if n.op_type == "Softmax"} == names
    assert count(build("s2"), "Softmax") == 9
    # the only unfolded BatchNorm is the final norm; stage 3's strided attention is upsampled back bilinearly
    assert count(build("s0"), "BatchNormalization") == 1
    resizes = [n for n in build("s0").graph.node if n.op_type == "Resize"]
    assert len(resizes) == 2
    modes = [onnx.helper.get_attribute_value(a) for n in resizes for a in n.attribute if a.name == "mode"]
    assert modes == [b"linear", b"linear"]


def test_attention_bias_tables_follow_the_grids() -> None:
    inits = {i.name: tuple(i.dims) for i in build("s0").graph.initializer if i.name.endswith("attention_biases")}
    assert inits["stages.stages.2.blocks.blocks.4.token_mixer.attention_biases"] == (8, 49, 49)
    assert inits["stages.stages.3.downsample.attn.attention_biases"] == (8, 49, 196)


def test_runs_at_the_smallest_size() -> None:
    model = build("s0", 32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {"data": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)})
    assert out.shape == (1, 1000)
    assert np.isfinite(out).all()


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="variant"):
        efficientformer_v2.efficientformerv2(variant="l")
    with pytest.raises(ValueError, match="multiple of 32"):
        efficientformer_v2.efficientformerv2(size=100)
