"""The ONNX ops of decoder language models: RMSNormalization, RotaryEmbedding, SwiGLU (vector unit),
LinearAttention and CausalConvWithState (tensor unit), TensorScatter (move unit).

Sources: the ONNX operator specs (onnx/docs/Operators.md, RMSNormalization-23, RotaryEmbedding-23,
TensorScatter-24, LinearAttention-27, CausalConvWithState-27, SwiGLU-28). Counting convention of
:mod:`layerscope.costs.elementwise`: one elementary operation (a transcendental included) = 1 FLOP.
"""

from __future__ import annotations

import math
from dataclasses import replace

from layerscope.costs._common import (
    CostTable,
    has_input,
    in_elements,
    in_shape,
    layer_cost,
    out_elements,
    per_output_cost,
    table,
    tensor_of,
    tensor_only,
)
from layerscope.costs.elementwise import SIGMOID
from layerscope.costs.norm import RMS_AFFINE
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node

#: One rotated element of RoPE: x1·cos - x2·sin (or x2·cos + x1·sin): 2 multiplies + 1 add = 3.
ROTATION = 3
#: SwiGLU Y = A·sigmoid(α·A)·B: α·A + sigmoid + 2 multiplies = :data:`SIGMOID` + 3 = 6 (α = 1 counted too).
SWIGLU = SIGMOID + 3
#: CausalConvWithState's fused SiLU/Swish, x·sigmoid(x): :data:`SIGMOID` + 1.
SILU = SIGMOID + 1


def _positive_attr(node: Node, key: str) -> int:
    value = int(node.attr(key, 0))
    if value < 1:
        raise LayerscopeError(f"layer {node.id!r} ({node.op_type}): attribute {key}={value}, expected ≥ 1")
    return value


def _rotary_embedding(node: Node, graph: Graph) -> LayerCost:
    """RotaryEmbedding(X (B, H, S, d) or (B, S, H·d), cos_cache, sin_cache, position_ids? (B, S)) -> Y like X.

    FLOPs = :data:`ROTATION` × rotated elements, rotated = X's elements × r / d with r = ``rotary_embedding_dim``
    (0: d, the head size; d = X.shape[-1] for a 4-D X, hidden / ``num_heads`` for a 3-D one); the rest is copied.
    With ``position_ids`` the caches are read at the gathered rows only: B·S·r/2 elements each at most (else
    they are (B, S, r/2) already and read whole). The caches are tables, not params.
    """
    x = in_shape(node, graph, 0)
    head = x[-1] if len(x) == 4 else x[-1] // _positive_attr(node, "num_heads")
    rotary = int(node.attr("rotary_embedding_dim", 0)) or head
    if not 0 < rotary <= head:
        raise LayerscopeError(f"layer {node.id!r} (RotaryEmbedding): rotary_embedding_dim {rotary} outside "
                              f"(0, head size {head}]")
    elements = math.prod(x)
    cost = layer_cost(node, graph, UnitKind.VECTOR, flops=ROTATION * elements * rotary // head, params_from=())
    if not has_input(node, 3):
        return cost
    rows = math.prod(in_shape(node, graph, 3)) * (rotary // 2)
    unread_act = unread_weight = 0
    for name in dict.fromkeys(node.inputs[1:3]):
        info = tensor_of(graph, name, node)
        unread = (info.elements - min(info.elements, rows)) * info.itemsize
        if graph.is_constant(name):
            unread_weight += unread
        else:
            unread_act += unread
    return replace(cost, bytes_read_act=cost.bytes_read_act - unread_act,
                   bytes_read_weight=cost.bytes_read_weight - unread_weight)


_UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")


def _linear_attention(node: Node, graph: Graph) -> LayerCost:
    """LinearAttention(query (B, T, Hq·dk), key (B, T, Hkv·dk), value (B, T, Hkv·dv), past_state?, decay?, beta?)
    -> output (B, T, Hq·dv), present_state (B, Hkv, dk, dv), as its recurrent form, token by token.

    Per token and KV head, the state S (dk × dv) update: the outer product k⊗v, dk·dv MACs; the delta rules
    (``delta``, ``gated_delta``, the default) also read Sᵀk (dk·dv MACs) and form β·(v - Sᵀk) (2·dv FLOPs); the
    gated rules (``gated``, ``gated_delta``) scale S by exp(g) (dk·dv multiplies, + one exp per decay element).
    Per token and query head, the output qᵀS: dk·dv MACs, and its scale: dv multiplies.
    MACs = B·T·(Hkv·u + Hq)·dk·dv (u = 1, or 2 for delta rules); FLOPs = 2 × MACs + the elementwise terms.
    A chunk-parallel prefill does the same work in matrix products.
    """
    rule = str(node.attr("update_rule", "gated_delta"))
    if rule not in _UPDATE_RULES:
        raise LayerscopeError(f"layer {node.id!r} (LinearAttention): update_rule {rule!r}, expected one of "
                              f"{', '.join(_UPDATE_RULES)}")
    q_heads, kv_heads = _positive_attr(node, "q_num_heads"), _positive_attr(node, "kv_num_heads")
    batch, tokens, q_hidden = in_shape(node, graph, 0)
    dk, dv = q_hidden // q_heads, in_shape(node, graph, 2)[-1] // kv_heads
    delta, gated = rule.endswith("delta"), rule.startswith("gated")
    steps = batch * tokens
    macs = steps * (kv_heads * (2 if delta else 1) + q_heads) * dk * dv
    flops = 2 * macs + steps * q_heads * dv
    if delta:
        flops += steps * kv_heads * 2 * dv
    if gated:
        flops += steps * kv_heads * dk * dv + (in_elements(node, graph, 4) if has_input(node, 4) else 0)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=())


def _causal_conv_with_state(node: Node, graph: Graph) -> LayerCost:
    """CausalConvWithState(input (B, C, L), weight (C, 1, k), bias?, past_state?) -> output (B, C, L),
    present_state (B, C, k-1): a depthwise causal conv, MACs = B·C·L·k; FLOPs = 2 × MACs + 1 per output for
    the bias + :data:`SILU` per output for ``activation`` silu/swish. Params: weight and bias."""
    kernel = in_shape(node, graph, 1)[-1]
    outputs = out_elements(node, graph)
    macs = outputs * kernel
    per_output = (1 if has_input(node, 2) else 0) + (SILU if node.attr("activation", "none") in ("silu", "swish")
                                                     else 0)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + outputs * per_output,
                      params_from=(1, 2))


@tensor_only
def _tensor_scatter(node: Node, graph: Graph) -> LayerCost:
    """TensorScatter(past_cache, update, write_indices?) -> present_cache: a copy of the cache with ``update``
    written at each sample's index; no arithmetic (the circular mode's modulo is per row, not counted). Counted
    as the functional op reads and writes it, the whole cache (a runtime that updates it in place moves only the
    update)."""
    return layer_cost(node, graph, UnitKind.MOVE, params_from=())


COSTS: CostTable = {
    # Like LayerNormalization without the mean and the shift: square + add + scale by 1/rms + scale.
    **table(("RMSNormalization",), per_output_cost(RMS_AFFINE, params_from=(1,))),
    **table(("RotaryEmbedding",), _rotary_embedding),
    **table(("SwiGLU",), per_output_cost(SWIGLU)),
    **table(("LinearAttention",), _linear_attention),
    **table(("CausalConvWithState",), _causal_conv_with_state),
    **table(("TensorScatter",), _tensor_scatter),
}
