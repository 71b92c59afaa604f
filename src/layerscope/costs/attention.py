"""Fused attention: com.microsoft Attention, QAttention and MultiHeadAttention; ONNX Attention (opset 23+).

Sources: ONNX Runtime's ContribOperators.md and registered schemas (input positions and shapes), the ONNX
Attention spec (onnx/docs/Operators.md). With batch B, query length S, total key length T (past + new keys),
N query heads, Q/K hidden size ``hq`` (N × head size) and V hidden size ``hv``:

- scores Q·Kᵀ: B·S·T·hq MACs; context softmax(scores)·V: B·S·T·hv MACs;
- per score (B·N·S·T of them): the scale (1) + softmax (:data:`layerscope.costs.norm.SOFTMAX`) + the mask or
  bias add (1) when one is given; a causal mask (``unidirectional``/``is_causal``) is counted as a full
  square (assumption: kernels skip the masked half only sometimes);
- com.microsoft Attention and QAttention also project the input: B·S·D·(hq + hq + hv) MACs for an input of
  hidden size D, plus the bias add; QAttention scales its int32 projection back to float (1 per element).

FLOPs = 2 × MACs + the per-element terms. Params: the projection weights and bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from layerscope.costs._common import MS, CostTable, has_input, in_shape, layer_cost, out_shape, table
from layerscope.costs.norm import SOFTMAX
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node


@dataclass(frozen=True)
class AttentionDims:
    """What the attention core computes: ``rows`` = B·S query rows, ``total`` = T keys each attends to, the Q/K
    and V hidden sizes (all heads), and ``heads`` = N."""

    rows: int
    total: int
    qk_hidden: int
    v_hidden: int
    heads: int

    @property
    def macs(self) -> int:
        """Scores and context: rows·T·(hq + hv)."""
        return self.rows * self.total * (self.qk_hidden + self.v_hidden)

    def score_flops(self, *, masked: bool) -> int:
        """Per score: scale + softmax (+ the mask or bias add); B·N·S·T scores."""
        return self.rows * self.heads * self.total * (1 + SOFTMAX + (1 if masked else 0))


def _heads(node: Node) -> int:
    heads = int(node.attr("num_heads", 1))
    if heads < 1:
        raise LayerscopeError(f"layer {node.id!r} ({node.op_type}): num_heads={heads}, expected ≥ 1")
    return heads


def _rank(node: Node, shape: tuple[int, ...], name: str, ranks: tuple[int, ...]) -> None:
    if len(shape) not in ranks:
        raise LayerscopeError(f"layer {node.id!r} ({node.op_type}): {name} of rank {len(shape)}, "
                              f"expected {' or '.join(map(str, ranks))}")


def _present_length(node: Node, graph: Graph, index: int, axis: int) -> int | None:
    """The total key length read from a present-state output's ``axis``; ``None`` when it has no shape."""
    if index >= len(node.outputs) or not node.outputs[index]:
        return None
    info = graph.tensor(node.outputs[index])
    return info.shape[axis] if info is not None and len(info.shape) > abs(axis) else None


def _ms_qkv(node: Node, weight_cols: int) -> tuple[int, int]:
    """(hq, hv) of com.microsoft (Q)Attention: ``qkv_hidden_sizes``, else a third of the weight's columns each."""
    sizes = node.attr("qkv_hidden_sizes")
    if sizes is not None and len(sizes) == 3:
        return int(sizes[0]), int(sizes[2])
    if weight_cols % 3:
        raise LayerscopeError(f"layer {node.id!r} ({node.op_type}): weights of {weight_cols} columns, not divisible "
                              f"by 3, and no qkv_hidden_sizes")
    return weight_cols // 3, weight_cols // 3


def _ms_projected(node: Node, graph: Graph, *, dequantize: bool) -> LayerCost:
    """com.microsoft Attention(input, weights, bias?, mask_index?, past?, attention_bias?, ...) and
    QAttention(input, weight, bias, input_scale, weight_scale, mask_index?, input_zp?, weight_zp?, past?):
    the input projection and the core. T = present's dim 3 when it has a shape, else S + past's dim 3."""
    x = in_shape(node, graph, 0)
    w = in_shape(node, graph, 1)
    _rank(node, x, "input", (3,))
    _rank(node, w, "weights", (2,))
    batch, seq, _ = x
    hq, hv = _ms_qkv(node, w[1])
    past_index = 8 if dequantize else 4
    total = _present_length(node, graph, 1, 3)
    if total is None:
        total = seq + (in_shape(node, graph, past_index)[3] if has_input(node, past_index) else 0)
    dims = AttentionDims(rows=batch * seq, total=total, qk_hidden=hq, v_hidden=hv, heads=_heads(node))
    projected = batch * seq * w[1]
    macs = projected * w[0] + dims.macs
    masked = has_input(node, 5) if dequantize else has_input(node, 3) or has_input(node, 5)
    flops = 2 * macs + projected * ((1 if has_input(node, 2) else 0) + (1 if dequantize else 0)) + \
        dims.score_flops(masked=masked)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=(1, 2))


def _ms_attention(node: Node, graph: Graph) -> LayerCost:
    return _ms_projected(node, graph, dequantize=False)


def _ms_qattention(node: Node, graph: Graph) -> LayerCost:
    return _ms_projected(node, graph, dequantize=True)


def _mha_key_length(node: Node, graph: Graph, query: tuple[int, ...]) -> int:
    """MultiHeadAttention's new key length: key (B, L, hidden), packed KV (B, L, N, 2, h), past-format
    (B, N, L, h); no key: packed QKV, L = S."""
    if not has_input(node, 1):
        return query[1]
    key = in_shape(node, graph, 1)
    _rank(node, key, "key", (3, 4, 5))
    return key[2] if len(key) == 4 else key[1]


def _ms_multi_head_attention(node: Node, graph: Graph) -> LayerCost:
    """MultiHeadAttention(query, key?, value?, bias?, key_padding_mask?, attention_bias?, past_key?,
    past_value?, ...): the core over projected Q, K, V. query is (B, S, hq) or packed QKV (B, S, N, 3, h);
    the output (B, S, hv). T = present_key's dim 2 when it has a shape, else L + past_key's dim 2. A bias adds
    to the projected Q, K and V (B·S·hq + B·L·(hq + hv))."""
    query = in_shape(node, graph, 0)
    _rank(node, query, "query", (3, 5))
    out = out_shape(node, graph, 0)
    _rank(node, out, "output", (3,))
    qk_hidden = query[2] * query[4] if len(query) == 5 else query[2]
    length = _mha_key_length(node, graph, query)
    total = _present_length(node, graph, 1, 2)
    if total is None:
        total = length + (in_shape(node, graph, 6)[2] if has_input(node, 6) else 0)
    batch, seq, v_hidden = out
    dims = AttentionDims(rows=batch * seq, total=total, qk_hidden=qk_hidden, v_hidden=v_hidden, heads=_heads(node))
    bias = batch * (seq * qk_hidden + length * (qk_hidden + v_hidden)) if has_input(node, 3) else 0
    flops = 2 * dims.macs + bias + dims.score_flops(masked=has_input(node, 4) or has_input(node, 5))
    return layer_cost(node, graph, UnitKind.TENSOR, macs=dims.macs, flops=flops, params_from=(3,))


def _onnx_heads(node: Node, shape: tuple[int, ...], attribute: str) -> int:
    """Heads of an ONNX Attention operand: dim 1 of a 4-D (B, N, S, h) one, else the ``*_num_heads`` attribute."""
    if len(shape) == 4:
        return shape[1]
    heads = int(node.attr(attribute, 0))
    if heads < 1:
        raise LayerscopeError(f"layer {node.id!r} (Attention): a 3-D operand needs {attribute}")
    return heads


def _onnx_attention(node: Node, graph: Graph) -> LayerCost:
    """ONNX Attention(Q, K, V, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?): Q is (B, Nq, S, h) or
    (B, S, Nq·h), K and V (B, Nkv, L, h) or (B, L, Nkv·h). T = present_key's dim 2 when it has a shape, else L +
    past_key's dim 2. A ``softcap`` adds 3 per score (divide, tanh, multiply)."""
    q = in_shape(node, graph, 0)
    k = in_shape(node, graph, 1)
    y = out_shape(node, graph, 0)
    for name, shape in (("Q", q), ("K", k), ("Y", y)):
        _rank(node, shape, name, (3, 4))
    heads = _onnx_heads(node, q, "q_num_heads")
    seq = q[2] if len(q) == 4 else q[1]
    qk_hidden = math.prod(q) // (q[0] * seq)
    total = _present_length(node, graph, 1, 2)
    if total is None:
        length = k[2] if len(k) == 4 else k[1]
        total = length + (in_shape(node, graph, 4)[2] if has_input(node, 4) else 0)
    v_hidden = math.prod(y) // (q[0] * seq)
    dims = AttentionDims(rows=q[0] * seq, total=total, qk_hidden=qk_hidden, v_hidden=v_hidden, heads=heads)
    softcap = 3 * dims.rows * heads * total if float(node.attr("softcap", 0.0)) else 0
    flops = 2 * dims.macs + dims.score_flops(masked=has_input(node, 3)) + softcap
    return layer_cost(node, graph, UnitKind.TENSOR, macs=dims.macs, flops=flops, params_from=())


COSTS: CostTable = {
    **table(("Attention",), _ms_attention, MS),
    **table(("QAttention",), _ms_qattention, MS),
    **table(("MultiHeadAttention",), _ms_multi_head_attention, MS),
    **table(("Attention",), _onnx_attention),
}
