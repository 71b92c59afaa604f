"""The LayerNorm of the timm classifiers as the RDK X5 zoo exports them (``layernorm="decomposed"``): torch at
``opset_version=11`` (each family's README in ``D-Robotics/rdk_model_zoo``) writes ``layer_norm`` as primitive ops,
which the zoo's yaml names (``.../downsample.0/ReduceMean``, ``Sub``, ``Pow``). Same weights, params, MACs and
outputs as the single ``LayerNormalization``; the default samples keep the latter."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tests.test_samples import macs_by_op

from layerscope.samples import SAMPLES, parse_spec

#: family -> (variant, LayerNorms at 64x64 input): ConvNeXt-atto: stem, 3 downsamples, 12 blocks, head;
#: EdgeNeXt-xx_small: stem, 3 downsamples, 9 conv blocks, 3 SDTA blocks x 2, head; EfficientFormer-l1: one
#: attention block x 2 and the final norm.
FAMILIES = {"convnext": ("atto", 17), "edgenext": ("xx_small", 20), "efficientformer": ("l1", 3)}
#: torch's opset-11 ``layer_norm``: mean, centre, square, mean, + eps, sqrt, divide, weight, bias.
SEQUENCE = ["ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add"]


def _build(family: str, layernorm: str) -> onnx.ModelProto:
    variant, _ = FAMILIES[family]
    return SAMPLES[family](variant=variant, size=64, layernorm=layernorm)


def _params(model: onnx.ModelProto) -> int:
    return int({p.key: p.value for p in model.metadata_props}["params"])


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no LayerNorm re-fusion
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"data": x})[0])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_decomposed_layernorm_is_the_same_network(family: str) -> None:
    fused, decomposed = _build(family, "fused"), _build(family, "decomposed")
    onnx.checker.check_model(decomposed, full_check=True)
    norms = FAMILIES[family][1]
    before = collections.Counter(n.op_type for n in fused.graph.node)
    after = collections.Counter(n.op_type for n in decomposed.graph.node)
    assert before["LayerNormalization"] == norms and after["LayerNormalization"] == 0
    # each LayerNormalization became the nine ops of SEQUENCE, nothing else changed
    assert after - before == collections.Counter({op: n * norms for op, n in collections.Counter(SEQUENCE).items()})
    assert _params(decomposed) == _params(fused)
    assert macs_by_op(decomposed) == macs_by_op(fused)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    want, got = _run(fused, x), _run(decomposed, x)
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * float(np.abs(want).max()))


def test_convnext_downsample_norm_has_the_zoo_op_sequence_and_names() -> None:
    model = _build("convnext", "decomposed")
    scope = "/stages.3/downsample.0/"
    nodes = [n for n in model.graph.node if n.name.startswith(scope)]
    assert [n.op_type for n in nodes] == ["Transpose", *SEQUENCE, "Transpose"]
    # the names the zoo's ConvNeXt yaml gives these nodes (under timm's deeper module path)
    assert {f"{scope}{leaf}" for leaf in ("ReduceMean", "ReduceMean_1", "Sub", "Pow")} <= {n.name for n in nodes}
    reduce = [n for n in nodes if n.op_type == "ReduceMean"]
    assert all(onnx.helper.get_attribute_value(a) in ([-1], 1) for n in reduce for a in n.attribute)


def test_the_default_keeps_layernormalization_and_a_bad_form_is_refused() -> None:
    assert any(n.op_type == "LayerNormalization" for n in SAMPLES["convnext"](size=64).graph.node)
    with pytest.raises(ValueError, match="layernorm must be one of fused, decomposed"):
        SAMPLES["edgenext"](size=64, layernorm="opset11")


def test_the_board_table_spec_parses() -> None:
    assert parse_spec("convnext:variant=atto;layernorm=decomposed") == ("convnext", {"variant": "atto",
                                                                                     "layernorm": "decomposed"})
