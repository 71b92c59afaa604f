"""Cost model: hand-checked MACs/FLOPs/bytes of small ONNX models built with onnx.helper.

Every expected number is worked out by hand in the comment next to it; the models go through the
real loader (``layerscope.model.load_model``), so shapes come from ONNX shape inference.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.costs import KNOWN_OPS, LayerCost, UnitKind, cost_graph, cost_layer, is_known
from layerscope.costs.matmul import fused_matmul_k, parse_einsum
from layerscope.costs.pool import interpolation_flops
from layerscope.model import Graph, Node, TensorInfo, load_model

F32 = TensorProto.FLOAT


def _load(tmp_path: Path, nodes: list[onnx.NodeProto], inputs: dict[str, tuple[tuple[int, ...], int]],
          inits: dict[str, np.ndarray] | None = None, *,
          outputs: dict[str, tuple[int, ...] | None] | None = None, opset: int = 17,
          extra_domains: tuple[str, ...] = (), output_types: dict[str, int] | None = None) -> Graph:
    """Save a one-graph model and load it with the real loader.

    ``inputs``: runtime inputs, name -> (shape, ONNX elem type). ``outputs``: graph outputs, name ->
    declared shape (``None``: left to shape inference; default: the last node's first output), of element
    type float32 unless ``output_types`` says otherwise.
    """
    outputs = outputs if outputs is not None else {nodes[-1].output[0]: None}
    graph = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(name, elem, shape) for name, (shape, elem) in inputs.items()],
        [helper.make_tensor_value_info(name, (output_types or {}).get(name, F32) if shape else TensorProto.UNDEFINED,
                                       shape) for name, shape in outputs.items()],
        initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in extra_domains)]
    model = helper.make_model(graph, opset_imports=opsets)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return load_model(path)


def _w(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    info = graph.tensor(name)
    assert info is not None, name
    return info.shape


def _one(graph: Graph, op_type: str | None = None) -> LayerCost:
    costs = [c for c in cost_graph(graph) if op_type is None or c.op_type == op_type]
    assert len(costs) == 1, costs
    return costs[0]


# --- Conv -----------------------------------------------------------------------------------------

def test_conv_7x7_stride2(tmp_path: Path) -> None:
    # 3->64, 7×7, stride 2, pad 3 on 1×3×224×224: out side = (224 + 6 - 7)//2 + 1 = 112.
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[7, 7], strides=[2, 2],
                            pads=[3, 3, 3, 3])
    g = _load(tmp_path, [node], {"x": ((1, 3, 224, 224), F32)}, {"w": _w(64, 3, 7, 7), "b": _w(64)})
    c = _one(g)
    assert g.tensor("y") == TensorInfo("y", (1, 64, 112, 112), "float32")
    assert c.macs == 118_013_952  # 64·112·112 = 802,816 outputs × 3·7·7 = 147 taps
    assert c.flops == 2 * 118_013_952 + 802_816  # 2 per MAC + one bias add per output
    assert c.params == 9_472  # 64·3·49 = 9,408 weights + 64 biases
    assert c.bytes_read_act == 602_112  # 3·224·224 = 150,528 floats × 4
    assert c.bytes_read_weight == 37_888  # 9,472 × 4
    assert c.bytes_written == 3_211_264  # 802,816 × 4
    assert c.bytes_total == 602_112 + 37_888 + 3_211_264
    assert (c.unit_kind, c.dtype, c.known, c.op_type) == (UnitKind.TENSOR, "float32", True, "Conv")


def test_depthwise_conv(tmp_path: Path) -> None:
    # 32 channels, groups = 32, W (32, 1, 3, 3), pad 1: out 1×32×56×56; 1 channel × 9 taps per output.
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=32, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g = _load(tmp_path, [node], {"x": ((1, 32, 56, 56), F32)}, {"w": _w(32, 1, 3, 3)})
    c = _one(g)
    assert c.macs == 903_168  # 32·56·56 = 100,352 outputs × 9
    assert c.flops == 2 * 903_168  # no bias
    assert c.params == 288


def test_dilated_conv(tmp_path: Path) -> None:
    # 16->10, 3×3, dilation 2, no pad on 32×32: effective kernel 5, out side 32 - 4 = 28.
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], dilations=[2, 2])
    g = _load(tmp_path, [node], {"x": ((1, 16, 32, 32), F32)}, {"w": _w(10, 16, 3, 3)})
    assert _shape(g, "y") == (1, 10, 28, 28)
    assert _one(g).macs == 1_128_960  # 10·28·28 = 7,840 outputs × 16·9 = 144


def test_grouped_strided_conv(tmp_path: Path) -> None:
    # 64->128, groups 4 (16 in-channels per group), 3×3, stride 2, pad 1 on 28×28:
    # out side (28 + 2 - 3)//2 + 1 = 14.
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=4, kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    g = _load(tmp_path, [node], {"x": ((1, 64, 28, 28), F32)}, {"w": _w(128, 16, 3, 3)})
    assert _one(g).macs == 3_612_672  # 128·14·14 = 25,088 outputs × 16·9 = 144


def test_conv3d(tmp_path: Path) -> None:
    # 4->8, 3×3×3, pad 1 on 8×16×16: same size out; 4·27 = 108 taps per output.
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3, 3], pads=[1] * 6)
    g = _load(tmp_path, [node], {"x": ((1, 4, 8, 16, 16), F32)}, {"w": _w(8, 4, 3, 3, 3)})
    assert _one(g).macs == 1_769_472  # 8·8·16·16 = 16,384 outputs × 108


def test_conv_omitted_bias(tmp_path: Path) -> None:
    # An omitted optional input ("") is size 0, not an error, and adds no bias FLOPs.
    node = helper.make_node("Conv", ["x", "w", ""], ["y"], kernel_shape=[1, 1])
    g = _load(tmp_path, [node], {"x": ((1, 8, 4, 4), F32)}, {"w": _w(2, 8, 1, 1)})
    c = _one(g)
    assert c.macs == 256  # 2·4·4 = 32 outputs × 8
    assert c.flops == 512
    assert c.params == 16


@pytest.mark.parametrize(("groups", "macs"), [
    # 64->32, 4×4, stride 2, pad 1 on 14×14: out side (14-1)·2 - 2 + 4 = 28.
    # MACs = input elements × Cout/groups × 16 = 64·14·14 = 12,544 × 32 × 16 = 6,422,528
    # (check from the output side: 32·28·28 outputs × 64 in-channels × 16 taps / 4 (stride²) = same).
    (1, 6_422_528),
    # groups 2: W (64, 16, 4, 4), still 32 out channels; 12,544 × 16 × 16 = 3,211,264.
    (2, 3_211_264),
])
def test_conv_transpose(tmp_path: Path, groups: int, macs: int) -> None:
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[4, 4], strides=[2, 2],
                            pads=[1, 1, 1, 1], group=groups)
    g = _load(tmp_path, [node], {"x": ((1, 64, 14, 14), F32)}, {"w": _w(64, 32 // groups, 4, 4), "b": _w(32)})
    c = _one(g)
    assert _shape(g, "y") == (1, 32, 28, 28)
    assert c.macs == macs
    assert c.flops == 2 * macs + 32 * 28 * 28  # + bias per output
    assert c.unit_kind is UnitKind.TENSOR


def test_qlinear_conv_params_are_int8_weight_and_bias(tmp_path: Path) -> None:
    # QLinearConv(x, xs, xzp, w, ws, wzp, ys, yzp, B): 8->4, 3×3 on 1×8×6×6, no pad: out 1×4×4×4.
    names = ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "b"]
    node = helper.make_node("QLinearConv", names, ["y"], kernel_shape=[3, 3])
    inits: dict[str, np.ndarray] = {
        "xs": np.array(0.1, np.float32), "xzp": np.array(0, np.uint8), "w": _w(4, 8, 3, 3, dtype=np.int8),
        "ws": np.array(0.1, np.float32), "wzp": np.array(0, np.int8), "ys": np.array(0.1, np.float32),
        "yzp": np.array(0, np.uint8), "b": _w(4, dtype=np.int32)}
    g = _load(tmp_path, [node], {"x": ((1, 8, 6, 6), TensorProto.UINT8)}, inits)
    c = _one(g)
    assert c.macs == 4_608  # 4·4·4 = 64 outputs × 8·9 = 72
    assert c.flops == 2 * 4_608 + 64 + 5 * 64  # + bias add + requantization (5/output)
    assert c.params == 288 + 4  # int8 weight + int32 bias; scales and zero points are not params
    assert c.dtype == "uint8"
    assert c.bytes_read_act == 288  # 8·6·6 uint8


# --- Gemm / MatMul / Einsum -------------------------------------------------------------------------

def test_gemm_trans_b_with_bias(tmp_path: Path) -> None:
    # A 8×256, B 1000×256 with transB: out 8×1000, K = 256.
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    g = _load(tmp_path, [node], {"a": ((8, 256), F32)}, {"b": _w(1000, 256), "c": _w(1000)})
    c = _one(g)
    assert c.macs == 2_048_000  # 8·1000·256
    assert c.flops == 4_104_000  # 2·2,048,000 + 8,000 bias adds
    assert c.params == 257_000  # 256,000 + 1,000
    assert c.bytes_read_weight == 1_028_000  # 257,000 × 4
    assert c.bytes_written == 32_000


def test_gemm_trans_a_alpha_beta(tmp_path: Path) -> None:
    # A 256×8 with transA: M = 8, K = 256; B 256×10; alpha 0.5 and beta 2 cost a multiply each.
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)
    g = _load(tmp_path, [node], {"a": ((256, 8), F32)}, {"b": _w(256, 10), "c": _w(10)})
    c = _one(g)
    assert c.macs == 20_480  # 8·10·256
    assert c.flops == 2 * 20_480 + 80 + 2 * 80  # alpha mul + (beta mul + add) per output


def test_batched_broadcast_matmul(tmp_path: Path) -> None:
    # 2×1×4×8 @ 3×8×5 -> 2×3×4×5 (batch 1 broadcasts against 3), K = 8.
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    g = _load(tmp_path, [node], {"a": ((2, 1, 4, 8), F32), "b": ((3, 8, 5), F32)})
    c = _one(g)
    assert _shape(g, "y") == (2, 3, 4, 5)
    assert c.macs == 960  # 120 outputs × 8
    assert c.params == 0  # both operands are activations
    assert c.bytes_read_act == (64 + 120) * 4
    assert c.bytes_written == 480


def test_matmul_weight_and_vector(tmp_path: Path) -> None:
    # 1×16×64 @ weight 64×32 -> 1×16×32: 512 outputs × 64; a 1-D left operand: 8 @ 8×5 -> 5: 5 × 8.
    mm = helper.make_node("MatMul", ["a", "w"], ["y"])
    vec = helper.make_node("MatMul", ["v", "w2"], ["z"])
    g = _load(tmp_path, [mm, vec], {"a": ((1, 16, 64), F32), "v": ((8,), F32)},
              {"w": _w(64, 32), "w2": _w(8, 5)}, outputs={"y": None, "z": None})
    by_id = {c.layer_id: c for c in cost_graph(g)}
    assert [(c.macs, c.params) for c in by_id.values()] == [(32_768, 2_048), (40, 40)]


def test_qlinear_matmul_and_matmul_integer(tmp_path: Path) -> None:
    # 4×16 uint8 @ 16×8 int8 weight -> 4×8: 32 outputs × 16 = 512 MACs in both.
    ql = helper.make_node("QLinearMatMul", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"], ["y"])
    mi = helper.make_node("MatMulInteger", ["a", "b"], ["z"])
    inits: dict[str, np.ndarray] = {
        "as": np.array(0.1, np.float32), "azp": np.array(0, np.uint8), "b": _w(16, 8, dtype=np.int8),
        "bs": np.array(0.1, np.float32), "bzp": np.array(0, np.int8), "ys": np.array(0.1, np.float32),
        "yzp": np.array(0, np.uint8)}
    g = _load(tmp_path, [ql, mi], {"a": ((4, 16), TensorProto.UINT8)}, inits, outputs={"y": None, "z": None})
    q, i = cost_graph(g)
    assert (q.macs, q.flops, q.params) == (512, 2 * 512 + 5 * 32, 128)
    assert (i.macs, i.flops, i.params) == (512, 1024, 128)
    assert q.unit_kind is i.unit_kind is UnitKind.TENSOR


@pytest.mark.parametrize(("equation", "shapes", "macs", "flops"), [
    # batched matmul: b·i·j·k = 2·3·4·5 = 120 MACs
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], 120, 240),
    # implicit output (ik): 3·4·5 = 60
    ("ij,jk", [(3, 4), (4, 5)], 60, 120),
    # ellipsis dims broadcast (2,1) with (1,3) -> (2,3): 2·3 · i4 · j6 · k5 = 720
    ("...ij,...jk->...ik", [(2, 1, 4, 6), (1, 3, 6, 5)], 720, 1_440),
    # outer product, no contraction: 3·5 multiplies, no MACs
    ("i,j->ij", [(3,), (5,)], 0, 15),
    # a single-operand reduction: one add per point, 4·6 = 24
    ("ij->i", [(4, 6)], 0, 24),
    # a transpose: free
    ("ij->ji", [(4, 6)], 0, 0),
])
def test_einsum(tmp_path: Path, equation: str, shapes: list[tuple[int, ...]], macs: int, flops: int) -> None:
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    g = _load(tmp_path, [node], {n: (s, F32) for n, s in zip(names, shapes, strict=True)})
    c = _one(g)
    assert (c.macs, c.flops, c.unit_kind) == (macs, flops, UnitKind.TENSOR)


def test_parse_einsum_contracted_indices() -> None:
    count = parse_einsum("bhqd,bhkd->bhqk", [(1, 8, 128, 64), (1, 8, 128, 64)])
    assert count.contracted == {"d"}
    assert count.iterations == 1 * 8 * 128 * 128 * 64
    assert parse_einsum("ii", [(5, 5)]).contracted == {"i"}  # trace: implicit output is empty
    # ellipsis of different ranks align right: (2, 3) against (3,) -> batch 2·3; 2·3·4·6·5 = 720
    assert parse_einsum("...ij,...jk->...ik", [(2, 3, 4, 6), (3, 6, 5)]).iterations == 720
    with pytest.raises(ValueError, match="terms"):
        parse_einsum("ij,jk->ik", [(2, 2)])


def test_fused_matmul_k() -> None:
    assert fused_matmul_k((2, 4, 8), trans_a=False, trans_batch_a=False) == 8
    assert fused_matmul_k((2, 4, 8), trans_a=True, trans_batch_a=False) == 4
    # transBatchA: (d0, d1, d2) -> (d1, d0, d2); transA then makes K = d0
    assert fused_matmul_k((2, 4, 8), trans_a=True, trans_batch_a=True) == 2


# --- recurrent ------------------------------------------------------------------------------------

def test_lstm_bidirectional(tmp_path: Path) -> None:
    # seq 10, batch 2, I 16, H 32, 2 directions, with bias B (2, 8·32).
    # MACs per step/direction/batch = 4·32·(16 + 32) = 6,144; × 10 × 2 × 2 = 245,760.
    # Elementwise per step = 15·32 (gates, cell, hidden) + 8·32 (bias adds) = 736; × 40 = 29,440.
    node = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=32, direction="bidirectional")
    g = _load(tmp_path, [node], {"x": ((10, 2, 16), F32)},
              {"w": _w(2, 128, 16), "r": _w(2, 128, 32), "b": _w(2, 256)})
    c = _one(g)
    assert _shape(g, "y") == (10, 2, 2, 32)
    assert c.macs == 245_760
    assert c.flops == 2 * 245_760 + 29_440
    assert c.params == 4_096 + 8_192 + 512  # W 2·128·16, R 2·128·32, B 2·256
    assert c.unit_kind is UnitKind.TENSOR


def test_lstm_batch_first_layout(tmp_path: Path) -> None:
    # layout=1: X is (batch 2, seq 10, I 16); same MACs as seq-first: 4·32·48·10·2 = 122,880 (1 direction).
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=32, layout=1)
    g = _load(tmp_path, [node], {"x": ((2, 10, 16), F32)}, {"w": _w(1, 128, 16), "r": _w(1, 128, 32)})
    assert _one(g).macs == 122_880


def test_gru_and_rnn(tmp_path: Path) -> None:
    # GRU: seq 5, batch 1, I 8, H 16: 3·16·(8+16) = 1,152 per step × 5 = 5,760 MACs; 12·16 = 192
    # elementwise per step (no bias) × 5 = 960. RNN: 16·24 = 384 × 5 = 1,920 MACs; tanh 16 × 5 = 80.
    gru = helper.make_node("GRU", ["x", "gw", "gr"], ["gy"], hidden_size=16)
    rnn = helper.make_node("RNN", ["x", "rw", "rr"], ["ry"], hidden_size=16)
    g = _load(tmp_path, [gru, rnn], {"x": ((5, 1, 8), F32)},
              {"gw": _w(1, 48, 8), "gr": _w(1, 48, 16), "rw": _w(1, 16, 8), "rr": _w(1, 16, 16)},
              outputs={"gy": None, "ry": None})
    gc, rc = cost_graph(g)
    assert (gc.macs, gc.flops) == (5_760, 2 * 5_760 + 960)
    assert (rc.macs, rc.flops) == (1_920, 2 * 1_920 + 80)


# --- pooling and resampling -------------------------------------------------------------------------

@pytest.mark.parametrize(("ceil_mode", "side"), [
    (0, 2),  # floor((5 - 2)/2) + 1 = 2
    (1, 3),  # ceil((5 - 2)/2) + 1 = 3: the last window hangs over the edge
])
def test_maxpool_ceil_mode(tmp_path: Path, ceil_mode: int, side: int) -> None:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=ceil_mode)
    g = _load(tmp_path, [node], {"x": ((1, 1, 5, 5), F32)})
    c = _one(g)
    assert _shape(g, "y") == (1, 1, side, side)
    assert c.flops == side * side * 4  # 4 compares per output window
    assert (c.macs, c.unit_kind, c.params) == (0, UnitKind.AUX, 0)


def test_maxpool_ceil_window_starting_in_padding(tmp_path: Path) -> None:
    # in 5, k 3, s 3, pads (0, 2), ceil: ceil((5 + 2 - 3)/3) + 1 = 3, but the third window would start
    # at 6, inside the end padding, so ONNX (opset 22 text) and ONNX Runtime drop it: 2.
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[3, 3], pads=[0, 0, 2, 2],
                            ceil_mode=1)
    g = _load(tmp_path, [node], {"x": ((1, 1, 5, 5), F32)}, opset=22)
    assert _shape(g, "y") == (1, 1, 2, 2)
    assert _one(g).flops == 4 * 9


def test_average_pool_ceil_pad(tmp_path: Path) -> None:
    # 1×8×6×6, k 3, s 2, pad 1, ceil: ceil((6 + 2 - 3)/2) + 1 = 4 (last window starts at 6 < 6 + 1).
    # 8·4·4 = 128 outputs × (9 adds + 1 divide) = 1,280.
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], ceil_mode=1)
    g = _load(tmp_path, [node], {"x": ((1, 8, 6, 6), F32)})
    assert _shape(g, "y") == (1, 8, 4, 4)
    assert _one(g).flops == 1_280


def test_global_average_pool(tmp_path: Path) -> None:
    # 2048·7·7 = 100,352 adds + 2,048 divides.
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    g = _load(tmp_path, [node], {"x": ((1, 2048, 7, 7), F32)})
    c = _one(g)
    assert c.flops == 102_400
    assert c.bytes_read_act == 401_408 and c.bytes_written == 8_192


def test_resize_linear_scales_are_not_params(tmp_path: Path) -> None:
    # 2× bilinear on 1×3×8×8 -> 1×3×16×16 = 768 outputs; 2 axes resized: 4 taps = 4 mul + 3 add = 7.
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    g = _load(tmp_path, [node], {"x": ((1, 3, 8, 8), F32)},
              {"scales": np.array([1, 1, 2, 2], np.float32)})
    c = _one(g)
    assert _shape(g, "y") == (1, 3, 16, 16)
    assert c.flops == 768 * 7
    assert c.params == 0  # float scales are a setting
    assert c.bytes_read_weight == 16  # ... but they are read
    assert c.unit_kind is UnitKind.AUX


def test_interpolation_flops() -> None:
    assert interpolation_flops("nearest", 2) == 1
    assert interpolation_flops("linear", 1) == 3  # 2 taps: 2 mul + 1 add
    assert interpolation_flops("linear", 3) == 15  # trilinear: 8 taps
    assert interpolation_flops("cubic", 2) == 31  # 16 taps


# --- vector ops, bytes, params ----------------------------------------------------------------------

def test_fp16_add_bytes_and_broadcast(tmp_path: Path) -> None:
    # 1×8×4 fp16 activation + 4-element fp16 constant: 32 adds; reads 64 + 8 bytes, writes 64.
    node = helper.make_node("Add", ["x", "bias"], ["y"])
    g = _load(tmp_path, [node], {"x": ((1, 8, 4), TensorProto.FLOAT16)}, {"bias": _w(4, dtype=np.float16)})
    c = _one(g)
    assert (c.flops, c.macs) == (32, 0)
    assert (c.bytes_read_act, c.bytes_read_weight, c.bytes_written) == (64, 8, 64)
    assert c.params == 4  # a learned constant operand
    assert (c.dtype, c.unit_kind) == ("float16", UnitKind.VECTOR)
    assert c.arithmetic_intensity == pytest.approx(32 / 136)


def test_same_input_twice_is_read_once(tmp_path: Path) -> None:
    node = helper.make_node("Mul", ["x", "x"], ["y"])
    g = _load(tmp_path, [node], {"x": ((10,), F32)})
    assert _one(g).bytes_read_act == 40


def test_activation_constants(tmp_path: Path) -> None:
    # 100 elements each: Sigmoid 3 (exp + add + div), HardSwish 5, Clip 2 (min + max), Relu 1.
    nodes = [helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("HardSwish", ["x"], ["b"]),
             helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("Relu", ["x"], ["d"])]
    g = _load(tmp_path, nodes, {"x": ((4, 25), F32)},
              {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)},
              outputs={"a": None, "b": None, "c": None, "d": None})
    assert [(c.op_type, c.flops, c.params) for c in cost_graph(g)] == [
        ("Sigmoid", 300, 0), ("HardSwish", 500, 0), ("Clip", 200, 0), ("Relu", 100, 0)]


def test_pow_exponent_two_is_one_multiply(tmp_path: Path) -> None:
    nodes = [helper.make_node("Pow", ["x", "two"], ["a"]), helper.make_node("Pow", ["x", "x"], ["b"])]
    g = _load(tmp_path, nodes, {"x": ((10,), F32)}, {"two": np.array(2, np.float32)},
              outputs={"a": None, "b": None})
    assert [c.flops for c in cost_graph(g)] == [10, 30]  # x² = 1 mul; x^y = log + mul + exp


def test_sum_of_three(tmp_path: Path) -> None:
    node = helper.make_node("Sum", ["a", "b", "c"], ["y"])
    g = _load(tmp_path, [node], dict.fromkeys("abc", ((6,), F32)))
    assert _one(g).flops == 12  # 2 adds per output


def test_batchnorm_softmax_layernorm(tmp_path: Path) -> None:
    # BN on 1×16×8×8 = 1,024 elements: 2 FLOPs each (folded scale/shift); params 4·16.
    # Softmax 5/element; LayerNorm over the last axis 7/element, params scale + bias = 2·8.
    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    sm = helper.make_node("Softmax", ["y"], ["z"], axis=1)
    ln = helper.make_node("LayerNormalization", ["z", "g", "beta"], ["o"], axis=-1)
    inits = {k: _w(16) for k in ("s", "b", "m", "v")} | {"g": _w(8), "beta": _w(8)}
    g = _load(tmp_path, [bn, sm, ln], {"x": ((1, 16, 8, 8), F32)}, inits)
    assert [(c.op_type, c.flops, c.params, c.unit_kind) for c in cost_graph(g)] == [
        ("BatchNormalization", 2_048, 64, UnitKind.VECTOR),
        ("Softmax", 5_120, 0, UnitKind.VECTOR),
        ("LayerNormalization", 7_168, 16, UnitKind.VECTOR),
    ]


def test_reduce_and_argmax(tmp_path: Path) -> None:
    # ReduceMean over axis 1 of 4×10: 40 adds + 4 divides. ArgMax: 40 compares, scalar unit.
    rm = helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=0)
    am = helper.make_node("ArgMax", ["x"], ["i"], axis=1)
    g = _load(tmp_path, [rm, am], {"x": ((4, 10), F32)}, outputs={"m": None, "i": None})
    m, i = cost_graph(g)
    assert (m.flops, m.unit_kind) == (44, UnitKind.VECTOR)
    assert (i.flops, i.unit_kind, i.bytes_written) == (40, UnitKind.SCALAR, 32)  # 4 int64 indices


# --- movement, views, scalar ops ------------------------------------------------------------------

def test_zero_copy_and_move(tmp_path: Path) -> None:
    # Reshape is a view: no bytes, no params (its int64 shape is not a param either).
    # Transpose moves 2·3·4 floats: reads 96 bytes, writes 96, 0 FLOPs.
    rs = helper.make_node("Reshape", ["x", "shape"], ["r"])
    tr = helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0])
    g = _load(tmp_path, [rs, tr], {"x": ((2, 3, 4), F32)}, {"shape": np.array([6, 4], np.int64)})
    r, t = cost_graph(g)
    assert (r.unit_kind, r.bytes_total, r.params, r.flops) == (UnitKind.ZERO_COPY, 0, 0, 0)
    assert (t.unit_kind, t.bytes_read, t.bytes_written, t.flops) == (UnitKind.MOVE, 96, 96, 0)


def test_gather_embedding_table_is_params(tmp_path: Path) -> None:
    node = helper.make_node("Gather", ["table", "ids"], ["y"])
    g = _load(tmp_path, [node], {"ids": ((1, 7), TensorProto.INT64)}, {"table": _w(100, 16)})
    c = _one(g)
    assert (c.unit_kind, c.params, c.flops) == (UnitKind.MOVE, 1_600, 0)
    assert c.dtype == "int64"  # the first activation input: the indices


def test_topk_unit_and_flops(tmp_path: Path) -> None:
    # TopK k=4 over 3×100: 300 elements × ⌈log2 4⌉ = 2 compares.
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)
    g = _load(tmp_path, [node], {"x": ((3, 100), F32)}, {"k": np.array([4], np.int64)},
              outputs={"v": None, "i": None})
    c = _one(g)
    assert (c.unit_kind, c.flops, c.params) == (UnitKind.SCALAR, 600, 0)
    assert c.bytes_written == 3 * 4 * 4 + 3 * 4 * 8  # values fp32 + indices int64


# --- unknown ops, registry, robustness ------------------------------------------------------------

def test_unknown_custom_op_is_bytes_only(tmp_path: Path) -> None:
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="my.domain")
    g = _load(tmp_path, [node], {"x": ((2, 8), F32)}, outputs={"y": (2, 4)}, extra_domains=("my.domain",))
    c = _one(g)
    assert c.known is False
    assert c.unit_kind is UnitKind.SCALAR
    assert (c.macs, c.flops) == (0, 8)  # one FLOP per output element: never free in silence
    assert (c.bytes_read_act, c.bytes_written) == (64, 32)
    assert not is_known("my.domain", "Frobnicate")


def test_registry() -> None:
    assert is_known("", "Conv") and is_known("ai.onnx", "Conv")
    assert is_known("com.microsoft", "FusedConv") and not is_known("", "FusedConv")
    assert ("com.microsoft", "SkipLayerNormalization") in KNOWN_OPS
    assert all(domain != "ai.onnx" for domain, _ in KNOWN_OPS)


def _manual_graph(nodes: list[Node], tensors: list[TensorInfo], constants: tuple[str, ...] = ()) -> Graph:
    infos = {t.name: t for t in tensors}
    return Graph(name="g", path="", sha256="", opset=17, inputs=(), outputs=(), layers=tuple(nodes),
                 folded=(), tensors=infos, constants={k: infos[k] for k in constants}, const_values={})


def test_ai_onnx_domain_and_missing_shape_fallback(caplog: pytest.LogCaptureFixture) -> None:
    x = TensorInfo("x", (1, 4, 8, 8), "float32")
    y = TensorInfo("y", (1, 2, 8, 8), "float32")
    w = TensorInfo("w", (2, 4, 1, 1), "float32")
    ok = Node(id="c1", name="c1", op_type="Conv", domain="ai.onnx", inputs=("x", "w"), outputs=("y",))
    broken = Node(id="c2", name="c2", op_type="Conv", domain="", inputs=("x", "w_missing"), outputs=("y",))
    g = _manual_graph([ok, broken], [x, y, w], constants=("w",))
    assert cost_layer(ok, g).macs == 128 * 4  # ai.onnx is the ONNX domain
    with caplog.at_level(logging.WARNING, logger="layerscope.costs"):
        c = cost_layer(broken, g)
    assert (c.known, c.flops, c.bytes_read_act, c.bytes_written) == (False, 128, 1_024, 512)
    assert "c2" in caplog.text and "w_missing" in caplog.text


def test_fused_conv_com_microsoft(tmp_path: Path) -> None:
    # com.microsoft FusedConv with Relu: Conv MACs; + bias + relu per output. ONNX cannot infer a
    # contrib op's output, so the output shape is declared. 8->4, 1×1 on 5×5: 100 outputs × 8.
    node = helper.make_node("FusedConv", ["x", "w", "b"], ["y"], domain="com.microsoft", kernel_shape=[1, 1],
                            activation="Relu")
    g = _load(tmp_path, [node], {"x": ((1, 8, 5, 5), F32)}, {"w": _w(4, 8, 1, 1), "b": _w(4)},
              outputs={"y": (1, 4, 5, 5)}, extra_domains=("com.microsoft",))
    c = _one(g)
    assert (c.macs, c.flops, c.params, c.known) == (800, 1_600 + 100 + 100, 36, True)


def test_cost_graph_follows_layer_order(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Neg", ["a"], ["b"], name="second"),
             helper.make_node("Abs", ["b"], ["c"], name="third")]
    g = _load(tmp_path, nodes, {"x": ((3,), F32)})
    assert [c.layer_id for c in cost_graph(g)] == [n.id for n in g.layers] == ["first", "second", "third"]


def test_lrn(tmp_path: Path) -> None:
    # LRN size 5 on 1×8×4×4 = 128 elements × (2·5 + 3 = 13: 5 squares, 4 adds, scale, bias, pow, div).
    node = helper.make_node("LRN", ["x"], ["y"], size=5)
    g = _load(tmp_path, [node], {"x": ((1, 8, 4, 4), F32)})
    assert _one(g).flops == 1_664


def test_dropout_is_a_view_even_with_mask(tmp_path: Path) -> None:
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    g = _load(tmp_path, [node], {"x": ((4, 4), F32)})
    c = _one(g)
    assert (c.unit_kind, c.bytes_total, c.flops, c.dtype) == (UnitKind.ZERO_COPY, 0, 0, "float32")


def test_dequantize_scale_is_not_a_param(tmp_path: Path) -> None:
    # DQ of an int8 activation, 2 FLOPs/element ((x - zp)·scale); the float scale is not learned.
    node = helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"])
    g = _load(tmp_path, [node], {"x": ((2, 8), TensorProto.INT8)},
              {"s": np.array(0.5, np.float32), "zp": np.array(0, np.int8)})
    c = _one(g)
    assert (c.flops, c.params, c.dtype, c.bytes_read_act, c.bytes_written) == (32, 0, "int8", 16, 64)


def test_roi_align_and_grid_sample(tmp_path: Path) -> None:
    # RoiAlign 3 rois × 4 channels × 2×2 = 48 outputs × (2·2 samples × (7 bilinear + 1 add) + 1 div) = 1,584.
    # GridSample 1×2×8×8 by a 1×4×4×2 grid: 32 outputs × (2·2 coordinate + 7 bilinear) = 352.
    ra = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["r"], output_height=2, output_width=2,
                          sampling_ratio=2)
    gs = helper.make_node("GridSample", ["x2", "grid"], ["s"])
    g = _load(tmp_path, [ra, gs], {"x": ((1, 4, 16, 16), F32), "rois": ((3, 4), F32),
                                   "idx": ((3,), TensorProto.INT64), "x2": ((1, 2, 8, 8), F32),
                                   "grid": ((1, 4, 4, 2), F32)}, outputs={"r": None, "s": None})
    r, s = cost_graph(g)
    assert (r.flops, r.unit_kind, r.params) == (1_584, UnitKind.AUX, 0)
    assert (s.flops, s.unit_kind) == (352, UnitKind.AUX)


def test_scatter_nd_reduction(tmp_path: Path) -> None:
    # ScatterND with reduction="add": a copy plus one add per update element (3).
    node = helper.make_node("ScatterND", ["data", "ind", "upd"], ["y"], reduction="add")
    g = _load(tmp_path, [node], {"data": ((8,), F32), "ind": ((3, 1), TensorProto.INT64), "upd": ((3,), F32)})
    c = _one(g)
    assert (c.flops, c.unit_kind) == (3, UnitKind.MOVE)


def test_nms_with_known_box_limit(tmp_path: Path) -> None:
    # boxes (1, 10, 4), scores (1, 2 classes, 10), at most 3 boxes per class. Per class: 10 threshold
    # compares + 10·⌈log2 10⌉ = 40 sort compares + 3 kept × 10 × 13 IoU FLOPs = 390 -> 440; × 2 = 880.
    # The selected-indices output is data-dependent: the test declares its upper bound (6, 3).
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit"], ["sel"])
    g = _load(tmp_path, [node], {"boxes": ((1, 10, 4), F32), "scores": ((1, 2, 10), F32)},
              {"limit": np.array([3], np.int64)}, outputs={"sel": (6, 3)}, output_types={"sel": TensorProto.INT64})
    c = _one(g)
    assert (c.flops, c.unit_kind, c.params) == (880, UnitKind.SCALAR, 0)


def test_shape_reads_no_data() -> None:
    x = TensorInfo("x", (1, 3, 8, 8), "float32")
    s = TensorInfo("s", (4,), "int64")
    node = Node(id="shape", name="shape", op_type="Shape", domain="", inputs=("x",), outputs=("s",))
    c = cost_layer(node, _manual_graph([node], [x, s]))
    assert (c.unit_kind, c.bytes_read, c.bytes_written, c.known) == (UnitKind.SCALAR, 0, 32, True)
