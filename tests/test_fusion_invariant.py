"""The attribution invariant, at every ONNX Runtime optimization level: every runtime kernel's time goes to
the source layers it does and to no other, and a layer names the kernel its time came from.

The graphs are the transformer pieces ONNX Runtime fuses (GELU in Erf and Tanh form, decomposed LayerNorm,
attention, QuickGelu, Conv+GELU) built with ``onnx.helper``, and model-zoo networks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import F32, ModelWriter, zoo
from layerscope.measure.fusion import FusionMap, build_fusion_map, map_violations
from layerscope.measure.inputs import make_inputs
from layerscope.measure.profile import Measurement, attribution_violations
from layerscope.measure.session import SessionConfig
from layerscope.model import Graph, load_model
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.runtimes.onnxruntime.session import make_session

LEVELS = ["disable", "basic", "extended", "all"]
C, HW, T, D = 16, 16, 8, 32  # channels, image side, tokens, model width


def _const(value: float) -> np.ndarray:
    return np.array(value, np.float32)


def gelu_erf(x: str, p: str, out: str) -> list[onnx.NodeProto]:
    """0.5 * x * (1 + erf(x / sqrt(2))), as PyTorch exports nn.GELU()."""
    return [helper.make_node("Div", [x, "sqrt2"], [f"{p}/div"], name=f"{p}/Div"),
            helper.make_node("Erf", [f"{p}/div"], [f"{p}/erf"], name=f"{p}/Erf"),
            helper.make_node("Add", [f"{p}/erf", "one"], [f"{p}/add"], name=f"{p}/Add"),
            helper.make_node("Mul", [x, f"{p}/add"], [f"{p}/mul"], name=f"{p}/Mul"),
            helper.make_node("Mul", [f"{p}/mul", "half"], [out], name=f"{p}/Mul_1")]


def gelu_tanh(x: str, p: str, out: str) -> list[onnx.NodeProto]:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), as nn.GELU(approximate="tanh") exports it."""
    return [helper.make_node("Pow", [x, "three"], [f"{p}/pow"], name=f"{p}/Pow"),
            helper.make_node("Mul", [f"{p}/pow", "c044715"], [f"{p}/cube"], name=f"{p}/Mul"),
            helper.make_node("Add", [x, f"{p}/cube"], [f"{p}/inner"], name=f"{p}/Add"),
            helper.make_node("Mul", [f"{p}/inner", "sqrt2pi"], [f"{p}/scaled"], name=f"{p}/Mul_1"),
            helper.make_node("Tanh", [f"{p}/scaled"], [f"{p}/tanh"], name=f"{p}/Tanh"),
            helper.make_node("Add", [f"{p}/tanh", "one"], [f"{p}/add"], name=f"{p}/Add_1"),
            helper.make_node("Mul", [x, f"{p}/add"], [f"{p}/mul"], name=f"{p}/Mul_2"),
            helper.make_node("Mul", [f"{p}/mul", "half"], [out], name=f"{p}/Mul_3")]


def quick_gelu(x: str, p: str, out: str) -> list[onnx.NodeProto]:
    """x * sigmoid(1.702 x) (CLIP's QuickGELU)."""
    return [helper.make_node("Mul", [x, "c1702"], [f"{p}/scaled"], name=f"{p}/Mul"),
            helper.make_node("Sigmoid", [f"{p}/scaled"], [f"{p}/sig"], name=f"{p}/Sigmoid"),
            helper.make_node("Mul", [x, f"{p}/sig"], [out], name=f"{p}/Mul_1")]


def layer_norm(x: str, p: str, out: str) -> list[onnx.NodeProto]:
    """LayerNorm over the last axis, decomposed as older exporters write it."""
    return [helper.make_node("ReduceMean", [x], [f"{p}/mean"], name=f"{p}/ReduceMean", axes=[-1]),
            helper.make_node("Sub", [x, f"{p}/mean"], [f"{p}/sub"], name=f"{p}/Sub"),
            helper.make_node("Pow", [f"{p}/sub", "two"], [f"{p}/pow"], name=f"{p}/Pow"),
            helper.make_node("ReduceMean", [f"{p}/pow"], [f"{p}/var"], name=f"{p}/ReduceMean_1", axes=[-1]),
            helper.make_node("Add", [f"{p}/var", "eps"], [f"{p}/vareps"], name=f"{p}/Add"),
            helper.make_node("Sqrt", [f"{p}/vareps"], [f"{p}/std"], name=f"{p}/Sqrt"),
            helper.make_node("Div", [f"{p}/sub", f"{p}/std"], [f"{p}/norm"], name=f"{p}/Div"),
            helper.make_node("Mul", [f"{p}/norm", "gamma"], [f"{p}/scaled"], name=f"{p}/Mul"),
            helper.make_node("Add", [f"{p}/scaled", "beta"], [out], name=f"{p}/Add_1")]


def attention(x: str, p: str, out: str) -> list[onnx.NodeProto]:
    """Single-head self-attention: Q/K/V projections, Transpose, MatMul, scale, Softmax, MatMul, output."""
    return [helper.make_node("MatMul", [x, "wq"], [f"{p}/q"], name=f"{p}/q/MatMul"),
            helper.make_node("MatMul", [x, "wk"], [f"{p}/k"], name=f"{p}/k/MatMul"),
            helper.make_node("MatMul", [x, "wv"], [f"{p}/v"], name=f"{p}/v/MatMul"),
            helper.make_node("Transpose", [f"{p}/k"], [f"{p}/kt"], name=f"{p}/Transpose", perm=[0, 2, 1]),
            helper.make_node("MatMul", [f"{p}/q", f"{p}/kt"], [f"{p}/scores"], name=f"{p}/MatMul"),
            helper.make_node("Div", [f"{p}/scores", "sqrtd"], [f"{p}/scaled"], name=f"{p}/Div"),
            helper.make_node("Softmax", [f"{p}/scaled"], [f"{p}/probs"], name=f"{p}/Softmax", axis=-1),
            helper.make_node("MatMul", [f"{p}/probs", f"{p}/v"], [f"{p}/ctx"], name=f"{p}/MatMul_1"),
            helper.make_node("MatMul", [f"{p}/ctx", "wo"], [out], name=f"{p}/o/MatMul")]


def _scalars() -> dict[str, np.ndarray]:
    return {"sqrt2": _const(2 ** 0.5), "one": _const(1.0), "half": _const(0.5), "three": _const(3.0),
            "two": _const(2.0), "c044715": _const(0.044715), "sqrt2pi": _const((2 / np.pi) ** 0.5),
            "c1702": _const(1.702), "eps": _const(1e-5), "sqrtd": _const(D ** 0.5)}


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = {name: rng.standard_normal((D, D)).astype(np.float32) * 0.1 for name in ("wq", "wk", "wv", "wo",
                                                                                          "w1", "w2")}
    weights.update(gamma=np.ones(D, np.float32), beta=np.zeros(D, np.float32), b1=np.zeros(D, np.float32))
    return weights


Builder = Callable[[ModelWriter], Path]


def _conv_model(name: str, body: Callable[[str, str, str], list[onnx.NodeProto]], seed: int) -> Builder:
    """Conv -> body -> Conv on [1, 3, HW, HW]: the activation between two kernels it must not merge with."""

    def build(write: ModelWriter) -> Path:
        rng = np.random.default_rng(seed)
        nodes = [helper.make_node("Conv", ["x", "cw1", "cb1"], ["c1"], name="/c1/Conv", pads=[1, 1, 1, 1]),
                 *body("c1", "/act", "a1"),
                 helper.make_node("Conv", ["a1", "cw2", "cb2"], ["y"], name="/c2/Conv", pads=[1, 1, 1, 1])]
        init = {"cw1": rng.standard_normal((C, 3, 3, 3)).astype(np.float32), "cb1": np.zeros(C, np.float32),
                "cw2": rng.standard_normal((C, C, 3, 3)).astype(np.float32), "cb2": np.zeros(C, np.float32)}
        return write(nodes, [("x", F32, [1, 3, HW, HW])], [("y", F32, None)], {**init, **_scalars()},
                     name=f"{name}.onnx")

    return build


#: Conv -> GELU (Erf form) -> Conv: the detector case where the GELU and the next Conv were merged.
conv_gelu_conv = _conv_model("conv_gelu_conv", gelu_erf, 1)
conv_quickgelu_conv = _conv_model("conv_quickgelu_conv", quick_gelu, 2)


def _token_model(name: str, body: Callable[[str, str, str], list[onnx.NodeProto]]) -> Builder:
    """MatMul -> body -> MatMul on [1, T, D] tokens: the body between two kernels it must not merge with."""

    def build(write: ModelWriter) -> Path:
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
                 *body("h", "/blk", "b"),
                 helper.make_node("MatMul", ["b", "w2"], ["y"], name="/fc2/MatMul")]
        return write(nodes, [("x", F32, [1, T, D])], [("y", F32, None)], {**_weights(), **_scalars()},
                     name=f"{name}.onnx")

    return build


def transformer_block(write: ModelWriter) -> Path:
    """Pre-norm block: x + attn(LN(x)), then + MLP(LN(.)) with bias and Erf GELU."""
    nodes = [*layer_norm("x", "/ln1", "n1"), *attention("n1", "/attn", "att"),
             helper.make_node("Add", ["x", "att"], ["r1"], name="/Add"),
             *layer_norm("r1", "/ln2", "n2"),
             helper.make_node("MatMul", ["n2", "w1"], ["f1"], name="/fc1/MatMul"),
             helper.make_node("Add", ["f1", "b1"], ["f1b"], name="/fc1/Add"),
             *gelu_erf("f1b", "/gelu", "g"),
             helper.make_node("MatMul", ["g", "w2"], ["f2"], name="/fc2/MatMul"),
             helper.make_node("Add", ["r1", "f2"], ["y"], name="/Add_1")]
    return write(nodes, [("x", F32, [1, T, D])], [("y", F32, None)], {**_weights(), **_scalars()},
                 name="block.onnx")


def conv_hardswish_conv(write: ModelWriter) -> Path:
    """Conv -> HardSwish -> Conv: ONNX Runtime runs the HardSwish as two kernels (HardSigmoid, Mul) at
    some levels; both do the one layer's work."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "cw1", "cb1"], ["c1"], name="/c1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c1"], ["a1"], name="/act/HardSwish"),
             helper.make_node("Conv", ["a1", "cw2", "cb2"], ["y"], name="/c2/Conv", pads=[1, 1, 1, 1])]
    init = {"cw1": rng.standard_normal((C, 3, 3, 3)).astype(np.float32), "cb1": np.zeros(C, np.float32),
            "cw2": rng.standard_normal((C, C, 3, 3)).astype(np.float32), "cb2": np.zeros(C, np.float32)}
    return write(nodes, [("x", F32, [1, 3, HW, HW])], [("y", F32, None)], init, name="conv_hardswish_conv.onnx")


def focus(write: ModelWriter) -> Path:
    """YOLOv5's Focus: four strided Slice pairs and a Concat, then a Conv."""
    rng = np.random.default_rng(4)
    starts = {"zero": np.array([0], np.int64), "one": np.array([1], np.int64)}
    nodes: list[onnx.NodeProto] = []
    parts = []
    for i, (row, col) in enumerate((("zero", "zero"), ("one", "zero"), ("zero", "one"), ("one", "one"))):
        nodes += [helper.make_node("Slice", ["x", row, "end", "ax2", "step"], [f"r{i}"], name=f"Slice_r{i}"),
                  helper.make_node("Slice", [f"r{i}", col, "end", "ax3", "step"], [f"s{i}"], name=f"Slice_c{i}")]
        parts.append(f"s{i}")
    nodes += [helper.make_node("Concat", parts, ["cat"], name="Concat", axis=1),
              helper.make_node("Conv", ["cat", "cw", "cb"], ["y"], name="Conv", pads=[1, 1, 1, 1])]
    init = {**starts, "end": np.array([2 ** 62], np.int64), "ax2": np.array([2], np.int64),
            "ax3": np.array([3], np.int64), "step": np.array([2], np.int64),
            "cw": rng.standard_normal((C, 12, 3, 3)).astype(np.float32), "cb": np.zeros(C, np.float32)}
    return write(nodes, [("x", F32, [1, 3, 2 * HW, 2 * HW])], [("y", F32, None)], init, name="focus.onnx")


BUILDERS: dict[str, Builder] = {
    "conv_hardswish_conv": conv_hardswish_conv,
    "focus": focus,
    "conv_gelu_conv": conv_gelu_conv,
    "conv_quickgelu_conv": conv_quickgelu_conv,
    "gelu_erf": _token_model("gelu_erf", gelu_erf),
    "gelu_tanh": _token_model("gelu_tanh", gelu_tanh),
    "quick_gelu": _token_model("quick_gelu", quick_gelu),
    "layer_norm": _token_model("layer_norm", layer_norm),
    "attention": _token_model("attention", attention),
    "transformer_block": transformer_block,
}


def fusion_of(graph: Graph, tmp_path: Path, level: str) -> FusionMap:
    optimized = tmp_path / f"opt-{level}.onnx"
    make_session(graph.path, SessionConfig(opt_level=level), optimized_model_path=str(optimized))
    return build_fusion_map(graph, onnx.load(str(optimized), load_external_data=False))


def measure(graph: Graph, level: str) -> Measurement:
    weights = {n.id: 1.0 + i for i, n in enumerate(graph.layers)}  # unequal: a wrong split shows
    return profile_model(graph, make_inputs(graph), SessionConfig(opt_level=level, threads=1), runs=3, warmup=1,
                         weights=weights)


def assert_invariant(graph: Graph, measurement: Measurement) -> None:
    assert map_violations(measurement.fusion) == []
    assert attribution_violations(measurement.kernels, measurement.layers) == []
    assert measurement.unmapped_kernels == ()
    covered = {lid for k in measurement.fusion.kernels.values() for lid in k.layers}
    assert covered | set(measurement.fusion.eliminated) == {n.id for n in graph.layers}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_invariant_on_transformer_graphs(name: str, level: str, write_model: ModelWriter) -> None:
    graph = load_model(BUILDERS[name](write_model))
    assert_invariant(graph, measure(graph, level))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1"])
def test_invariant_on_zoo_models(name: str, level: str) -> None:
    graph = load_model(zoo(name))
    assert_invariant(graph, measure(graph, level))


@pytest.mark.parametrize("level", LEVELS)
def test_gelu_and_the_next_conv_stay_apart(level: str, write_model: ModelWriter, tmp_path: Path) -> None:
    graph = load_model(conv_gelu_conv(write_model))
    fusion = fusion_of(graph, tmp_path, level)
    gelu = ("/act/Div", "/act/Erf", "/act/Add", "/act/Mul", "/act/Mul_1")
    groups = sorted(k.layers for k in fusion.kernels.values() if k.category == "layer")
    if level in ("extended", "all"):  # ONNX Runtime fuses the five ops into one com.microsoft Gelu
        assert groups == sorted([("/c1/Conv",), gelu, ("/c2/Conv",)])
        (kernel,) = [k for k in fusion.kernels.values() if k.layers == gelu]
        assert kernel.op_type == "Gelu" and kernel.domain == "com.microsoft"
    else:
        assert groups == sorted((lid,) for lid in ("/c1/Conv", *gelu, "/c2/Conv"))
    assert map_violations(fusion) == []


def test_conv_after_gelu_takes_its_own_kernels_time(write_model: ModelWriter) -> None:
    # At level all the GELU runs on blocked (NCHWc) tensors and writes a renamed tensor: the map used to
    # merge it with the next Conv and split their joint time by estimate over all six layers.
    graph = load_model(conv_gelu_conv(write_model))
    measurement = measure(graph, "all")
    assert_invariant(graph, measurement)
    by_name = {k.samples.name: k for k in measurement.kernels}
    conv = measurement.layers["/c2/Conv"]
    (kernel,) = conv.kernels
    assert by_name[kernel].samples.op_type == "Conv" and by_name[kernel].layers == ("/c2/Conv",)
    assert conv.stats is not None and conv.stats.median_us == pytest.approx(by_name[kernel].stats.median_us)
    gelu = [measurement.layers[lid] for lid in ("/act/Div", "/act/Erf", "/act/Add", "/act/Mul", "/act/Mul_1")]
    assert {layer.kernels for layer in gelu} == {("Gelu",)}
    assert sum(layer.stats.median_us for layer in gelu if layer.stats) == pytest.approx(
        by_name["Gelu"].stats.median_us, rel=1e-9)


def test_violations_name_what_is_wrong(write_model: ModelWriter) -> None:
    # The map and the layer results as they were before the fix: the GELU kernel and the next Conv's
    # kernel both mapped to the union of their layers, and the Conv naming the GELU's kernel.
    from dataclasses import replace

    graph = load_model(conv_gelu_conv(write_model))
    measurement = measure(graph, "extended")
    fusion = measurement.fusion
    conv2 = next(k for k in fusion.kernels.values() if k.layers == ("/c2/Conv",))
    union = (*fusion.kernels["Gelu"].layers, "/c2/Conv")
    broken = replace(fusion, kernels={**fusion.kernels,
                                      "Gelu": replace(fusion.kernels["Gelu"], layers=union,
                                                      merged_with=(conv2.kernel,)),
                                      conv2.kernel: replace(conv2, layers=union, merged_with=("Gelu",))})
    problems = map_violations(broken)
    assert len(problems) == 2 and "(merged) both mapped to" in problems[0]
    assert "mapped to the same 6 layers" in problems[1]
    layers = dict(measurement.layers)
    layers["/c2/Conv"] = replace(layers["/c2/Conv"], kernels=("Gelu",))
    problems = attribution_violations(measurement.kernels, layers)
    assert problems == [f"layer '/c2/Conv': kernels ['Gelu'], mapped from [{conv2.kernel!r}]"]
    gelu_kernel = next(k for k in measurement.kernels if k.samples.name == "Gelu")
    short = replace(gelu_kernel, stats=replace(gelu_kernel.stats, median_us=gelu_kernel.stats.median_us + 5.0))
    problems = attribution_violations(tuple(short if k is gelu_kernel else k for k in measurement.kernels),
                                      measurement.layers)
    assert len(problems) == 1 and problems[0].startswith("kernel(s) ['Gelu']")


@pytest.mark.parametrize("level", ["extended", "all"])
def test_transformer_block_kernels_cover_what_they_fused(level: str, write_model: ModelWriter,
                                                         tmp_path: Path) -> None:
    graph = load_model(transformer_block(write_model))
    fusion = fusion_of(graph, tmp_path, level)
    op_of = {n.id: n.op_type for n in graph.layers}
    groups = {k.op_type: [op_of[lid] for lid in k.layers] for k in fusion.kernels.values()}
    assert groups["LayerNormalization"] == ["ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div",
                                            "Mul", "Add"]
    assert groups["Gelu"] == ["Div", "Erf", "Add", "Mul", "Mul"]
    assert groups["FusedMatMul"] == ["Transpose", "MatMul", "Div"]  # K^T and the 1/sqrt(d) scale folded in
    assert groups["Gemm"] == ["MatMul", "Add"]  # MatMulAddFusion, between two Reshapes it inserted
    reshapes = [k for k in fusion.kernels.values() if k.op_type == "Reshape"]
    assert len(reshapes) == 2 and {k.category for k in reshapes} == {"layout"}
    assert map_violations(fusion) == []


@pytest.mark.parametrize("level", ["basic", "extended"])
def test_kernels_with_unnamed_outputs_split_their_region_by_op(level: str, write_model: ModelWriter,
                                                               tmp_path: Path) -> None:
    # HardSwish run as HardSigmoid + Mul (unnamed nodes, the HardSigmoid's output new): both run the one layer.
    graph = load_model(conv_hardswish_conv(write_model))
    fusion = fusion_of(graph, tmp_path, level)
    groups = sorted((k.op_type, k.layers) for k in fusion.kernels.values() if k.category == "layer")
    assert groups == [("Conv", ("/c1/Conv",)), ("Conv", ("/c2/Conv",)), ("HardSigmoid", ("/act/HardSwish",)),
                      ("Mul", ("/act/HardSwish",))]
    # Focus as SpaceToDepth + Gather: the Gather's input is a tensor of neither graph; the eight Slices go to
    # SpaceToDepth, the Concat (a channel reorder) to the Gather -- not all nine to both.
    graph = load_model(focus(write_model))
    fusion = fusion_of(graph, tmp_path / "focus", level) if (tmp_path / "focus").mkdir() is None else fusion
    by_op = {k.op_type: k.layers for k in fusion.kernels.values() if k.category == "layer"}
    assert by_op["SpaceToDepth"] == tuple(f"Slice_{a}{i}" for i in range(4) for a in "rc")
    assert by_op["Gather"] == ("Concat",)
    assert map_violations(fusion) == []


def test_profiled_names_pair_unnamed_nodes_by_order() -> None:
    from layerscope.measure.fusion import KernelMapping

    kernels = {name: KernelMapping(name, op, "", layers, "layer") for name, op, layers in (
        ("conv", "Conv", ("c",)), ("HardSigmoid_1", "HardSigmoid", ("h1",)), ("Mul_2", "Mul", ("h1",)),
        ("HardSigmoid_4", "HardSigmoid", ("h2",)), ("Mul_5", "Mul", ("h2",)))}
    fusion = FusionMap(kernels, (), unnamed=("HardSigmoid_1", "Mul_2", "HardSigmoid_4", "Mul_5"))
    # the profiler's indices (3, 4, 10, 12) are its own: paired in order with the graph's positions
    assert fusion.profiled_names(["conv", "Mul_12", "HardSigmoid_3", "Mul_4", "HardSigmoid_10"]) == {
        "conv": "conv", "HardSigmoid_3": "HardSigmoid_1", "HardSigmoid_10": "HardSigmoid_4", "Mul_4": "Mul_2",
        "Mul_12": "Mul_5"}
    # the profiler's "Mul_5" is the second unnamed Mul by index, not the node at position 5
    assert fusion.profiled_names(["Mul_5", "Mul_9"]) == {"Mul_5": "Mul_2", "Mul_9": "Mul_5"}
    # a count that differs says the graphs differ: nothing is guessed
    assert fusion.profiled_names(["Mul_4", "Mul_7", "Mul_9"]) == {}
