"""The attention / hybrid classifiers of the RDK X5 model zoo (``layerscope.samples.attention``).

Each variant is checked against the zoo's "Parameter" column (``D-Robotics/rdk_model_zoo``,
``samples/vision/classification/README.md``) and the paper's published MACs, counted here as Conv + MatMul + Gemm
multiply-accumulates (``macs_by_op``; papers' "FLOPs"/"MAdds" for these models are MACs).
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import macs_by_op

from layerscope.samples import BOARD_SAMPLES, SAMPLES, attention

#: (family, variant) -> zoo "Parameter" (M).
ZOO_PARAMS_M: dict[tuple[str, str], float] = {
    ("repvit", "m0_9"): 5.14, ("repvit", "m1_0"): 6.83, ("repvit", "m1_1"): 8.27,
    ("efficientformer", "l1"): 12.3, ("efficientformer", "l3"): 31.3,
    ("fastvit", "t8"): 3.67, ("fastvit", "t12"): 6.82, ("fastvit", "s12"): 8.86, ("fastvit", "sa12"): 10.93,
    ("edgenext", "xx_small"): 1.33, ("edgenext", "x_small"): 2.34, ("edgenext", "small"): 5.59,
    ("edgenext", "base"): 18.51, ("efficientvit_msra", "m5"): 12.41,
}

#: (family, variant) -> (input size of the paper's figure, published GMACs). RepViT: arXiv:2307.09283 Table;
#: EfficientFormer: arXiv:2206.01191 Table 1 (224); FastViT: arXiv:2303.14189 Table (256, "FLOPs" = MACs);
#: EdgeNeXt: arXiv:2206.10589 Table (256, MAdds); EfficientViT (MSRA): arXiv:2305.07027 Table 2 (224, "FLOPs" = MACs).
PAPER_GMACS: dict[tuple[str, str], tuple[int, float]] = {
    ("repvit", "m0_9"): (224, 0.8), ("repvit", "m1_0"): (224, 1.1), ("repvit", "m1_1"): (224, 1.3),
    ("efficientformer", "l1"): (224, 1.3), ("efficientformer", "l3"): (224, 3.9),
    ("fastvit", "t8"): (256, 0.7), ("fastvit", "t12"): (256, 1.4), ("fastvit", "s12"): (256, 1.8),
    ("fastvit", "sa12"): (256, 1.9),
    ("edgenext", "xx_small"): (256, 0.261), ("edgenext", "x_small"): (256, 0.538), ("edgenext", "small"): (256, 1.26),
    ("edgenext", "base"): (256, 3.84), ("efficientvit_msra", "m5"): (224, 0.522),
}

#: FastViT's zoo/paper figures sit below every count of the architecture (see ``attention.fastvit``): our deployed
#: counts, hand-checked against timm's fastvit_t8 model card (4.0 M), are this much above the zoo column.
FASTVIT_OVER_ZOO = (1.05, 1.11)

VARIANTS = sorted(ZOO_PARAMS_M)


@functools.cache
def build(family: str, variant: str, size: int = 224) -> onnx.ModelProto:
    return attention.SAMPLES[family](variant=variant, size=size)


def params(model: onnx.ModelProto) -> int:
    return int({p.key: p.value for p in model.metadata_props}["params"])


def test_every_family_is_covered_and_registered() -> None:
    assert set(attention.SAMPLES) == {family for family, _ in VARIANTS} == {f for f, _ in PAPER_GMACS}
    for family, builder in attention.SAMPLES.items():
        assert SAMPLES[family] is builder is BOARD_SAMPLES[family]


@pytest.mark.parametrize(("family", "variant"), VARIANTS)
def test_passes_full_onnx_check(family: str, variant: str) -> None:
    model = build(family, variant)
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    assert [i.name for i in model.graph.input] == ["data"]
    assert [o.name for o in model.graph.output] == ["output"]


@pytest.mark.parametrize(("family", "variant"), VARIANTS)
def test_params_match_the_zoo(family: str, variant: str) -> None:
    ratio = params(build(family, variant)) / (ZOO_PARAMS_M[family, variant] * 1e6)
    if family == "fastvit":
        assert FASTVIT_OVER_ZOO[0] < ratio < FASTVIT_OVER_ZOO[1]
    else:
        assert ratio == pytest.approx(1.0, abs=0.02)


def test_fastvit_t8_params_match_timm() -> None:
    # timm's fastvit_t8 model card: 4.0 M params
    assert params(build("fastvit", "t8")) / 4.0e6 == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize(("family", "variant"), VARIANTS)
def test_macs_match_the_paper(family: str, variant: str) -> None:
    size, gmacs = PAPER_GMACS[family, variant]
    macs = macs_by_op(build(family, variant, size))
    assert sum(macs.values()) / (gmacs * 1e9) == pytest.approx(1.0, abs=0.03)


def test_attention_layers_are_where_the_papers_put_them() -> None:
    def count(model: onnx.ModelProto, op: str) -> int:
        return sum(n.op_type == op for n in model.graph.node)

    assert count(build("repvit", "m0_9"), "Softmax") == 0
    assert count(build("efficientformer", "l1"), "Softmax") == 1
    assert count(build("efficientformer", "l3"), "Softmax") == 4
    assert count(build("fastvit", "s12"), "Softmax") == 0
    assert count(build("fastvit", "sa12"), "Softmax") == 2
    assert count(build("edgenext", "small"), "Softmax") == 3  # one SDTA block in stages 2-4
    assert count(build("edgenext", "small"), "LayerNormalization") > 0
    assert count(build("efficientformer", "l1"), "BatchNormalization") == 0


def test_efficientvit_msra_cascaded_heads_in_windows() -> None:
    model = build("efficientvit_msra", "m5")
    softmaxes = [n for n in model.graph.node if n.op_type == "Softmax"]
    assert len(softmaxes) == 3 * 1 + 3 * 3 + 4 * 4  # one per head per block
    assert softmaxes[0].name == "/stages/stages.0/blocks/blocks.0/mixer/m/attn/Softmax"  # the zoo yaml's name
    shapes = {t.name: tuple(d.dim_value for d in t.type.tensor_type.shape.dim)
              for t in onnx.shape_inference.infer_shapes(model).graph.value_info}
    assert shapes[softmaxes[0].output[0]] == (4, 49, 49)  # 14x14 in four 7x7 windows
    assert shapes[softmaxes[-1].output[0]] == (1, 16, 16)  # 4x4 map: one window
    # timm's trainable count (12.47M) = the folded count plus one more value per folded BatchNorm channel
    inits = {t.name: t for t in model.graph.initializer}
    bn = sum(inits[n.input[1]].dims[0] for n in model.graph.node if n.op_type == "Conv" and "/se/" not in n.name)
    assert round((params(model) + bn) / 1e6, 2) == 12.47


@pytest.mark.parametrize(("family", "variant"), [("repvit", "m0_9"), ("efficientformer", "l1"), ("fastvit", "t8"),
                                                 ("fastvit", "sa12"), ("edgenext", "xx_small"),
                                                 ("efficientvit_msra", "m5")])
def test_smallest_variant_runs_at_the_smallest_size(family: str, variant: str) -> None:
    model = build(family, variant, 32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    (out,) = sess.run(None, {"data": x})
    assert out.shape == (1, 1000)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("family", sorted(attention.SAMPLES))
def test_rejects_bad_arguments(family: str) -> None:
    builder = attention.SAMPLES[family]
    with pytest.raises(ValueError, match="variant"):
        builder(variant="nope")
    with pytest.raises(ValueError, match="multiple of 32"):
        builder(size=100)
