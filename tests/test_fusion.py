"""The fusion map: every runtime kernel mapped back to the source layers it covers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import F32, ZOO_MODELS, ModelWriter, zoo
from layerscope.measure.fusion import FusionMap, build_fusion_map, map_violations
from layerscope.measure.session import SessionConfig
from layerscope.model import Graph, load_model
from layerscope.runtimes.onnxruntime.session import make_session
from layerscope.samples import sample_path


def fusion_of(graph: Graph, tmp_path: Path, level: str) -> FusionMap:
    optimized = tmp_path / f"opt-{level}.onnx"
    make_session(graph.path, SessionConfig(opt_level=level), optimized_model_path=str(optimized))
    runtime_graph = onnx.load(str(optimized), load_external_data=False)
    optimized.unlink()  # the optimized model holds the weights (vgg19's: 0.5 GB) and pytest keeps its folders
    return build_fusion_map(graph, runtime_graph)


def ops(graph: Graph, ids: tuple[str, ...]) -> list[str]:
    by_id = {n.id: n.op_type for n in graph.layers}
    return [by_id[i] for i in ids]


REAL_MODELS = [*ZOO_MODELS, "yolov5s", "yolov8s", "crnn", "dbnet", "bert_tiny", "vit_tiny"]


@pytest.mark.parametrize("level", ["disable", "basic", "extended", "all"])
@pytest.mark.parametrize("model", REAL_MODELS, ids=lambda m: m if isinstance(m, str) else m.stem)
def test_every_kernel_and_every_layer_is_accounted_for(model: Path | str, level: str, tmp_path: Path) -> None:
    path = sample_path(model, **({"size": 320} if model in ("yolov5s", "yolov8s", "dbnet") else {})) \
        if isinstance(model, str) else model
    graph = load_model(path)
    fusion = fusion_of(graph, tmp_path, level)
    unmapped = [k.kernel for k in fusion.kernels.values() if k.category == "unmapped"]
    assert unmapped == []
    covered = {lid for k in fusion.kernels.values() for lid in k.layers}
    assert covered | set(fusion.eliminated) == {n.id for n in graph.layers}
    assert covered.isdisjoint(fusion.eliminated)
    assert map_violations(fusion) == []  # one kernel per layer, none merged


def test_resnet50_nchwc_conv_covers_conv_bn_sum_relu(tmp_path: Path) -> None:
    graph = load_model(zoo("resnet50"))
    fusion = fusion_of(graph, tmp_path, "all")
    groups = sorted(ops(graph, k.layers) for k in fusion.kernels.values() if k.category == "layer")
    # 53 convolutions, each one kernel: 16 end a residual block (Conv+BN+Sum+Relu), 33 more carry their
    # Relu (Conv+BN+Relu), 4 are plain Conv+BN (the projection shortcuts); then MaxPool, AveragePool,
    # Reshape, Gemm, Softmax alone.
    assert groups.count(["Conv", "BatchNormalization", "Sum", "Relu"]) == 16
    assert groups.count(["Conv", "BatchNormalization", "Relu"]) == 33
    assert groups.count(["Conv", "BatchNormalization"]) == 4
    assert sum(len(g) for g in groups) == len(graph.layers)
    layout = [k for k in fusion.kernels.values() if k.category == "layout"]
    assert [k.op_type for k in layout] == ["ReorderOutput"]


def test_extended_level_fuses_conv_bn_relu_into_fusedconv(tmp_path: Path) -> None:
    graph = load_model(zoo("resnet50"))
    fusion = fusion_of(graph, tmp_path, "extended")
    fused = [k for k in fusion.kernels.values() if k.op_type == "FusedConv"]
    assert fused and all(ops(graph, k.layers) == ["Conv", "BatchNormalization", "Relu"] for k in fused)


def test_removed_identity_is_covered_by_its_consumer(write_model: ModelWriter, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Identity", ["c"], ["i"], name="identity"),
        helper.make_node("Sigmoid", ["i"], ["y"], name="sigmoid"),
    ]
    graph = load_model(write_model(nodes, [("x", F32, [1, 4, 8, 8])], [("y", F32, None)],
                                   {"w": np.ones((4, 4, 1, 1), np.float32)}))
    fusion = fusion_of(graph, tmp_path, "basic")
    groups = {k.kernel: k.layers for k in fusion.kernels.values() if k.layers}
    assert sorted(groups.values()) == [("conv",), ("identity", "sigmoid")]
    assert fusion.layer_status("conv") == "measured"
    assert fusion.layer_status("identity") == "fused"


def test_yolov5s_silu_and_blocked_layout_nodes_map_one_to_one(tmp_path: Path) -> None:
    # At level all, Sigmoid+Mul (SiLU) become one QuickGelu on NCHWc tensors and Concat/Add move to the
    # blocked layout with renamed outputs: each must still cover exactly its own source layers.
    graph = load_model(sample_path("yolov5s", size=320))
    fusion = fusion_of(graph, tmp_path, "all")
    groups = [sorted(ops(graph, k.layers)) for k in fusion.kernels.values() if k.category == "layer"]
    assert groups.count(["Mul", "Sigmoid"]) == 57  # every SiLU after a Conv (57 Conv+SiLU in YOLOv5s)
    # the decode head's three Slices of one tensor become one Split (GatherSliceToSplitFusion)
    assert [g for g in groups if len(g) > 2] == [["Slice", "Slice", "Slice"]] * 3
    assert not any(k.merged_with for k in fusion.kernels.values())
