"""Cost functions of the ops real exporters and quantizers emit beyond the core ONNX set: ONNX Runtime's
com.microsoft quantized and fused ops, random generators, the ai.onnx.ml domain; and their CPU fallback on NPUs.

Each model is built with onnx.helper, run once on ONNX Runtime (so the graph is one it accepts) and loaded with
the real loader; every expected number is worked out by hand next to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.costs import LayerCost, UnitKind, cost_graph, is_known
from layerscope.estimator import estimate_graph
from layerscope.model import Graph, load_model
from layerscope.targets import load_profile

F32, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
MS, ML = "com.microsoft", "ai.onnx.ml"


def _save(tmp_path: Path, nodes: list[onnx.NodeProto], inputs: dict[str, tuple[tuple[int, ...], int]],
          outputs: list[onnx.ValueInfoProto], inits: dict[str, np.ndarray] | None = None) -> Path:
    graph = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info(n, elem, shape) for n, (shape, elem) in inputs.items()], outputs,
        initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 9
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def _run_and_load(path: Path, feeds: dict[str, np.ndarray]) -> tuple[list[Any], Graph]:
    """ONNX Runtime's outputs of the model (it accepts the graph) and the model as layerscope loads it."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds), load_model(path)


def _cost(graph: Graph, op_type: str) -> LayerCost:
    costs = [c for c in cost_graph(graph) if c.op_type == op_type]
    assert len(costs) == 1, costs
    return costs[0]


def _out(name: str, elem: int, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _zip_map_output(name: str) -> onnx.ValueInfoProto:
    value = helper.make_tensor_type_proto(F32, [])
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_map_type_proto(I64, value)))


# --- ai.onnx.ml -----------------------------------------------------------------------------------------

def _tree_classifier() -> onnx.NodeProto:
    """Two trees over 4 features. Tree 0: root 0 branches to leaf 1 and branch 2; branch 2 to leaves 3 and 4
    (depth 2). Tree 1: root 0 branches to leaves 1 and 2 (depth 1). One class weight on every leaf."""
    return helper.make_node(
        "TreeEnsembleClassifier", ["x"], ["label", "probs"], domain=ML,
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
        nodes_featureids=[0, 0, 1, 0, 0, 2, 0, 0], nodes_values=[0.5, 0.0, 0.3, 0.0, 0.0, 1.0, 0.0, 0.0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 3, 0, 0, 1, 0, 0], nodes_falsenodeids=[2, 0, 4, 0, 0, 2, 0, 0],
        class_treeids=[0, 0, 0, 1, 1], class_nodeids=[1, 3, 4, 1, 2], class_ids=[0, 1, 0, 1, 0],
        class_weights=[1.0, 1.0, 1.0, 1.0, 1.0], classlabels_int64s=[0, 1], post_transform="NONE")


def _tree_model(tmp_path: Path) -> Path:
    zip_map = helper.make_node("ZipMap", ["probs"], ["zm"], domain=ML, classlabels_int64s=[0, 1])
    return _save(tmp_path, [_tree_classifier(), zip_map], {"x": ((3, 4), F32)},
                 [_out("label", I64, [3]), _zip_map_output("zm")])


def test_tree_ensemble_classifier_counts_the_nodes_visited_per_sample(tmp_path: Path) -> None:
    x = np.array([[0.9, 0.1, 0.0, 0.0], [0.1, 0.0, 2.0, 0.0], [0.9, 0.9, 0.0, 0.0]], dtype=np.float32)
    (labels, maps), graph = _run_and_load(_tree_model(tmp_path), {"x": x})
    assert len(labels) == 3 and len(maps) == 3  # ONNX Runtime walks the trees
    c = _cost(graph, "TreeEnsembleClassifier")
    assert c.known and c.unit_kind is UnitKind.SCALAR
    # per sample, the expected walk (each branch either way with probability 1/2): tree 0 ends on leaf 1 after 1
    # compare (1/2) or on leaf 3 or 4 after 2 (1/4 each): 1.5; tree 1 after 1; one leaf weight added per tree = 2;
    # 3 samples x 4.5 = 13.5 -> 14; + an argmax over the 2 class scores of each sample (post_transform NONE) = 6
    assert c.flops == 14 + 3 * 2
    assert c.chained_loads == 3 * 3 + 3 * 2 - 1  # ceil(3 x (2.5 compares + 2 leaves)) = 14 visits
    assert c.macs == 0 and c.params == 0  # node arrays are attributes, not initializers
    # a node entry: feature id, true id, false id (int64) + threshold (float32) + mode (1 byte) = 29 bytes;
    # 3 samples x (3 branch + 2 leaf nodes) x 29 = 435 > all 8 nodes' 232 bytes: the whole arrays
    assert c.bytes_read_weight == 8 * 29
    assert c.bytes_read_act == 3 * 4 * 4 and c.bytes_written == 3 * 8 + 3 * 2 * 4  # labels int64, scores


def test_tree_walk_is_the_expected_path_and_bytes_the_nodes_visited(tmp_path: Path) -> None:
    # one tree, a chain of 3 branches (0 -> 2 -> 4 -> leaves 5, 6) with leaves 1, 3 beside it: depth 3, but a walk
    # ends on leaf 1 after 1 compare (1/2), leaf 3 after 2 (1/4), leaf 5 or 6 after 3 (1/8 each): 1.75 expected;
    # a post_transform LOGISTIC on one regression target
    tree = helper.make_node(
        "TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1, post_transform="LOGISTIC",
        nodes_treeids=[0] * 7, nodes_nodeids=list(range(7)), nodes_featureids=[0, 0, 1, 0, 2, 0, 0],
        nodes_values=[0.5, 0.0, 0.5, 0.0, 0.5, 0.0, 0.0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 3, 0, 5, 0, 0], nodes_falsenodeids=[2, 0, 4, 0, 6, 0, 0],
        target_treeids=[0, 0, 0, 0], target_nodeids=[1, 3, 5, 6], target_ids=[0, 0, 0, 0],
        target_weights=[1.0, 2.0, 3.0, 4.0])
    path = _save(tmp_path, [tree], {"x": ((1, 3), F32)}, [_out("y", F32, [1, 1])])
    (y,), graph = _run_and_load(path, {"x": np.ones((1, 3), dtype=np.float32)})
    assert y.shape == (1, 1)
    c = _cost(graph, "TreeEnsembleRegressor")
    assert c.flops == 3 + 3  # ceil(1.75 compares + 1 leaf add) + a logistic (3) on the one score
    # one sample visits ceil(1.75 branches + 1 leaf) = 3 of the 7 nodes: 3 x 29 bytes, over 3 cache lines
    assert c.bytes_read_weight == 3 * 29 and c.chained_loads == 3 and c.chained_bytes == 3 * 64


def test_tree_ensemble_opset5_follows_leaf_flags(tmp_path: Path) -> None:
    # ai.onnx.ml TreeEnsemble: tree 0 = node 0 (true -> leaf 0, false -> node 1), node 1 (-> leaves 1, 2):
    # expected walk 1 x 1/2 + 2 x 1/4 x 2 = 1.5 compares; tree 1 = node 2 (-> leaves 3, 4): 1
    tree = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=1, aggregate_function=1, post_transform=0,
        tree_roots=[0, 2], nodes_featureids=[0, 1, 0], nodes_modes=numpy_helper.from_array(
            np.zeros(3, dtype=np.uint8)), nodes_splits=numpy_helper.from_array(np.array([0.5, 0.5, 0.2], np.float32)),
        nodes_truenodeids=[0, 1, 3], nodes_trueleafs=[1, 1, 1], nodes_falsenodeids=[1, 2, 4],
        nodes_falseleafs=[0, 1, 1], leaf_targetids=[0, 0, 0, 0, 0],
        leaf_weights=numpy_helper.from_array(np.arange(5, dtype=np.float32)))
    graph_proto = helper.make_graph([tree], "t", [_out("x", F32, [2, 2])], [_out("y", F32, [2, 1])])
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)])
    model.ir_version = 10
    path = tmp_path / "m5.onnx"
    onnx.save(model, str(path))
    (y,), graph = _run_and_load(path, {"x": np.zeros((2, 2), dtype=np.float32)})
    assert y.shape == (2, 1)
    c = _cost(graph, "TreeEnsemble")
    assert c.flops == 2 * (1.5 + 1 + 2)  # 2 samples x (2.5 compares + 1 leaf add per tree)


def test_a_tree_whose_child_is_missing_is_unknown_not_free(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    node = _tree_classifier()
    for attr in node.attribute:
        if attr.name == "nodes_falsenodeids":
            attr.ints[2] = 9  # branch 2's false child: no node 9 in tree 0
    path = _save(tmp_path, [node], {"x": ((3, 4), F32)}, [_out("label", I64, [3]), _out("probs", F32, [3, 2])])
    c = _cost(load_model(path), "TreeEnsembleClassifier")
    assert not c.known
    assert "not among its tree's nodes" in caplog.text


def test_zip_map_builds_one_entry_per_score(tmp_path: Path) -> None:
    graph = load_model(_tree_model(tmp_path))
    c = _cost(graph, "ZipMap")
    assert c.known and c.unit_kind is UnitKind.SCALAR
    assert c.flops == 3 * 2  # 3 samples x 2 classes, one insert each
    assert c.bytes_read_act == 3 * 2 * 4
    assert c.bytes_written == 3 * 2 * (4 + 8)  # a float value and an 8-byte key per entry


def test_linear_classifier_and_svm(tmp_path: Path) -> None:
    # LinearClassifier: 3 classes x 4 features; 2 samples
    linear = helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain=ML,
                              coefficients=[0.1] * 12, intercepts=[0.0, 1.0, 2.0], classlabels_ints=[0, 1, 2],
                              post_transform="SOFTMAX")
    # SVMRegressor, RBF kernel, 5 support vectors of 4 features
    svm = helper.make_node("SVMRegressor", ["x"], ["y"], domain=ML, kernel_type="RBF", kernel_params=[0.5, 0.0, 3.0],
                           n_supports=5, support_vectors=[0.2] * 20, coefficients=[1.0] * 5, rho=[0.1])
    path = _save(tmp_path, [linear, svm], {"x": ((2, 4), F32)},
                 [_out("label", I64, [2]), _out("scores", F32, [2, 3]), _out("y", F32, [2, 1])])
    (_, scores, y), graph = _run_and_load(path, {"x": np.ones((2, 4), dtype=np.float32)})
    assert scores.shape == (2, 3) and y.shape == (2, 1)
    lin = _cost(graph, "LinearClassifier")
    assert lin.macs == 2 * 12  # 2 samples x 12 coefficients
    assert lin.flops == 2 * 24 + 2 * 3 * (1 + 5 + 1)  # + per score: intercept, softmax, argmax
    assert lin.bytes_read_weight == (12 + 3) * 4
    s = _cost(graph, "SVMRegressor")
    assert s.macs == 2 * (20 + 5)  # 5 kernel evaluations x 4 features + 5 coefficients, per sample
    # per sample: 5 evaluations x (2 kernel + 4 subtracts) + the score's (post NONE 0 + 1)
    assert s.flops == 2 * 50 + 2 * (5 * 6 + 1)


# --- com.microsoft quantized ---------------------------------------------------------------------------

def test_dynamic_quantize_lstm_macs_are_an_lstms(tmp_path: Path) -> None:
    # ONNX Runtime's quantizer layout: W int8 [D, I, 4H], R int8 [D, H, 4H]; seq 5, batch 2, I 8, H 16, 2 directions
    seq, batch, inp, hidden, dirs = 5, 2, 8, 16, 2
    rng = np.random.default_rng(0)
    inits: dict[str, np.ndarray] = {
        "W": rng.integers(-8, 8, (dirs, inp, 4 * hidden)).astype(np.int8),
        "R": rng.integers(-8, 8, (dirs, hidden, 4 * hidden)).astype(np.int8),
        "B": np.zeros((dirs, 8 * hidden), np.float32),
        "W_scale": np.full(dirs, 0.01, np.float32), "W_zero_point": np.zeros(dirs, np.int8),
        "R_scale": np.full(dirs, 0.01, np.float32), "R_zero_point": np.zeros(dirs, np.int8),
    }
    node = helper.make_node("DynamicQuantizeLSTM", ["X", "W", "R", "B", "", "", "", "", "W_scale", "W_zero_point",
                                                    "R_scale", "R_zero_point"], ["Y", "Y_h", "Y_c"], domain=MS,
                            hidden_size=hidden, direction="bidirectional")
    path = _save(tmp_path, [node], {"X": ((seq, batch, inp), F32)}, [_out("Y", F32, [seq, dirs, batch, hidden])],
                 inits)
    (y,), graph = _run_and_load(path, {"X": rng.standard_normal((seq, batch, inp)).astype(np.float32)})
    assert y.shape == (seq, dirs, batch, hidden)
    c = _cost(graph, "DynamicQuantizeLSTM")
    steps = seq * dirs * batch
    assert c.macs == 4 * hidden * (inp + hidden) * steps == 30_720  # per step 4·H·(I+H) = 1536
    # per step: LSTM element-wise 15·H + bias 2·4·H = 368; quantize x_t and h (I+H)·7 = 168; dequantize the two
    # 4·H accumulators 2·4·H·2 = 256
    assert c.flops == 2 * 30_720 + steps * (368 + 168 + 256)
    assert c.params == dirs * inp * 4 * hidden + dirs * hidden * 4 * hidden + dirs * 8 * hidden  # W, R int8; B
    assert c.unit_kind is UnitKind.TENSOR


def test_matmul_integer_and_matmul_integer_to_float(tmp_path: Path) -> None:
    b = np.ones((8, 16), np.int8)
    nodes = [
        helper.make_node("MatMulInteger", ["a", "b"], ["y32"]),
        helper.make_node("MatMulIntegerToFloat", ["a", "b", "a_scale", "b_scale", "", "", "bias"], ["yf"], domain=MS),
    ]
    inits: dict[str, np.ndarray] = {"b": b, "a_scale": np.array(0.1, np.float32), "b_scale": np.array(0.2, np.float32),
             "bias": np.zeros(16, np.float32)}
    path = _save(tmp_path, nodes, {"a": ((4, 8), U8)}, [_out("y32", TensorProto.INT32, [4, 16]),
                                                        _out("yf", F32, [4, 16])], inits)
    (y32, yf), graph = _run_and_load(path, {"a": np.ones((4, 8), np.uint8)})
    assert int(y32[0, 0]) == 8 and yf.shape == (4, 16)
    integer = _cost(graph, "MatMulInteger")
    assert integer.macs == 4 * 16 * 8 and integer.flops == 2 * 512 and integer.params == 8 * 16
    to_float = _cost(graph, "MatMulIntegerToFloat")
    assert to_float.macs == 512
    assert to_float.flops == 2 * 512 + 4 * 16 * 2  # + the scale and the bias per output
    assert to_float.params == 8 * 16 + 16  # B (int8) and the bias; the scales are settings


def test_ms_attention_projects_then_attends(tmp_path: Path) -> None:
    # batch 1, sequence 4, input hidden 8, weights (8, 24) = Q, K, V of 8 each, 2 heads
    inits: dict[str, np.ndarray] = {"w": np.full((8, 24), 0.01, np.float32), "bias": np.zeros(24, np.float32)}
    node = helper.make_node("Attention", ["x", "w", "bias"], ["y"], domain=MS, num_heads=2)
    path = _save(tmp_path, [node], {"x": ((1, 4, 8), F32)}, [_out("y", F32, [1, 4, 8])], inits)
    (y,), graph = _run_and_load(path, {"x": np.ones((1, 4, 8), np.float32)})
    assert y.shape == (1, 4, 8)
    c = _cost(graph, "Attention")
    # projection 4 rows x 8 x 24 = 768; scores 4 x 4 keys x 8 = 128; context 4 x 4 x 8 = 128
    assert c.macs == 768 + 128 + 128
    # + the bias on 4 x 24 projections; per score (1 x 2 heads x 4 x 4 = 32): scale + softmax 5
    assert c.flops == 2 * 1024 + 96 + 32 * 6
    assert c.params == 8 * 24 + 24


def test_multi_head_attention_and_onnx_attention_count_scores_and_context(tmp_path: Path) -> None:
    # com.microsoft MultiHeadAttention: batch 2, 3 queries, 5 keys, hidden 8 in 2 heads (projections done)
    mha = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=2)
    path = _save(tmp_path, [mha], {"q": ((2, 3, 8), F32), "k": ((2, 5, 8), F32), "v": ((2, 5, 8), F32)},
                 [_out("y", F32, [2, 3, 8])])
    feeds = {"q": np.ones((2, 3, 8), np.float32), "k": np.ones((2, 5, 8), np.float32),
             "v": np.ones((2, 5, 8), np.float32)}
    (y,), graph = _run_and_load(path, feeds)
    assert y.shape == (2, 3, 8)
    c = _cost(graph, "MultiHeadAttention")
    assert c.macs == 2 * 3 * 5 * (8 + 8)  # 6 query rows x 5 keys x (Q·K over 8 + weights·V over 8)
    assert c.flops == 2 * 480 + (2 * 2 * 3 * 5) * 6  # 60 scores: scale + softmax
    # ONNX Attention (opset 23), grouped: Q (2, 4 heads, 3, 8), K and V (2, 2 heads, 5, 8)
    onnx_attention = helper.make_node("Attention", ["q", "k", "v"], ["y"])
    graph_proto = helper.make_graph(
        [onnx_attention], "t", [_out("q", F32, [2, 4, 3, 8]), _out("k", F32, [2, 2, 5, 8]),
                                _out("v", F32, [2, 2, 5, 8])], [_out("y", F32, [2, 4, 3, 8])])
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    path = tmp_path / "a23.onnx"
    onnx.save(model, str(path))
    feeds = {"q": np.ones((2, 4, 3, 8), np.float32), "k": np.ones((2, 2, 5, 8), np.float32),
             "v": np.ones((2, 2, 5, 8), np.float32)}
    (y,), graph = _run_and_load(path, feeds)
    assert y.shape == (2, 4, 3, 8)
    c = _cost(graph, "Attention")
    assert c.macs == 2 * 4 * 3 * 5 * (8 + 8)  # every query head attends to its group's 5 keys
    assert c.flops == 2 * 1920 + (2 * 4 * 3 * 5) * 6


# --- random generators ---------------------------------------------------------------------------------

def test_random_normal_like_reads_only_a_shape(tmp_path: Path) -> None:
    nodes = [helper.make_node("RandomNormalLike", ["x"], ["noise"], seed=1.0),
             helper.make_node("Add", ["x", "noise"], ["y"])]
    path = _save(tmp_path, nodes, {"x": ((2, 3, 4), F32)}, [_out("y", F32, [2, 3, 4])])
    (y,), graph = _run_and_load(path, {"x": np.zeros((2, 3, 4), np.float32)})
    assert y.shape == (2, 3, 4) and float(np.abs(y).sum()) > 0  # it did draw
    c = _cost(graph, "RandomNormalLike")
    assert c.known and c.unit_kind is UnitKind.VECTOR
    assert c.flops == 24 * 8  # 24 normals, 8 FLOPs each (Box-Muller: uniform 4 + transform 2 + scale, mean 2)
    assert c.bytes_read_act == 0  # the input's values are never read
    assert c.bytes_written == 24 * 4 and c.params == 0


# --- coverage -------------------------------------------------------------------------------------------

#: The ops of the brief that real exporters emit and that had no cost function: (domain, op_type).
_EMITTED = [
    *(("", op) for op in ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
                          "Multinomial", "QLinearConv", "QLinearMatMul", "MatMulInteger", "DynamicQuantizeLinear",
                          "LayerNormalization", "Gelu")),
    *((MS, op) for op in ("DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "MatMulInteger16", "MatMulIntegerToFloat",
                          "QAttention", "Attention", "MultiHeadAttention", "QLinearAdd", "QLinearMul",
                          "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool", "QLinearConcat",
                          "FusedConv", "FusedMatMul", "FusedGemm", "SkipLayerNormalization", "LayerNormalization",
                          "SimplifiedLayerNormalization", "BiasGelu", "FastGelu", "Gelu", "QuickGelu",
                          "EmbedLayerNormalization")),
    *((ML, op) for op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble", "LinearClassifier",
                          "LinearRegressor", "SVMClassifier", "SVMRegressor", "Scaler", "Normalizer", "Binarizer",
                          "ZipMap", "ArrayFeatureExtractor", "CastMap", "LabelEncoder", "OneHotEncoder", "Imputer",
                          "FeatureVectorizer")),
]


def test_every_emitted_op_has_a_cost_function() -> None:
    assert [op for op in _EMITTED if not is_known(*op)] == []


# --- NPU fallback ---------------------------------------------------------------------------------------

def test_npu_runs_ml_and_random_ops_on_the_cpu_with_a_reason(tmp_path: Path) -> None:
    nodes = [helper.make_node("RandomNormalLike", ["x"], ["noise"]), helper.make_node("Add", ["x", "noise"], ["xn"]),
             _tree_classifier()]
    nodes[2].input[0] = "xn"
    path = _save(tmp_path, nodes, {"x": ((3, 4), F32)}, [_out("label", I64, [3]), _out("probs", F32, [3, 2])])
    graph = load_model(path)
    for name in ("rdk-x5", "rdk-s100", "rdk-s100p", "rdk-x3"):
        profile = load_profile(name)
        layers = {e.layer_id: e for e in estimate_graph(graph, profile).layers}
        ops = {node.op_type: layers[node.id] for node in graph.layers}
        assert ops["RandomNormalLike"].unit == profile.cpu.name, name
        assert ops["RandomNormalLike"].fallback_reason == (
            "RandomNormalLike draws random numbers, which the BPU does not do; it runs on the CPU")
        assert ops["TreeEnsembleClassifier"].unit == profile.cpu.name, name
        assert (ops["TreeEnsembleClassifier"].fallback_reason or "").startswith(
            "TreeEnsembleClassifier is a classical-ML op of the ai.onnx.ml domain, which the BPU toolchain does not "
            "compile")
        assert ops["Add"].fallback_reason is None and ops["Add"].unit != profile.cpu.name, name
    # a GPU profile has no such rule: every layer stays on its units
    gpu = load_profile("a100-pcie")
    assert all(e.fallback_reason is None for e in estimate_graph(graph, gpu).layers)


def test_npu_runs_onnxruntime_contrib_ops_on_the_cpu(tmp_path: Path) -> None:
    node = helper.make_node("QuickGelu", ["x"], ["y"], domain=MS, alpha=1.702)
    path = _save(tmp_path, [node], {"x": ((1, 8, 4, 4), F32)}, [_out("y", F32, [1, 8, 4, 4])])
    graph = load_model(path)
    (estimate,) = estimate_graph(graph, load_profile("rdk-s100")).layers
    assert estimate.fallback_reason == ("QuickGelu is an ONNX Runtime contrib op (com.microsoft domain), outside the "
                                        "BPU's ONNX op list; it runs on the CPU (quantize and fuse with the BPU "
                                        "toolchain instead)")
